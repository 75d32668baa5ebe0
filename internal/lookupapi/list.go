package lookupapi

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/errs"
)

// Bounds of the list parameters.
const (
	DefaultLimit = 50
	MaxLimit     = 100
	maxQ         = 200 // characters of q
	minYear      = 1999
	maxYear      = 9999
	maxYears     = 30
)

// listParams are the query parameters of GET /cve.
var listParams = map[string]bool{
	"q": true, "severity": true, "kev": true, "fix": true, "epss_min": true,
	"year": true, "sort": true, "dir": true, "limit": true, "cursor": true,
}

// repeatable are the list parameters that may appear more than once.
var repeatable = map[string]bool{"severity": true, "year": true}

// listQuery is a parsed list request: the catalog query and the digest of
// its normalised form (filters, sort and direction), which cursors carry.
type listQuery struct {
	cve.ListQuery
	digest [8]byte
}

// queryValues parses the query string of r. Unlike URL.Query, which drops
// the pairs it cannot read, it refuses a malformed query (a bad %
// escape, a ';' separator) with an errs.ErrInvalid error rather than answer
// another question than the one asked.
func queryValues(r *http.Request) (url.Values, error) {
	v, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, errs.Invalidf("malformed query string: separate parameters with & and escape %% as %%25")
	}
	return v, nil
}

// parseListQuery reads the parameters of GET /cve. Empty values count as
// absent. Every value out of bounds or not UTF-8, an unknown parameter, a
// repeated single-valued one, and a cursor that is not ours or was made
// for another query are errs.ErrInvalid errors.
func parseListQuery(v url.Values) (*listQuery, error) {
	for name, vals := range v {
		if !listParams[name] {
			return nil, errs.Invalidf("unknown query parameter %q", truncate(name))
		}
		if !repeatable[name] && len(nonEmpty(vals)) > 1 {
			return nil, errs.Invalidf("query parameter %q is given more than once", name)
		}
		for _, s := range vals {
			if !utf8.ValidString(s) {
				return nil, errs.Invalidf("query parameter %q is not valid UTF-8", name)
			}
		}
	}
	get := func(name string) string {
		for _, s := range v[name] {
			if s != "" {
				return s
			}
		}
		return ""
	}
	q := &listQuery{}
	q.Q = strings.Join(strings.Fields(get("q")), " ")
	if n := utf8.RuneCountInString(q.Q); n > maxQ {
		return nil, errs.Invalidf("q is %d characters long; at most %d are allowed", n, maxQ)
	}
	for _, s := range nonEmpty(v["severity"]) {
		sev := strings.ToUpper(s)
		switch sev {
		case cve.SeverityCritical, cve.SeverityHigh, cve.SeverityMedium, cve.SeverityLow:
		default:
			return nil, errs.Invalidf("severity %q: want CRITICAL, HIGH, MEDIUM or LOW", truncate(s))
		}
		if !slices.Contains(q.Severities, sev) {
			q.Severities = append(q.Severities, sev)
		}
	}
	slices.Sort(q.Severities)
	var err error
	if q.KEV, err = parseBool("kev", get("kev")); err != nil {
		return nil, err
	}
	if q.Fix, err = parseBool("fix", get("fix")); err != nil {
		return nil, err
	}
	if s := get("epss_min"); s != "" {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(f) || f < 0 || f > 1 {
			return nil, errs.Invalidf("epss_min %q: want a number from 0 to 1", truncate(s))
		}
		q.EPSSMin = &f
	}
	for _, s := range nonEmpty(v["year"]) {
		y, err := strconv.Atoi(s)
		if err != nil || y < minYear || y > maxYear {
			return nil, errs.Invalidf("year %q: want a year from %d to %d", truncate(s), minYear, maxYear)
		}
		if !slices.Contains(q.Years, y) {
			q.Years = append(q.Years, y)
		}
	}
	if len(q.Years) > maxYears {
		return nil, errs.Invalidf("at most %d years are allowed", maxYears)
	}
	slices.Sort(q.Years)
	q.Sort = cve.SortPublished
	if s := get("sort"); s != "" {
		switch s {
		case cve.SortPublished, cve.SortEPSS, cve.SortCVSS, cve.SortCVE, cve.SortFix, cve.SortKEV:
			q.Sort = s
		default:
			return nil, errs.Invalidf("sort %q: want published, epss, cvss, cve, fix or kev", truncate(s))
		}
	}
	switch s := get("dir"); s {
	case "", "desc":
		q.Desc = true
	case "asc":
	default:
		return nil, errs.Invalidf("dir %q: want asc or desc", truncate(s))
	}
	q.Limit = DefaultLimit
	if s := get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxLimit {
			return nil, errs.Invalidf("limit %q: want a number from 1 to %d", truncate(s), MaxLimit)
		}
		q.Limit = n
	}
	q.digest = q.normalisedDigest()
	if s := get("cursor"); s != "" {
		pos, err := decodeCursor(s, q.digest)
		if err != nil {
			return nil, err
		}
		q.After = pos
	}
	return q, nil
}

func nonEmpty(vals []string) []string {
	out := vals[:0:0]
	for _, s := range vals {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

func parseBool(name, s string) (*bool, error) {
	switch s {
	case "":
		return nil, nil
	case "true":
		b := true
		return &b, nil
	case "false":
		b := false
		return &b, nil
	}
	return nil, errs.Invalidf("%s %q: want true or false", name, truncate(s))
}

// truncate shortens a client's value for an error message.
func truncate(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if utf8.RuneCountInString(s) > 40 {
		r := []rune(s)
		return string(r[:40]) + "…"
	}
	return s
}

// normalisedDigest hashes what selects and orders the rows, in a canonical
// form: the same query spelled differently has the same digest; limit and
// cursor are left out, so a client may change the page size while paging.
func (q *listQuery) normalisedDigest() [8]byte {
	var b strings.Builder
	b.WriteString("cve-list/1\x00")
	b.WriteString(q.Q)
	b.WriteString("\x00")
	b.WriteString(strings.Join(q.Severities, ","))
	fmt.Fprintf(&b, "\x00%s\x00%s\x00", boolString(q.KEV), boolString(q.Fix))
	if q.EPSSMin != nil {
		b.WriteString(strconv.FormatFloat(*q.EPSSMin, 'g', -1, 64))
	}
	b.WriteString("\x00")
	for _, y := range q.Years {
		b.WriteString(strconv.Itoa(y) + ",")
	}
	fmt.Fprintf(&b, "\x00%s\x00%v", q.Sort, q.Desc)
	sum := sha256.Sum256([]byte(b.String()))
	var d [8]byte
	copy(d[:], sum[:])
	return d
}

func boolString(b *bool) string {
	if b == nil {
		return ""
	}
	return strconv.FormatBool(*b)
}

// cursorVersion is the first byte of every cursor.
const cursorVersion = 1

// encodeCursor makes the opaque cursor of a position in the query with the
// given digest: base64url of version, digest, sort value and key.
func encodeCursor(p cve.Position, digest [8]byte) string {
	b := make([]byte, 0, 1+8+8+binary.MaxVarintLen64)
	b = append(b, cursorVersion)
	b = append(b, digest[:]...)
	b = binary.BigEndian.AppendUint64(b, math.Float64bits(p.Value))
	b = binary.AppendVarint(b, p.Key)
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeCursor reads a cursor and checks that it was made for the query
// with the given digest.
func decodeCursor(s string, digest [8]byte) (*cve.Position, error) {
	invalid := errs.Invalidf("cursor is not valid: pass the nextCursor of the previous page unchanged")
	if len(s) > 64 {
		return nil, invalid
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil || len(b) < 1+8+8+1 || b[0] != cursorVersion {
		return nil, invalid
	}
	if [8]byte(b[1:9]) != digest {
		return nil, errs.Invalidf("cursor belongs to another query: keep q, severity, kev, fix, epss_min, year, sort and dir as they were")
	}
	value := math.Float64frombits(binary.BigEndian.Uint64(b[9:17]))
	key, n := binary.Varint(b[17:])
	if n <= 0 || 17+n != len(b) || math.IsNaN(value) || math.IsInf(value, 0) {
		return nil, invalid
	}
	return &cve.Position{Value: value, Key: key}, nil
}

// listRecords answers GET /cve.
func (s *Server) listRecords(w http.ResponseWriter, r *http.Request) error {
	v, err := queryValues(r)
	if err != nil {
		return err
	}
	q, err := parseListQuery(v)
	if err != nil {
		return err
	}
	page, err := s.catalog.List(r.Context(), q.ListQuery)
	if err != nil {
		return err
	}
	buf := getBuf()
	defer putBuf(buf)
	out := append(*buf, `{"results":[`...)
	self, _ := s.links.bases(r)
	// What every row's self link starts with, escaped once for the page.
	var linkBuf [128]byte
	link := appendEscaped(append(linkBuf[:0], `,"_links":{"self":"`...), self)
	for i := range page.Rows {
		if i > 0 {
			out = append(out, ',')
		}
		out = appendSummary(out, &page.Rows[i], link)
	}
	out = append(out, `],"nextCursor":`...)
	if page.Next != nil {
		out = appendString(out, encodeCursor(*page.Next, q.digest))
	} else {
		out = append(out, "null"...)
	}
	out = append(out, "}\n"...)
	*buf = out
	writeCacheable(w, r, "application/json", cacheList, out)
	return nil
}

// appendSummary appends a CveSummary of the list endpoint: the lean row
// with its self link. link is the link's opening, `,"_links":{"self":"`
// and the escaped link base, which the row's id completes.
func appendSummary(dst []byte, s *cve.Summary, link []byte) []byte {
	dst = append(dst, `{"cveId":`...)
	dst = appendString(dst, s.CVEID)
	dst = appendSummaryScores(dst, s)
	dst = append(dst, link...)
	dst = appendEscaped(dst, s.CVEID)
	return append(dst, `"}}`...)
}

// appendSummaryScores appends the fields of a summary from severity to
// publishedAt, each after a comma.
func appendSummaryScores(dst []byte, s *cve.Summary) []byte {
	dst = append(dst, `,"severity":`...)
	dst = appendOptString(dst, s.Severity)
	dst = append(dst, `,"cvss":`...)
	dst = appendOptFloat(dst, s.CVSS)
	dst = append(dst, `,"cvssVersion":`...)
	dst = appendOptString(dst, s.CVSSVersion)
	dst = append(dst, `,"epss":`...)
	dst = appendOptFloat(dst, s.EPSS)
	dst = append(dst, `,"isKev":`...)
	dst = strconv.AppendBool(dst, s.IsKEV)
	dst = append(dst, `,"hasRemediation":`...)
	dst = strconv.AppendBool(dst, s.HasRemediation)
	dst = append(dst, `,"publishedAt":`...)
	if s.PublishedAt != nil {
		dst = appendTime(dst, *s.PublishedAt)
	} else {
		dst = append(dst, "null"...)
	}
	return dst
}

func appendOptString(dst []byte, s *string) []byte {
	if s == nil {
		return append(dst, "null"...)
	}
	return appendString(dst, *s)
}

func appendOptFloat(dst []byte, f *float64) []byte {
	if f == nil {
		return append(dst, "null"...)
	}
	return appendFloat(dst, *f)
}
