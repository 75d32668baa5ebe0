// Package eol reads endoflife.date's support windows of product releases
// and hands them to the sink as cve.Lifecycle values. It reads three forms:
//
//   - products/<product>.md from the endoflife.date repository: YAML front
//     matter between the first two "---" lines, with a releases list
//     (releaseCycle, codename, eol, eoes, latest ...);
//   - the API v1 product document, https://endoflife.date/api/v1/products/<product>/
//     ({"result": {"name": ..., "releases": [{"name", "codename",
//     "isEol", "eolFrom", "isEoes", "eoesFrom", "latest": {"name"}}]}}),
//     and the all-products document /api/v1/products/full/ whose result is
//     a list of those;
//   - the older API, https://endoflife.date/api/<product>.json: a list of
//     {"cycle", "codename", "eol", "eoes" or "extendedSupport", "latest"}.
//
// The version lists of the release-data repository (releases/<product>.json,
// {"releases": {...}, "versions": {...}}) are passed over: the product
// files are where the support windows are curated.
package eol

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/feed"
)

// Parser reads endoflife.date product files and API documents.
var Parser = feed.Parser{
	Name:  "eol",
	Exts:  []string{".md", ".json"},
	Parse: parse,
}

// maxFile bounds the size of one document; the all-products API document
// is a few megabytes.
const maxFile = 64 << 20

var (
	errNoFrontMatter = errors.New("no YAML front matter between --- lines")
	errNoCycle       = errors.New("release without a cycle")
	errWhen          = errors.New("want a date YYYY-MM-DD or a boolean")
)

// parse tells the forms apart by their content, since an API URL such as
// https://endoflife.date/api/v1/products/debian/ names no file ending.
func parse(ctx context.Context, name string, r io.Reader, sink feed.Sink) error {
	data, err := io.ReadAll(io.LimitReader(r, maxFile+1))
	if err != nil {
		return fmt.Errorf("eol %s: %w", name, err)
	}
	if len(data) > maxFile {
		return fmt.Errorf("eol %s: larger than %d bytes", name, maxFile)
	}
	p := parser{ctx: ctx, name: name, sink: sink}
	trimmed := bytes.TrimLeft(data, " \t\r\n\ufeff")
	if len(trimmed) > 0 && (trimmed[0] == '{' || trimmed[0] == '[') {
		err = p.json(trimmed)
	} else {
		err = p.markdown(data)
	}
	var se sinkError
	if errors.As(err, &se) {
		return se.err
	}
	if err != nil && !errors.Is(err, ctx.Err()) {
		return fmt.Errorf("eol %s: %w", name, err)
	}
	return err
}

type parser struct {
	ctx  context.Context
	name string
	sink feed.Sink
}

// sinkError carries an error of the sink out unwrapped.
type sinkError struct{ err error }

func (e sinkError) Error() string { return e.err.Error() }

// product is the product id a file name implies: its base name without
// the file ending.
func (p *parser) product() string {
	base := path.Base(strings.ReplaceAll(p.name, "\\", "/"))
	if i := strings.LastIndexByte(base, '!'); i >= 0 { // a file inside a zip
		base = base[i+1:]
	}
	base = strings.TrimSuffix(base, path.Ext(base))
	return base
}

// emit checks l and hands it to the sink, or rejects it as file#cycle (or
// file#index when it has no cycle).
func (p *parser) emit(l *cve.Lifecycle, index int, err error) error {
	if err := p.ctx.Err(); err != nil {
		return err
	}
	if err == nil && l.Cycle == "" {
		err = errNoCycle
	}
	if err == nil && l.Product == "" {
		err = errors.New("release without a product")
	}
	if err != nil {
		id := l.Cycle
		if id == "" {
			id = strconv.Itoa(index)
		}
		if l.Product != "" && l.Product != p.product() {
			id = l.Product + "/" + id
		}
		p.sink.Reject(p.name+"#"+id, err)
		return nil
	}
	if err := p.sink.Lifecycle(l); err != nil {
		return sinkError{err}
	}
	return nil
}

// markdown reads a product file of the endoflife.date repository.
func (p *parser) markdown(data []byte) error {
	front, err := frontMatter(data)
	if err != nil {
		return err
	}
	var doc struct {
		Releases []yaml.Node `yaml:"releases"`
	}
	if err := yaml.Unmarshal(front, &doc); err != nil {
		return fmt.Errorf("front matter: %w", err)
	}
	product := p.product()
	for i := range doc.Releases {
		var rel struct {
			Cycle           scalar `yaml:"releaseCycle"`
			Codename        scalar `yaml:"codename"`
			EOL             scalar `yaml:"eol"`
			EOES            scalar `yaml:"eoes"`
			ExtendedSupport scalar `yaml:"extendedSupport"`
			Latest          scalar `yaml:"latest"`
		}
		err := doc.Releases[i].Decode(&rel)
		l := &cve.Lifecycle{
			Product:  product,
			Cycle:    strings.TrimSpace(rel.Cycle.text()),
			Codename: rel.Codename.text(),
			Latest:   rel.Latest.text(),
		}
		if err == nil {
			l.EOL, err = rel.EOL.when("eol")
		}
		if err == nil {
			eoes := rel.EOES
			if !eoes.set {
				eoes = rel.ExtendedSupport
			}
			l.EOES, err = eoes.when("eoes")
		}
		if err := p.emit(l, i, err); err != nil {
			return err
		}
	}
	return nil
}

// frontMatter returns the text between the first two "---" lines, the
// first of which must open the file.
func frontMatter(data []byte) ([]byte, error) {
	data = bytes.TrimPrefix(data, []byte("\ufeff"))
	start := -1
	for pos := 0; pos < len(data); {
		line, next := data[pos:], len(data)
		if i := bytes.IndexByte(line, '\n'); i >= 0 {
			line, next = line[:i], pos+i+1
		}
		switch {
		case string(bytes.TrimRight(line, " \t\r")) == "---":
			if start >= 0 {
				return data[start:pos], nil
			}
			start = next
		case start < 0:
			return nil, errNoFrontMatter
		}
		pos = next
	}
	return nil, errNoFrontMatter
}

// scalar is a YAML scalar as written, so that 3.10 stays "3.10" and dates
// stay as they are.
type scalar struct {
	set   bool
	tag   string
	value string
}

func (s *scalar) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: want a single value", n.Line)
	}
	*s = scalar{set: true, tag: n.ShortTag(), value: n.Value}
	return nil
}

func (s scalar) text() string {
	if s.tag == "!!null" {
		return ""
	}
	return s.value
}

// when reads an eol or eoes value: a date, or a boolean (true: ended on a
// day not known; false: not ended).
func (s scalar) when(field string) (string, error) {
	if !s.set || s.tag == "!!null" {
		return "", nil
	}
	w, err := when(s.value)
	if err != nil {
		return "", fmt.Errorf("%s: %w", field, err)
	}
	return w, nil
}

// when normalizes a date or a boolean to the form of cve.Lifecycle.
func when(v string) (string, error) {
	v = strings.TrimSpace(v)
	switch strings.ToLower(v) {
	case "true":
		return "true", nil
	case "false", "":
		return "", nil
	}
	if len(v) >= 10 {
		if t, err := time.Parse(time.DateOnly, v[:10]); err == nil && (len(v) == 10 || v[10] == 'T' || v[10] == ' ') {
			return t.Format(time.DateOnly), nil
		}
	}
	if len(v) > 40 {
		v = v[:40] + "…"
	}
	return "", fmt.Errorf("%q: %w", v, errWhen)
}

// json reads an API document, or passes over a release-data version list.
func (p *parser) json(data []byte) error {
	if data[0] == '[' {
		return p.apiV0(data)
	}
	var doc struct {
		Result   json.RawMessage `json:"result"`
		Releases json.RawMessage `json:"releases"`
		Versions json.RawMessage `json:"versions"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return err
	}
	switch {
	case len(doc.Result) > 0:
		return p.apiV1(doc.Result)
	case len(doc.Releases) > 0 || len(doc.Versions) > 0:
		return nil // a release-data version list
	}
	return errors.New("not an endoflife.date document: no result, no releases")
}

// v1Product is a product of the API v1.
type v1Product struct {
	Name     string            `json:"name"`
	Releases []json.RawMessage `json:"releases"`
}

// apiV1 reads the result of a v1 product document (an object) or of the
// all-products document (a list of products).
func (p *parser) apiV1(result json.RawMessage) error {
	var products []v1Product
	if r := bytes.TrimSpace(result); len(r) > 0 && r[0] == '[' {
		if err := json.Unmarshal(r, &products); err != nil {
			return fmt.Errorf("result: %w", err)
		}
	} else {
		var one struct {
			v1Product
			IsEOL *bool `json:"isEol"`
		}
		if err := json.Unmarshal(r, &one); err != nil {
			return fmt.Errorf("result: %w", err)
		}
		if one.Releases == nil && one.IsEOL != nil {
			return errors.New("result: a single release names no product; read the product document")
		}
		products = []v1Product{one.v1Product}
	}
	for _, prod := range products {
		if prod.Name == "" {
			return errors.New("result: product without a name")
		}
		for i, raw := range prod.Releases {
			var rel struct {
				Name     json.RawMessage `json:"name"`
				Codename *string         `json:"codename"`
				IsEOL    *bool           `json:"isEol"`
				EOLFrom  *string         `json:"eolFrom"`
				IsEOES   *bool           `json:"isEoes"`
				EOESFrom *string         `json:"eoesFrom"`
				Latest   *struct {
					Name json.RawMessage `json:"name"`
				} `json:"latest"`
			}
			l := &cve.Lifecycle{Product: prod.Name}
			err := json.Unmarshal(raw, &rel)
			if err == nil {
				l.Cycle, err = text(rel.Name)
			}
			if err == nil {
				l.Codename = deref(rel.Codename)
				if rel.Latest != nil {
					l.Latest, err = text(rel.Latest.Name)
				}
			}
			if err == nil {
				l.EOL, err = v1When("eolFrom", rel.EOLFrom, rel.IsEOL)
			}
			if err == nil {
				l.EOES, err = v1When("eoesFrom", rel.EOESFrom, rel.IsEOES)
			}
			if err := p.emit(l, i, err); err != nil {
				return err
			}
		}
	}
	return nil
}

// v1When reads a date field of the API v1 and the boolean beside it: the
// date when there is one, else "true" when the boolean says it has ended.
func v1When(field string, from *string, is *bool) (string, error) {
	if from != nil && *from != "" {
		w, err := when(*from)
		if err != nil || w == "true" {
			return "", fmt.Errorf("%s: %q: %w", field, *from, errWhen)
		}
		return w, nil
	}
	if is != nil && *is {
		return "true", nil
	}
	return "", nil
}

// apiV0 reads the older API's list of cycles.
func (p *parser) apiV0(data []byte) error {
	var cycles []json.RawMessage
	if err := json.Unmarshal(data, &cycles); err != nil {
		return err
	}
	product := p.product()
	for i, raw := range cycles {
		var rel struct {
			Cycle           json.RawMessage `json:"cycle"`
			Codename        *string         `json:"codename"`
			EOL             json.RawMessage `json:"eol"`
			EOES            json.RawMessage `json:"eoes"`
			ExtendedSupport json.RawMessage `json:"extendedSupport"`
			Latest          json.RawMessage `json:"latest"`
		}
		l := &cve.Lifecycle{Product: product}
		err := json.Unmarshal(raw, &rel)
		if err == nil {
			l.Cycle, err = text(rel.Cycle)
		}
		if err == nil {
			l.Codename = deref(rel.Codename)
			l.Latest, err = text(rel.Latest)
		}
		if err == nil {
			l.EOL, err = jsonWhen("eol", rel.EOL)
		}
		if err == nil {
			eoes := rel.EOES
			if len(eoes) == 0 {
				eoes = rel.ExtendedSupport
			}
			l.EOES, err = jsonWhen("eoes", eoes)
		}
		if err := p.emit(l, i, err); err != nil {
			return err
		}
	}
	return nil
}

// jsonWhen reads a JSON value that is a date, a boolean or null.
func jsonWhen(field string, raw json.RawMessage) (string, error) {
	var v any
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &v); err != nil {
			return "", fmt.Errorf("%s: %w", field, err)
		}
	}
	switch v := v.(type) {
	case nil:
		return "", nil
	case bool:
		if v {
			return "true", nil
		}
		return "", nil
	case string:
		w, err := when(v)
		if err != nil {
			return "", fmt.Errorf("%s: %w", field, err)
		}
		return w, nil
	}
	return "", fmt.Errorf("%s: %s: %w", field, raw, errWhen)
}

// text reads a JSON string or number (a cycle is sometimes written as a
// number) as text; null and absent are "".
func text(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	if raw[0] == '"' {
		var s string
		err := json.Unmarshal(raw, &s)
		return strings.TrimSpace(s), err
	}
	var n json.Number
	if err := json.Unmarshal(raw, &n); err != nil {
		return "", fmt.Errorf("want a string or a number, got %s", truncate(raw))
	}
	return n.String(), nil
}

func truncate(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "…"
	}
	return string(b)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
