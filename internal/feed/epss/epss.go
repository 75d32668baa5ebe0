// Package epss reads FIRST's Exploit Prediction Scoring System scores: the
// daily CSV file (epss_scores-YYYY-MM-DD.csv, gzip removed by the caller)
// and the header-less mirror form with semicolons.
//
// The daily file starts with a comment line naming the model and the score
// date, then a header, then one row per CVE:
//
//	#model_version:v2023.03.01,score_date:2025-02-20T00:00:00+0000
//	cve,epss,percentile
//	CVE-1999-0001,0.00383,0.73075
//
// The mirror form has rows only, CVE-2021-44228;0.999990000;1.000000000,
// and so no date or model.
package epss

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/feed"
)

// The scores as a record's dataSources names them.
const (
	sourceName    = "epss"
	sourceLicense = "FIRST EPSS (free to use, attribution to FIRST.org)"
	sourceURL     = "https://www.first.org/epss/"
)

// maxLine bounds a line of the file; real lines are under 100 bytes.
const maxLine = 64 << 10

// Parser reads EPSS score files.
var Parser = feed.Parser{
	Name:  "epss",
	Exts:  []string{".csv"},
	Parse: parse,
}

// scored is a Facts together with what its pointers point to, so that one
// row costs one allocation besides its id.
type scored struct {
	facts cve.Facts
	epss  cve.EPSS
	url   string
}

var (
	errFields = errors.New("want three fields: cve, epss, percentile")
	errRange  = errors.New("want a number from 0 to 1")
)

func parse(ctx context.Context, name string, r io.Reader, sink feed.Sink) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	var model, date string
	for line := 1; sc.Scan(); line++ {
		if line&4095 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		b := sc.Bytes()
		if line == 1 {
			b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf"))
		}
		b = bytes.TrimSpace(b)
		switch {
		case len(b) == 0:
			continue
		case b[0] == '#':
			model, date = comment(b, model, date)
			continue
		case isHeader(b):
			if !bytes.EqualFold(b, []byte("cve,epss,percentile")) && !bytes.EqualFold(b, []byte("cve;epss;percentile")) {
				return fmt.Errorf("epss %s:%d: unexpected header %q", name, line, b)
			}
			continue
		}
		s := &scored{url: sourceURL}
		if err := s.row(b); err != nil {
			sink.Reject(name+":"+strconv.Itoa(line), err)
			continue
		}
		s.epss.Date, s.epss.Model = date, model
		s.facts.Feed = sourceName
		s.facts.Source = cve.DataSource{Name: sourceName, License: sourceLicense, URL: &s.url}
		s.facts.EPSS = &s.epss
		if err := sink.Facts(&s.facts); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("epss %s: %w", name, err)
	}
	return nil
}

// row fills s from one data row.
func (s *scored) row(b []byte) error {
	sep := byte(',')
	if i := bytes.IndexAny(b, ",;"); i >= 0 {
		sep = b[i]
	}
	id, rest, ok := bytes.Cut(b, []byte{sep})
	if !ok {
		return errFields
	}
	score, pct, ok := bytes.Cut(rest, []byte{sep})
	if !ok || bytes.IndexByte(pct, sep) >= 0 {
		return errFields
	}
	var err error
	if s.facts.CVEID, err = parseID(bytes.TrimSpace(id)); err != nil {
		return err
	}
	if s.epss.Score, err = unit(bytes.TrimSpace(score)); err != nil {
		return fmt.Errorf("%s epss: %w", s.facts.CVEID, err)
	}
	if s.epss.Percentile, err = unit(bytes.TrimSpace(pct)); err != nil {
		return fmt.Errorf("%s percentile: %w", s.facts.CVEID, err)
	}
	return nil
}

// unit parses a probability or a percentile.
func unit(b []byte) (float64, error) {
	v, err := strconv.ParseFloat(string(b), 64)
	if err != nil || !(v >= 0 && v <= 1) {
		return 0, fmt.Errorf("%q: %w", b, errRange)
	}
	return v, nil
}

// parseID is cve.ParseID for a byte slice, without the intermediate string:
// it accepts exactly what cve.ParseID accepts and returns the same
// canonical id.
func parseID(b []byte) (string, error) {
	ok := len(b) >= 13 && len(b) <= 64 && b[8] == '-' &&
		(b[0]|0x20) == 'c' && (b[1]|0x20) == 'v' && (b[2]|0x20) == 'e' && b[3] == '-'
	for i := 4; ok && i < len(b); i++ {
		ok = i == 8 || '0' <= b[i] && b[i] <= '9'
	}
	if !ok {
		return cve.ParseID(string(b)) // for its error
	}
	if b[0] == 'C' && b[1] == 'V' && b[2] == 'E' {
		return string(b), nil
	}
	return "CVE-" + string(b[4:]), nil
}

// isHeader reports whether a line is a header: its first field is "cve".
func isHeader(b []byte) bool {
	return len(b) >= 4 && bytes.EqualFold(b[:3], []byte("cve")) && (b[3] == ',' || b[3] == ';')
}

// comment reads the model and the score date from a comment line such as
// #model_version:v2023.03.01,score_date:2025-02-20T00:00:00+0000, keeping
// the previous values of what it does not name. A score date that is not a
// date leaves the date unknown.
func comment(b []byte, model, date string) (string, string) {
	for _, kv := range bytes.Split(bytes.TrimLeft(b, "# "), []byte(",")) {
		k, v, _ := bytes.Cut(kv, []byte(":"))
		v = bytes.TrimSpace(v)
		switch string(bytes.TrimSpace(k)) {
		case "model_version":
			model = string(v)
		case "score_date":
			date = ""
			if len(v) >= 10 {
				if t, err := time.Parse(time.DateOnly, string(v[:10])); err == nil {
					date = t.Format(time.DateOnly)
				}
			}
		}
	}
	return model, date
}
