package lookupapi

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ossf/osv-schema/bindings/go/osvschema"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/patchline/patchline/internal/errs"
	"github.com/patchline/patchline/internal/exposure"
	"github.com/patchline/patchline/internal/httpx"
	"github.com/patchline/patchline/internal/sbom"
)

// OSVBasePath is the path of the OSV-compatible API on the lookup
// listener: an OSV client takes it as its base URL
// (http://HOST:PORT/osv), and asks {base}/v1/query, {base}/v1/querybatch
// and {base}/v1/vulns/{id}.
const OSVBasePath = "/osv"

// The bounds of the OSV API, OSV.dev's where it has them.
const (
	// MaxOSVBatch is the number of queries a querybatch may hold.
	MaxOSVBatch = 1000
	// osvPageSize is the number of documents a query answers per page.
	osvPageSize = 100
	// A query of a batch answers osvBatchPageSize ids a page until the
	// batch has answered osvBatchThreshold ids, and osvBatchPageSizeAfter
	// a page from then on: OSV.dev's _MAX_VULN_LISTED_PRE_EXCEEDED,
	// _MAX_VULN_RESP_THRESH and _MAX_VULN_LISTED_POST_EXCEEDED.
	osvBatchPageSize      = 1000
	osvBatchThreshold     = 3000
	osvBatchPageSizeAfter = 5
	maxOSVQueryBody       = 64 << 10
	maxOSVBatchBody       = 4 << 20
)

// errIndexBuilding answers package queries before the first build of the
// package index.
var errIndexBuilding = errors.New("the package index is being built from the catalog; retry in a few seconds")

// gRPC status codes of OSV.dev's error bodies, by HTTP status.
var grpcCodes = map[int]int{
	http.StatusBadRequest:            3,  // INVALID_ARGUMENT
	http.StatusNotFound:              5,  // NOT_FOUND
	http.StatusRequestEntityTooLarge: 3,  // INVALID_ARGUMENT
	http.StatusServiceUnavailable:    14, // UNAVAILABLE
	http.StatusInternalServerError:   13, // INTERNAL
}

// osvProblem is the error body of the OSV API: problem+json, with the
// "code" and "message" members of OSV.dev's error bodies beside it.
type osvProblem struct {
	httpx.Problem
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// osvHandle adapts an OSV handler: errors are written as osvProblem.
func (s *Server) osvHandle(h httpx.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		err := h(w, r)
		if err == nil {
			return
		}
		status, detail := errs.StatusOf(err), errs.Message(err)
		if errors.Is(err, errIndexBuilding) {
			status, detail = http.StatusServiceUnavailable, err.Error()
			w.Header().Set("Retry-After", "5")
		}
		if status == http.StatusInternalServerError {
			s.logger.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "err", err)
			detail = ""
		}
		if detail == "" {
			detail = strings.ToLower(http.StatusText(status))
		}
		writeOSVProblem(w, status, detail)
	})
}

func writeOSVProblem(w http.ResponseWriter, status int, detail string) {
	code, ok := grpcCodes[status]
	if !ok {
		code = 2 // UNKNOWN
	}
	body, _ := json.Marshal(osvProblem{
		Problem: httpx.Problem{Type: "about:blank", Title: http.StatusText(status), Status: status, Detail: detail},
		Code:    code, Message: detail,
	})
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Content-Length", strconv.Itoa(len(body)+1))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(append(body, '\n'))
}

// packageIndex returns the index package queries read, or
// errIndexBuilding while it is not built yet.
func (s *Server) packageIndex() (*exposure.Index, error) {
	if s.packages == nil {
		return nil, errs.NotFoundf("package queries are not served here")
	}
	if !s.packages.Built() {
		s.packages.Want()
		return nil, errIndexBuilding
	}
	return s.packages, nil
}

// osvQueryBody is a query of OSV.dev's API, as its clients send it:
// protobuf JSON, whose field names may come in proto form (page_token) or
// in lowerCamelCase (pageToken).
type osvQueryBody struct {
	Package *struct {
		Name      string `json:"name"`
		Ecosystem string `json:"ecosystem"`
		PURL      string `json:"purl"`
	} `json:"package"`
	Version    string `json:"version"`
	Commit     string `json:"commit"`
	PageToken  string `json:"page_token"`
	PageToken2 string `json:"pageToken"`
}

func (q *osvQueryBody) pageToken() string { return q.PageToken + q.PageToken2 }

// osvBatchBody is a querybatch of OSV.dev's API.
type osvBatchBody struct {
	Queries []*osvQueryBody `json:"queries"`
}

// osvPackage checks an OSV query and returns the package it asks about.
func osvPackage(q *osvQueryBody) (sbom.Package, error) {
	if q == nil {
		return sbom.Package{}, errs.Invalidf("query is null")
	}
	if q.Commit != "" {
		return sbom.Package{}, errs.Invalidf("commit queries are not supported: this service matches package versions, not commits")
	}
	if q.Version != "" && q.Commit != "" {
		return sbom.Package{}, errs.Invalidf("version and commit given: give one or the other")
	}
	p := q.Package
	if p == nil {
		return sbom.Package{}, errs.Invalidf(`query has no "package": want {"package": {"name", "ecosystem"} or {"purl"}, "version"}`)
	}
	var pkg sbom.Package
	if p.PURL != "" {
		if p.Name != "" || p.Ecosystem != "" {
			return sbom.Package{}, errs.Invalidf("name and ecosystem given beside a purl: give one or the other")
		}
		var err error
		if pkg, err = sbom.FromPURL(p.PURL); err != nil {
			return sbom.Package{}, err
		}
		if pkg.Version != "" && q.Version != "" {
			return sbom.Package{}, errs.Invalidf("version given both in the purl and in the query")
		}
	} else {
		if p.Ecosystem == "" {
			return sbom.Package{}, errs.Invalidf("package %q has no ecosystem", p.Name)
		}
		pkg = sbom.Package{Ecosystem: p.Ecosystem, Name: p.Name}
	}
	if q.Version != "" {
		pkg.Version = q.Version
	}
	return pkg, sbom.Check(pkg)
}

// batchMatch is what a query of a batch found: the CVEs of its package
// (exposure.Index.AffectedCVEs: those that affect its version or, without
// version, every CVE of the package; a CVE whose fixes cannot be compared
// with the version is left out, as an OSV answer says "affected" or
// nothing), as many as its page may need.
type batchMatch struct {
	cves     []exposure.CVERef
	complete bool // false when more CVEs follow
}

// matchBatch returns the matches of the queries of a batch, each from
// its offset. A page holds osvBatchPageSize ids only while the batch has
// answered no more than osvBatchThreshold (see pageEnd): the queries are
// matched in order for as many ids as that, until the batch passes the
// threshold; every later query needs only osvBatchPageSizeAfter ids and
// the one that tells whether more follow, and they are shared among as
// many goroutines as there are processors.
func matchBatch(idx *exposure.Index, pkgs []sbom.Package, offsets []int) []batchMatch {
	out := make([]batchMatch, len(pkgs))
	total, i := 0, 0
	for ; i < len(pkgs) && total <= osvBatchThreshold; i++ {
		m := &out[i]
		m.cves, m.complete = idx.AffectedCVEs(pkgs[i], offsets[i]+osvBatchPageSize+1)
		_, total = pageEnd(len(m.cves), offsets[i], total)
	}
	rest := len(pkgs) - i
	workers := min(runtime.GOMAXPROCS(0), (rest+63)/64)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for j := i + w; j < len(pkgs); j += workers {
				m := &out[j]
				m.cves, m.complete = idx.AffectedCVEs(pkgs[j], offsets[j]+osvBatchPageSizeAfter+1)
			}
		})
	}
	wg.Wait()
	return out
}

// pageEnd returns where the page of a query ends that has n ids and starts
// at offset, when the batch has answered total ids before it, and the
// batch's total with the page: osvBatchPageSize ids at the most while the
// total is at most osvBatchThreshold, osvBatchPageSizeAfter once it is
// more, as OSV.dev counts.
func pageEnd(n, offset, total int) (end, after int) {
	end = offset
	for end < n {
		limit := osvBatchPageSize
		if total > osvBatchThreshold {
			limit = osvBatchPageSizeAfter
		}
		if end-offset >= limit {
			break
		}
		end++
		total++
	}
	return end, total
}

// pageToken is the opaque token of the page after offset of the query
// whose digest is sum.
func pageToken(sum uint64, offset int) string {
	b := binary.BigEndian.AppendUint64(nil, sum)
	b = binary.BigEndian.AppendUint32(b, uint32(offset))
	return base64.RawURLEncoding.EncodeToString(b)
}

// parsePageToken returns the offset of a page token of the query whose
// digest is sum.
func parsePageToken(tok string, sum uint64) (int, error) {
	if tok == "" {
		return 0, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil || len(b) != 12 || binary.BigEndian.Uint64(b) != sum {
		return 0, errs.Invalidf("page_token %q was not given for this query", clipDetail(tok))
	}
	return int(binary.BigEndian.Uint32(b[8:])), nil
}

// querySum is the digest of a package query that its page tokens carry.
func querySum(p sbom.Package) uint64 {
	h := fnv.New64a()
	for _, s := range []string{p.Ecosystem, p.Name, p.Version} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return h.Sum64()
}

func clipDetail(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// osvQuery answers POST /osv/v1/query: the OSV documents of the CVEs that
// affect a package version, osvPageSize per page.
func (s *Server) osvQuery(w http.ResponseWriter, r *http.Request) error {
	var q osvQueryBody
	if err := decodeBody(w, r, maxOSVQueryBody, &q); err != nil {
		return err
	}
	pkg, err := osvPackage(&q)
	if err != nil {
		return err
	}
	idx, err := s.packageIndex()
	if err != nil {
		return err
	}
	sum := querySum(pkg)
	offset, err := parsePageToken(q.pageToken(), sum)
	if err != nil {
		return err
	}
	cves, _ := idx.AffectedCVEs(pkg, offset+osvPageSize+1)
	var (
		vulns []*osvschema.Vulnerability
		next  string
	)
	if offset < len(cves) {
		end := min(offset+osvPageSize, len(cves))
		for _, c := range cves[offset:end] {
			rec, err := s.catalog.Record(r.Context(), c.ID)
			if errors.Is(err, errs.ErrNotFound) {
				continue // removed since the index last saw it
			}
			if err != nil {
				return err
			}
			v, err := OSV(rec)
			if err != nil {
				return err
			}
			vulns = append(vulns, v)
		}
		if end < len(cves) {
			next = pageToken(sum, end)
		}
	}
	out, err := appendVulnList(nil, vulns, next)
	if err != nil {
		return err
	}
	writeOSVJSON(w, out)
	return nil
}

// osvQueryBatch answers POST /osv/v1/querybatch: for each query, in
// order, the ids and modification times of the CVEs that affect it, paged
// as OSV.dev pages them: a query's page ends at osvBatchPageSize ids while
// the batch has answered no more than osvBatchThreshold, at
// osvBatchPageSizeAfter once it has, so that a batch answers a bounded
// number of ids however many CVEs its packages have; the rest follows
// with the query's next_page_token.
func (s *Server) osvQueryBatch(w http.ResponseWriter, r *http.Request) error {
	var b osvBatchBody
	if err := decodeBody(w, r, maxOSVBatchBody, &b); err != nil {
		return err
	}
	if b.Queries == nil {
		return errs.Invalidf(`request body has no "queries": want {"queries": [{"package": …, "version": …}, …]}`)
	}
	if n := len(b.Queries); n > MaxOSVBatch {
		return errs.Invalidf("queries holds %d queries; at most %d are allowed", n, MaxOSVBatch)
	}
	pkgs := make([]sbom.Package, len(b.Queries))
	for i, q := range b.Queries {
		p, err := osvPackage(q)
		if err != nil {
			return errs.Invalidf("queries[%d]: %s", i, errs.Message(err))
		}
		pkgs[i] = p
	}
	idx, err := s.packageIndex()
	if err != nil {
		return err
	}
	offsets := make([]int, len(pkgs))
	for i, p := range pkgs {
		if offsets[i], err = parsePageToken(b.Queries[i].pageToken(), querySum(p)); err != nil {
			return errs.Invalidf("queries[%d]: %s", i, errs.Message(err))
		}
	}
	matches := matchBatch(idx, pkgs, offsets)
	out := []byte(`{"results":[`)
	total := 0 // ids answered by the batch so far
	for i, p := range pkgs {
		m, offset := matches[i], offsets[i]
		if i > 0 {
			out = append(out, ',')
		}
		// {"vulns":[{"id":…,"modified":…},…],"next_page_token":…}, each
		// member left out when empty, as protobuf JSON writes it.
		out = append(out, '{')
		var end int
		end, total = pageEnd(len(m.cves), offset, total)
		var page []exposure.CVERef // none for a token past the end of the matches
		if end > offset {
			page = m.cves[offset:end]
		}
		for j, c := range page {
			if j == 0 {
				out = append(out, `"vulns":[`...)
			} else {
				out = append(out, ',')
			}
			out = append(out, `{"id":`...)
			out = appendString(out, c.ID)
			out = append(out, `,"modified":"`...)
			out = c.Modified.UTC().AppendFormat(out, time.RFC3339Nano)
			out = append(out, `"}`...)
		}
		if len(page) > 0 {
			out = append(out, ']')
		}
		if end < len(m.cves) || !m.complete {
			if len(page) > 0 {
				out = append(out, ',')
			}
			out = append(out, `"next_page_token":`...)
			out = appendString(out, pageToken(querySum(p), end))
		}
		out = append(out, '}')
	}
	out = append(out, "]}\n"...)
	writeOSVJSON(w, out)
	return nil
}

// appendOSV appends the compact protobuf JSON of an OSV document, with
// the schema's field names, as OSV.dev writes it.
func appendOSV(dst []byte, v *osvschema.Vulnerability) ([]byte, error) {
	b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(v)
	if err != nil {
		return dst, fmt.Errorf("encode osv %s: %w", v.GetId(), err)
	}
	buf := bytes.NewBuffer(dst)
	if err := json.Compact(buf, b); err != nil {
		return dst, fmt.Errorf("encode osv %s: %w", v.GetId(), err)
	}
	return buf.Bytes(), nil
}

// appendVulnList appends a VulnerabilityList of OSV.dev's API:
// {"vulns": […], "next_page_token": "…"}, each member left out when
// empty, as protobuf JSON does.
func appendVulnList(dst []byte, vulns []*osvschema.Vulnerability, next string) ([]byte, error) {
	dst = append(dst, '{')
	if len(vulns) > 0 {
		dst = append(dst, `"vulns":[`...)
		for i, v := range vulns {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = appendOSV(dst, v); err != nil {
				return dst, err
			}
		}
		dst = append(dst, ']')
	}
	if next != "" {
		if len(vulns) > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `"next_page_token":`...)
		dst = appendString(dst, next)
	}
	return append(dst, '}'), nil
}

// writeOSVJSON writes an answer of the OSV API, never cached: it follows
// the catalog.
func writeOSVJSON(w http.ResponseWriter, body []byte) {
	if n := len(body); n == 0 || body[n-1] != '\n' {
		body = append(body, '\n')
	}
	w.Header().Set("Cache-Control", "no-store")
	httpx.WriteJSONBytes(w, http.StatusOK, body)
}
