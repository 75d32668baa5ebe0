// fakeUpstream, every source the sync reads, served over HTTP from the
// shared sample files. This file is over 600 lines because it holds one
// fake per source, each a few dozen lines, which every test of this
// package shares.

package upstream

import (
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/patchline/patchline/internal/cve"
)

// sampleDir holds the real upstream files the fake upstreams serve.
const sampleDir = "../sample/data"

// The fake upstreams below serve the files of sampleDir in the layout and
// with the protocol of each real upstream, and change what they serve from
// one stage to the next as the real ones do over time:
//
//   - NVD API 2.0: the records of every sample NVD file (the last copy of a
//     CVE wins, as in an ingest of the directory), in pages, filtered by
//     lastModified windows of at most 120 days; a record exists once the
//     stage's clock has passed its lastModified.
//   - GitHub releases of the CVE List: baseline and delta zips of the
//     sample records in the real asset names and zip layouts, two releases
//     a page with Link headers, an ETag on the list.
//   - KEV, EPSS, the Debian tracker, endoflife.date products: documents
//     with ETag and Last-Modified, 304 on a matching conditional request.
//   - The OSV bucket: <ecosystem>/modified_id.csv, all.zip and <id>.json.
//   - The MSRC API: the update index and the monthly CVRF documents.
//
// Faults can be set per path: an error status (once), a body cut short.
type fakeUpstream struct {
	t   testing.TB
	srv *httptest.Server
	mux *http.ServeMux

	mu     sync.Mutex
	stage  int
	served []served
	faults map[string][]fault

	nvd     []fakeNVDRecord
	nvdNow  func(stage int) time.Time
	assets  map[string][]byte // CVE List release assets by name
	kev     []byte
	epss    map[int][]byte // by stage: the gzip file
	debian  map[int][]byte
	osv     []fakeOSVRecord
	osvCut  time.Time // records modified after it appear at stage 2
	eol     map[string][]byte
	msrc    []msrcEntry
	msrcCut time.Time
	// files are the sample files behind what is served, by feed, for the
	// reference ingest: cvelist, nvd, kev, epss1, epss2, osv, debian1,
	// debian2, eol, msrc.
	files map[string]fstest.MapFS
}

// served is one request the fake upstreams answered.
type served struct {
	Stage   int
	Path    string
	Query   string
	Status  int
	Bytes   int64
	Records int // records of an NVD page
}

// fault is what the next request of a path gets instead of its answer.
type fault struct {
	status     int
	retryAfter string
	truncate   bool
	stall      bool // send half of the body, then nothing
	sticky     bool // every request, not only the next
}

type fakeNVDRecord struct {
	id       string
	key      int64
	modified time.Time
	raw      json.RawMessage
}

type fakeOSVRecord struct {
	id         string
	modified   time.Time
	ecosystems []string
	body       []byte // JSON
}

type msrcEntry struct {
	raw     json.RawMessage
	id      string
	current time.Time
}

// fakeStart is the stage-1 time of the fake upstreams.
var (
	nvdStage1 = time.Date(2023, 10, 18, 18, 0, 0, 0, time.UTC)
	nvdStage2 = time.Date(2026, 6, 18, 0, 0, 0, 0, time.UTC)
)

func newFakeUpstream(t testing.TB) *fakeUpstream {
	t.Helper()
	f := &fakeUpstream{
		t:      t,
		stage:  1,
		faults: map[string][]fault{},
		files:  map[string]fstest.MapFS{},
		nvdNow: func(stage int) time.Time {
			if stage <= 1 {
				return nvdStage1
			}
			return nvdStage2
		},
	}
	f.loadNVD()
	f.loadCVEList()
	f.loadFiles()
	f.loadOSV()
	f.loadEOL()
	f.loadMSRC()

	mux := http.NewServeMux()
	mux.HandleFunc("GET /nvd/rest/json/cves/2.0", f.serveNVD)
	mux.HandleFunc("GET /github/repos/CVEProject/cvelistV5/releases", f.serveReleases)
	mux.HandleFunc("GET /github/download/{tag}/{asset}", f.serveAsset)
	mux.HandleFunc("GET /kev/known_exploited_vulnerabilities.json", func(w http.ResponseWriter, r *http.Request) {
		serveDocument(w, r, f.kev, "application/json")
	})
	mux.HandleFunc("GET /epss/epss_scores-current.csv.gz", func(w http.ResponseWriter, r *http.Request) {
		serveDocument(w, r, f.byStage(f.epss), "application/gzip")
	})
	mux.HandleFunc("GET /debian/tracker/data/json", func(w http.ResponseWriter, r *http.Request) {
		serveDocument(w, r, f.byStage(f.debian), "application/json")
	})
	mux.HandleFunc("GET /osv/{eco}/{file}", f.serveOSV)
	mux.HandleFunc("GET /eol/products/{file}", func(w http.ResponseWriter, r *http.Request) {
		body, ok := f.eol[r.PathValue("file")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		serveDocument(w, r, body, "text/markdown")
	})
	mux.HandleFunc("GET /msrc/cvrf/v3.0/updates", f.serveMSRCIndex)
	mux.HandleFunc("GET /msrc/cvrf/v3.0/cvrf/{id}", f.serveMSRCDoc)
	f.mux = mux
	f.srv = httptest.NewServer(http.HandlerFunc(f.serveHTTP))
	t.Cleanup(f.srv.Close)
	return f
}

// sources returns the sync sources that point at the fake upstreams.
func (f *fakeUpstream) sources(names ...string) []Source {
	base := f.srv.URL
	all := map[string]string{
		"cvelist": base + "/github/repos/CVEProject/cvelistV5/releases",
		"nvd":     base + "/nvd/rest/json/cves/2.0",
		"kev":     base + "/kev/known_exploited_vulnerabilities.json",
		"epss":    base + "/epss/epss_scores-current.csv.gz",
		"osv":     base + "/osv",
		"debian":  base + "/debian/tracker/data/json",
		"msrc":    base + "/msrc/cvrf/v3.0",
		"eol":     base + "/eol/products/{product}.md",
	}
	if len(names) == 0 {
		names = order
	}
	var out []Source
	for _, n := range names {
		out = append(out, Source{Name: n, URL: all[n]})
	}
	return out
}

// ecosystems returns the OSV ecosystems of the sample, sorted.
func (f *fakeUpstream) ecosystems() []string {
	var out []string
	for _, r := range f.osv {
		for _, e := range r.ecosystems {
			if !slices.Contains(out, e) {
				out = append(out, e)
			}
		}
	}
	sort.Strings(out)
	return out
}

// eolProducts returns the endoflife.date products of the sample, sorted.
func (f *fakeUpstream) eolProducts() []string {
	var out []string
	for name := range f.eol {
		out = append(out, strings.TrimSuffix(name, ".md"))
	}
	sort.Strings(out)
	return out
}

func (f *fakeUpstream) setStage(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stage = n
}

func (f *fakeUpstream) currentStage() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stage
}

// addFault queues a fault for the requests of a path.
func (f *fakeUpstream) addFault(p string, fl fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults[p] = append(f.faults[p], fl)
}

func (f *fakeUpstream) clearFaults() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults = map[string][]fault{}
}

// requests returns what was served at a stage.
func (f *fakeUpstream) requests(stage int) []served {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []served
	for _, s := range f.served {
		if s.Stage == stage {
			out = append(out, s)
		}
	}
	return out
}

func (f *fakeUpstream) byStage(m map[int][]byte) []byte {
	stage := f.currentStage()
	for s := stage; s > 0; s-- {
		if b, ok := m[s]; ok {
			return b
		}
	}
	return nil
}

// serveHTTP records every request and applies the faults.
func (f *fakeUpstream) serveHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	stage := f.stage
	var fl *fault
	if q := f.faults[r.URL.Path]; len(q) > 0 {
		x := q[0]
		fl = &x
		if !x.sticky {
			f.faults[r.URL.Path] = q[1:]
		}
	}
	f.mu.Unlock()
	rec := &recorder{ResponseWriter: w, status: http.StatusOK}
	defer func() {
		f.mu.Lock()
		f.served = append(f.served, served{Stage: stage, Path: r.URL.Path, Query: r.URL.RawQuery, Status: rec.status, Bytes: rec.n, Records: rec.records})
		f.mu.Unlock()
	}()
	if fl != nil && fl.status != 0 {
		if fl.retryAfter != "" {
			w.Header().Set("Retry-After", fl.retryAfter)
		}
		rec.WriteHeader(fl.status)
		return
	}
	rec.truncate = fl != nil && (fl.truncate || fl.stall)
	if fl != nil && fl.stall {
		rec.stall = r.Context().Done()
	}
	f.mux.ServeHTTP(rec, r)
}

// recorder counts what a handler writes; with truncate it sends half of
// the body and then drops the connection.
type recorder struct {
	http.ResponseWriter
	status   int
	n        int64
	records  int
	truncate bool
	stall    <-chan struct{} // with truncate: wait for it before dropping the connection
}

func (r *recorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.truncate {
		n, _ := r.ResponseWriter.Write(p[:len(p)/2])
		r.n += int64(n)
		if fl, ok := r.ResponseWriter.(http.Flusher); ok {
			fl.Flush()
		}
		if r.stall != nil {
			<-r.stall
		}
		panic(http.ErrAbortHandler)
	}
	n, err := r.ResponseWriter.Write(p)
	r.n += int64(n)
	return n, err
}

// serveDocument answers a static document with validators, and 304 to a
// conditional request that matches them.
func serveDocument(w http.ResponseWriter, r *http.Request, body []byte, contentType string) {
	sum := sha256.Sum256(body)
	etag := `"` + hex.EncodeToString(sum[:8]) + `"`
	// The last modification is a function of the content, so that it
	// changes when the content does.
	modified := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(sum[8]) * time.Hour)
	w.Header().Set("ETag", etag)
	w.Header().Set("Last-Modified", modified.Format(http.TimeFormat))
	if inm := r.Header.Get("If-None-Match"); inm != "" {
		if inm == etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
	} else if ims, err := http.ParseTime(r.Header.Get("If-Modified-Since")); err == nil && !modified.After(ims) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.Write(body)
}

func readSample(t testing.TB, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(sampleDir, rel))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sampleFiles returns the names of the files of a sample folder with the
// given endings, sorted, SOURCE.md and the like left out.
func sampleFiles(t testing.TB, dir string, exts ...string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(sampleDir, dir))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || strings.HasPrefix(n, "SOURCE") || strings.HasPrefix(n, "README") {
			continue
		}
		for _, x := range exts {
			if strings.HasSuffix(n, x) {
				out = append(out, n)
				break
			}
		}
	}
	sort.Strings(out)
	return out
}

// --- NVD ---

func (f *fakeUpstream) loadNVD() {
	byID := map[string]fakeNVDRecord{}
	ref := fstest.MapFS{}
	for _, name := range sampleFiles(f.t, "nvd", ".json") {
		data := readSample(f.t, "nvd/"+name)
		ref["nvd/"+name] = &fstest.MapFile{Data: data}
		var top map[string]json.RawMessage
		if err := json.Unmarshal(data, &top); err != nil {
			f.t.Fatalf("nvd %s: %v", name, err)
		}
		var raws []json.RawMessage
		switch {
		case top["vulnerabilities"] != nil:
			var vs []struct {
				CVE json.RawMessage `json:"cve"`
			}
			if err := json.Unmarshal(top["vulnerabilities"], &vs); err != nil {
				f.t.Fatalf("nvd %s: %v", name, err)
			}
			for _, v := range vs {
				raws = append(raws, v.CVE)
			}
		case top["cve"] != nil:
			raws = append(raws, top["cve"])
		default:
			raws = append(raws, data)
		}
		for _, raw := range raws {
			var it struct {
				ID           string `json:"id"`
				LastModified string `json:"lastModified"`
			}
			if err := json.Unmarshal(raw, &it); err != nil {
				f.t.Fatalf("nvd %s: %v", name, err)
			}
			key, ok := cve.Key(it.ID)
			mod := parseNVDTime(it.LastModified)
			if !ok || mod.IsZero() {
				f.t.Fatalf("nvd %s: record %q lastModified %q", name, it.ID, it.LastModified)
			}
			byID[it.ID] = fakeNVDRecord{id: it.ID, key: key, modified: mod, raw: raw}
		}
	}
	for _, r := range byID {
		f.nvd = append(f.nvd, r)
	}
	sort.Slice(f.nvd, func(i, k int) bool { return f.nvd[i].key < f.nvd[k].key })
	f.files["nvd"] = ref
}

// serveNVD answers the CVE API 2.0 as the NVD does: paging with
// resultsPerPage (at most 2000) and startIndex, lastModStartDate and
// lastModEndDate together or not at all, at most 120 days apart, and a 404
// with a message header for a bad request.
func (f *fakeUpstream) serveNVD(w http.ResponseWriter, r *http.Request) {
	bad := func(msg string) {
		w.Header().Set("message", msg)
		w.WriteHeader(http.StatusNotFound)
	}
	q := r.URL.Query()
	per, err := strconv.Atoi(q.Get("resultsPerPage"))
	if err != nil || per < 1 || per > 2000 {
		bad("Invalid resultsPerPage")
		return
	}
	start, err := strconv.Atoi(q.Get("startIndex"))
	if err != nil || start < 0 {
		bad("Invalid startIndex")
		return
	}
	var from, to time.Time
	if s, e := q.Get("lastModStartDate"), q.Get("lastModEndDate"); s != "" || e != "" {
		from, err = time.Parse(nvdTimeLayout, s)
		if err != nil {
			bad("Invalid lastModStartDate")
			return
		}
		to, err = time.Parse(nvdTimeLayout, e)
		if err != nil {
			bad("Invalid lastModEndDate")
			return
		}
		if to.Before(from) || to.Sub(from) > nvdMaxWindow {
			bad("The lastMod date range must not exceed 120 days")
			return
		}
	}
	now := f.nvdNow(f.currentStage())
	var match []fakeNVDRecord
	for _, rec := range f.nvd {
		if rec.modified.After(now) {
			continue
		}
		if !from.IsZero() && (rec.modified.Before(from) || rec.modified.After(to)) {
			continue
		}
		match = append(match, rec)
	}
	page := match[min(start, len(match)):min(start+per, len(match))]
	type item struct {
		CVE json.RawMessage `json:"cve"`
	}
	body := struct {
		ResultsPerPage  int    `json:"resultsPerPage"`
		StartIndex      int    `json:"startIndex"`
		TotalResults    int    `json:"totalResults"`
		Format          string `json:"format"`
		Version         string `json:"version"`
		Timestamp       string `json:"timestamp"`
		Vulnerabilities []item `json:"vulnerabilities"`
	}{len(page), start, len(match), "NVD_CVE", "2.0", now.Format("2006-01-02T15:04:05.000"), []item{}}
	for _, rec := range page {
		body.Vulnerabilities = append(body.Vulnerabilities, item{rec.raw})
	}
	b, err := json.Marshal(body)
	if err != nil {
		f.t.Error(err)
		return
	}
	if rec, ok := w.(*recorder); ok {
		rec.records = len(page)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.Write(b)
}

// --- CVE List ---

// The CVE List's days in the fake releases.
var (
	cveDay0 = "2026-11-19"
	cveDay1 = "2026-11-20"
)

// cvelistSets splits the sample records as the fake releases publish them:
// a is in the day-1 baseline, b (part of a) changed late on day 0, c, d
// and e changed on day 1 by 01:00, 02:00 and 03:00.
func (f *fakeUpstream) cvelistSets() (a, b, c, d, e []string) {
	names := sampleFiles(f.t, "cvelist", ".json")
	if len(names) < 70 {
		f.t.Fatalf("cvelist sample: %d records", len(names))
	}
	return names[:40], names[:10], names[40:55], names[55:65], names[65:]
}

func (f *fakeUpstream) loadCVEList() {
	a, b, c, d, e := f.cvelistSets()
	ref := fstest.MapFS{}
	for _, n := range sampleFiles(f.t, "cvelist", ".json") {
		ref["cvelist/"+n] = &fstest.MapFile{Data: readSample(f.t, "cvelist/"+n)}
	}
	f.files["cvelist"] = ref
	f.assets = map[string][]byte{
		cveDay0 + "_all_CVEs_at_midnight.zip.zip": f.baselineZip(a[len(b):]),
		cveDay0 + "_delta_CVEs_at_2300Z.zip":      f.deltaZip(b),
		cveDay0 + "_delta_CVEs_at_end_of_day.zip": f.deltaZip(b),
		cveDay1 + "_all_CVEs_at_midnight.zip.zip": f.baselineZip(a),
		cveDay1 + "_delta_CVEs_at_0100Z.zip":      f.deltaZip(c),
		cveDay1 + "_delta_CVEs_at_0200Z.zip":      f.deltaZip(concat(c, d)),
		cveDay1 + "_delta_CVEs_at_0300Z.zip":      f.deltaZip(concat(c, d, e)),
	}
}

func concat(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

// baselineZip builds a baseline as the CVE List publishes it: a zip
// holding cves.zip, which holds cves/<year>/<n>xxx/CVE-<id>.json.
func (f *fakeUpstream) baselineZip(names []string) []byte {
	inner := map[string][]byte{}
	for _, n := range names {
		id := strings.TrimSuffix(n, ".json")
		parts := strings.Split(id, "-")
		seq, _ := strconv.Atoi(parts[2])
		inner[fmt.Sprintf("cves/%s/%dxxx/%s", parts[1], seq/1000, n)] = readSample(f.t, "cvelist/"+n)
	}
	return zipOf(f.t, map[string][]byte{"cves.zip": zipOf(f.t, inner)})
}

// deltaZip builds a delta as the CVE List publishes it: deltaCves/CVE-<id>.json.
func (f *fakeUpstream) deltaZip(names []string) []byte {
	files := map[string][]byte{}
	for _, n := range names {
		files["deltaCves/"+n] = readSample(f.t, "cvelist/"+n)
	}
	return zipOf(f.t, files)
}

func zipOf(t testing.TB, files map[string][]byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		w, err := zw.Create(n)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(files[n])
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

type fakeRelease struct {
	tag    string
	assets []string
}

// releases lists the fake releases of a stage, newest first.
func (f *fakeUpstream) releases(stage int) []fakeRelease {
	base1 := cveDay1 + "_all_CVEs_at_midnight.zip.zip"
	out := []fakeRelease{
		{"cve_" + cveDay1 + "_0200Z", []string{base1, cveDay1 + "_delta_CVEs_at_0200Z.zip"}},
		{"cve_" + cveDay1 + "_0100Z", []string{base1, cveDay1 + "_delta_CVEs_at_0100Z.zip"}},
		{"cve_" + cveDay0 + "_at_end_of_day", []string{cveDay0 + "_delta_CVEs_at_end_of_day.zip"}},
		{"cve_" + cveDay1 + "_0000Z", []string{base1}},
		{"cve_" + cveDay0 + "_2300Z", []string{cveDay0 + "_all_CVEs_at_midnight.zip.zip", cveDay0 + "_delta_CVEs_at_2300Z.zip"}},
	}
	if stage >= 2 {
		out = append([]fakeRelease{{"cve_" + cveDay1 + "_0300Z", []string{base1, cveDay1 + "_delta_CVEs_at_0300Z.zip"}}}, out...)
	}
	return out
}

// releasesPerPage is the page size of the fake releases list.
const releasesPerPage = 2

// serveReleases answers GET /repos/{owner}/{repo}/releases as GitHub does:
// page and per_page, a Link header to the next and last pages, an ETag.
func (f *fakeUpstream) serveReleases(w http.ResponseWriter, r *http.Request) {
	all := f.releases(f.currentStage())
	page := 1
	if p := r.URL.Query().Get("page"); p != "" {
		page, _ = strconv.Atoi(p)
	}
	per := releasesPerPage
	if n, err := strconv.Atoi(r.URL.Query().Get("per_page")); err == nil && n < per {
		per = n
	}
	from := min((page-1)*per, len(all))
	to := min(from+per, len(all))
	type asset struct {
		Name string `json:"name"`
		Size int    `json:"size"`
		URL  string `json:"browser_download_url"`
	}
	type release struct {
		TagName string  `json:"tag_name"`
		Name    string  `json:"name"`
		Assets  []asset `json:"assets"`
	}
	var out []release
	for _, rel := range all[from:to] {
		x := release{TagName: rel.tag, Name: "CVE " + strings.TrimPrefix(rel.tag, "cve_")}
		for _, a := range rel.assets {
			x.Assets = append(x.Assets, asset{a, len(f.assets[a]), f.srv.URL + "/github/download/" + rel.tag + "/" + a})
		}
		out = append(out, x)
	}
	body, _ := json.Marshal(out)
	last := (len(all) + per - 1) / per
	link := func(p int, rel string) string {
		u := *r.URL
		q := u.Query()
		q.Set("page", strconv.Itoa(p))
		q.Set("per_page", strconv.Itoa(per))
		u.RawQuery = q.Encode()
		return fmt.Sprintf(`<%s%s>; rel="%s"`, f.srv.URL, u.RequestURI(), rel)
	}
	var links []string
	if page < last {
		links = append(links, link(page+1, "next"), link(last, "last"))
	}
	if len(links) > 0 {
		w.Header().Set("Link", strings.Join(links, ", "))
	}
	serveDocument(w, r, body, "application/json")
}

func (f *fakeUpstream) serveAsset(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("asset")
	for _, rel := range f.releases(f.currentStage()) {
		if rel.tag == r.PathValue("tag") && slices.Contains(rel.assets, name) {
			serveDocument(w, r, f.assets[name], "application/zip")
			return
		}
	}
	http.NotFound(w, r)
}

// --- KEV, EPSS, Debian ---

func gzipOf(t testing.TB, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(data)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func (f *fakeUpstream) loadFiles() {
	const kevFile = "kev/known_exploited_vulnerabilities.json"
	f.kev = readSample(f.t, kevFile)
	f.files["kev"] = fstest.MapFS{kevFile: {Data: f.kev}}

	epss1, epss2 := "epss/epss_public_ids.csv", "epss/epss_scores-2025-02-20.csv"
	f.epss = map[int][]byte{1: gzipOf(f.t, readSample(f.t, epss1)), 2: gzipOf(f.t, readSample(f.t, epss2))}
	f.files["epss1"] = fstest.MapFS{epss1: {Data: readSample(f.t, epss1)}}
	f.files["epss2"] = fstest.MapFS{epss2: {Data: readSample(f.t, epss2)}}

	deb1, deb2 := "debian/anchore-vunnel_debian.json", "debian/google-osv.dev_debian_security_tracker_mock.json"
	f.debian = map[int][]byte{1: readSample(f.t, deb1), 2: readSample(f.t, deb2)}
	f.files["debian1"] = fstest.MapFS{deb1: {Data: f.debian[1]}}
	f.files["debian2"] = fstest.MapFS{deb2: {Data: f.debian[2]}}
}

// --- OSV ---

func (f *fakeUpstream) loadOSV() {
	ref := fstest.MapFS{}
	for _, db := range []string{"almalinux", "ghsa", "go", "pypa", "rustsec"} {
		for _, name := range sampleFiles(f.t, "osv/"+db, ".json", ".yaml") {
			data := readSample(f.t, "osv/"+db+"/"+name)
			ref["osv/"+db+"/"+name] = &fstest.MapFile{Data: data}
			body := data
			if strings.HasSuffix(name, ".yaml") {
				// The bucket serves PyPA's records as JSON.
				var err error
				if body, err = yamlToJSON(data); err != nil {
					f.t.Fatalf("osv %s: %v", name, err)
				}
			}
			var rec struct {
				ID       string `json:"id"`
				Modified string `json:"modified"`
				Affected []struct {
					Package struct {
						Ecosystem string `json:"ecosystem"`
					} `json:"package"`
				} `json:"affected"`
			}
			if err := json.Unmarshal(body, &rec); err != nil {
				f.t.Fatalf("osv %s: %v", name, err)
			}
			mod, err := time.Parse(time.RFC3339Nano, rec.Modified)
			if err != nil {
				f.t.Fatalf("osv %s: modified: %v", name, err)
			}
			r := fakeOSVRecord{id: rec.ID, modified: mod.UTC(), body: body}
			for _, a := range rec.Affected {
				eco, _, _ := strings.Cut(a.Package.Ecosystem, ":")
				if eco != "" && !slices.Contains(r.ecosystems, eco) {
					r.ecosystems = append(r.ecosystems, eco)
				}
			}
			if len(r.ecosystems) == 0 {
				f.t.Fatalf("osv %s: no ecosystem", name)
			}
			f.osv = append(f.osv, r)
		}
	}
	times := make([]time.Time, 0, len(f.osv))
	for _, r := range f.osv {
		times = append(times, r.modified)
	}
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	f.osvCut = times[len(times)/2]
	f.files["osv"] = ref
}

// yamlToJSON converts a YAML record to JSON as the OSV bucket has it:
// scalars as strings, except null and booleans.
func yamlToJSON(data []byte) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	var conv func(n *yaml.Node) (any, error)
	conv = func(n *yaml.Node) (any, error) {
		switch n.Kind {
		case yaml.DocumentNode:
			return conv(n.Content[0])
		case yaml.AliasNode:
			return conv(n.Alias)
		case yaml.SequenceNode:
			out := []any{}
			for _, c := range n.Content {
				v, err := conv(c)
				if err != nil {
					return nil, err
				}
				out = append(out, v)
			}
			return out, nil
		case yaml.MappingNode:
			out := map[string]any{}
			for i := 0; i+1 < len(n.Content); i += 2 {
				v, err := conv(n.Content[i+1])
				if err != nil {
					return nil, err
				}
				out[n.Content[i].Value] = v
			}
			return out, nil
		case yaml.ScalarNode:
			switch n.ShortTag() {
			case "!!null":
				return nil, nil
			case "!!bool":
				if b, err := strconv.ParseBool(strings.ToLower(n.Value)); err == nil {
					return b, nil
				}
			}
			return n.Value, nil
		}
		return nil, errors.New("unexpected yaml node")
	}
	v, err := conv(&doc)
	if err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// osvRecords returns the records of an ecosystem at a stage, newest first.
func (f *fakeUpstream) osvRecords(eco string, stage int) []fakeOSVRecord {
	var out []fakeOSVRecord
	for _, r := range f.osv {
		if slices.Contains(r.ecosystems, eco) && (stage >= 2 || !r.modified.After(f.osvCut)) {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, k int) bool {
		if !out[i].modified.Equal(out[k].modified) {
			return out[i].modified.After(out[k].modified)
		}
		return out[i].id < out[k].id
	})
	return out
}

func (f *fakeUpstream) serveOSV(w http.ResponseWriter, r *http.Request) {
	eco, file := r.PathValue("eco"), r.PathValue("file")
	if !slices.Contains(f.ecosystems(), eco) {
		http.NotFound(w, r)
		return
	}
	recs := f.osvRecords(eco, f.currentStage())
	switch file {
	case "modified_id.csv":
		var b strings.Builder
		for _, rec := range recs {
			fmt.Fprintf(&b, "%s,%s\n", rec.modified.Format(time.RFC3339Nano), rec.id)
		}
		serveDocument(w, r, []byte(b.String()), "text/csv")
	case "all.zip":
		files := map[string][]byte{}
		for _, rec := range recs {
			files[rec.id+".json"] = rec.body
		}
		serveDocument(w, r, zipOf(f.t, files), "application/zip")
	default:
		for _, rec := range recs {
			if rec.id+".json" == file {
				serveDocument(w, r, rec.body, "application/json")
				return
			}
		}
		http.NotFound(w, r)
	}
}

// --- endoflife.date ---

func (f *fakeUpstream) loadEOL() {
	f.eol = map[string][]byte{}
	ref := fstest.MapFS{}
	for _, name := range sampleFiles(f.t, "eol/products", ".md") {
		data := readSample(f.t, "eol/products/"+name)
		f.eol[name] = data
		ref["eol/products/"+name] = &fstest.MapFile{Data: data}
	}
	f.files["eol"] = ref
}

// --- MSRC ---

// msrcMonths is the number of MSRC monthly documents the fake serves.
const msrcMonths = 3

func (f *fakeUpstream) loadMSRC() {
	var index struct {
		Value []json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(readSample(f.t, "msrc/updates-index.json"), &index); err != nil {
		f.t.Fatal(err)
	}
	// The smallest months of the sample are enough to exercise the
	// protocol; the others would only slow the tests down.
	months := sampleFiles(f.t, "msrc", ".xml.gz")
	sort.SliceStable(months, func(i, k int) bool {
		return len(readSample(f.t, "msrc/"+months[i])) < len(readSample(f.t, "msrc/"+months[k]))
	})
	have := map[string]bool{}
	for _, n := range months[:min(msrcMonths, len(months))] {
		have[strings.TrimSuffix(n, ".xml.gz")] = true
	}
	ref := fstest.MapFS{}
	var times []time.Time
	for _, raw := range index.Value {
		var e struct {
			ID                 string `json:"ID"`
			CurrentReleaseDate string `json:"CurrentReleaseDate"`
		}
		if err := json.Unmarshal(raw, &e); err != nil {
			f.t.Fatal(err)
		}
		if !have[e.ID] {
			continue // the sample holds only some months
		}
		t, err := time.Parse(time.RFC3339, e.CurrentReleaseDate)
		if err != nil {
			f.t.Fatal(err)
		}
		f.msrc = append(f.msrc, msrcEntry{raw: raw, id: e.ID, current: t})
		times = append(times, t)
		ref["msrc/"+e.ID+".xml.gz"] = &fstest.MapFile{Data: readSample(f.t, "msrc/"+e.ID+".xml.gz")}
	}
	if len(f.msrc) < 2 {
		f.t.Fatalf("msrc sample: %d months in the index", len(f.msrc))
	}
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	f.msrcCut = times[len(times)/2]
	f.files["msrc"] = ref
}

func (f *fakeUpstream) msrcListed(stage int) []msrcEntry {
	var out []msrcEntry
	for _, e := range f.msrc {
		if stage >= 2 || !e.current.After(f.msrcCut) {
			out = append(out, e)
		}
	}
	return out
}

func (f *fakeUpstream) serveMSRCIndex(w http.ResponseWriter, r *http.Request) {
	var value []json.RawMessage
	for _, e := range f.msrcListed(f.currentStage()) {
		value = append(value, e.raw)
	}
	body, _ := json.Marshal(map[string]any{"@odata.context": "https://api.msrc.microsoft.com/$metadata#Updates", "value": value})
	serveDocument(w, r, body, "application/json")
}

// serveMSRCDoc answers a monthly document in CVRF XML, which the API
// gives only to a client that accepts XML.
func (f *fakeUpstream) serveMSRCDoc(w http.ResponseWriter, r *http.Request) {
	if !strings.Contains(r.Header.Get("Accept"), "xml") {
		http.Error(w, "JSON not served by this fake", http.StatusNotAcceptable)
		return
	}
	id := r.PathValue("id")
	if !slices.ContainsFunc(f.msrcListed(f.currentStage()), func(e msrcEntry) bool { return e.id == id }) {
		http.NotFound(w, r)
		return
	}
	zr, err := gzip.NewReader(bytes.NewReader(readSample(f.t, "msrc/"+id+".xml.gz")))
	if err != nil {
		f.t.Error(err)
		return
	}
	body, err := io.ReadAll(zr)
	if err != nil {
		f.t.Error(err)
		return
	}
	serveDocument(w, r, body, "application/xml")
}
