package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/patchline/patchline/internal/catalog/sqlite"
	"github.com/patchline/patchline/internal/cve"
)

const sampleData = "../../internal/sample/data"

func fetchRecord(t *testing.T, s *server, id string) cve.Record {
	t.Helper()
	status, body, _ := get(t, s.LookupURL+"/api/v1/cve/"+id)
	if status != 200 {
		t.Fatalf("GET /api/v1/cve/%s = %d: %s", id, status, body)
	}
	var rec cve.Record
	if err := json.Unmarshal(body, &rec); err != nil {
		t.Fatal(err)
	}
	return rec
}

func sourceNames(rec cve.Record) []string {
	var names []string
	for _, ds := range rec.DataSources {
		names = append(names, ds.Name)
	}
	return names
}

func TestEndToEndServeLoadsSample(t *testing.T) {
	e2e(t)
	s := startServeFresh(t, "", nil)
	if !strings.Contains(s.Log(), "loading the bundled sample catalog") {
		t.Errorf("serve did not say it loads the sample:\n%s", s.Log())
	}
	rec := fetchRecord(t, s, "cve-2021-44228")
	if rec.CVEID != "CVE-2021-44228" || rec.Description == nil || rec.CVSS == nil || rec.CVSS.Score != 10 {
		t.Errorf("record = %+v", rec)
	}
	if rec.KEV == nil || rec.KEV.DateAdded != "2021-12-10" {
		t.Errorf("kev = %+v", rec.KEV)
	}
	if rec.EPSS == nil || len(rec.CWEs) == 0 || len(rec.References) == 0 || !rec.Remediation.Available {
		t.Errorf("record lacks EPSS, CWEs, references or remediation: %+v", rec)
	}
	for _, want := range []string{"cvelist", "kev", "epss"} {
		if !strings.Contains(strings.Join(sourceNames(rec), " "), want) {
			t.Errorf("dataSources %v lack %s", sourceNames(rec), want)
		}
	}
	// A second start finds the catalog and does not load the sample again.
	s.Stop(t)
	again := startServe(t, s.Data, nil)
	if strings.Contains(again.Log(), "loading the bundled sample") {
		t.Error("serve loaded the sample into a catalog that was not empty")
	}
}

func TestEndToEndIngestRealFiles(t *testing.T) {
	e2e(t)
	data := t.TempDir()
	res := runCLI(t, "", nil, "ingest", "--data", data,
		"cvelist="+filepath.Join(sampleData, "cvelist"),
		"nvd="+filepath.Join(sampleData, "nvd"),
		"kev="+filepath.Join(sampleData, "kev/known_exploited_vulnerabilities.json"),
		"epss="+filepath.Join(sampleData, "epss"))
	if res.Code != 0 {
		t.Fatalf("ingest exit %d\n%s%s", res.Code, res.Stdout, res.Stderr)
	}
	for _, src := range []string{"cvelist", "nvd", "kev", "epss"} {
		if !strings.Contains(res.Stdout, src+": read ") || !strings.Contains(res.Stdout, ", rejected 0,") {
			t.Errorf("summary lacks a clean line for %s:\n%s", src, res.Stdout)
		}
	}
	s := startServe(t, data, nil)
	if strings.Contains(s.Log(), "loading the bundled sample") {
		t.Error("serve loaded the sample into an ingested catalog")
	}
	// Known only to NVD among the ingested sources.
	rec := fetchRecord(t, s, "CVE-2016-1585")
	if got := strings.Join(sourceNames(rec), ","); got != "nvd" {
		t.Errorf("CVE-2016-1585 dataSources = %s, want nvd", got)
	}
	// A rejected CVE is kept and marked.
	rej := fetchRecord(t, s, "CVE-2019-25161")
	if rej.State != cve.StateRejected || rej.Remediation.Available {
		t.Errorf("rejected record = %+v", rej)
	}
}

func TestEndToEndIngestErrors(t *testing.T) {
	e2e(t)
	data := t.TempDir()
	res := runCLI(t, "", nil, "ingest", "--data", data, "kev=/nonexistent/kev.json")
	if res.Code == 0 || !strings.Contains(res.Stderr, "/nonexistent/kev.json") {
		t.Errorf("unreadable location: exit %d, stderr %q", res.Code, res.Stderr)
	}
	res = runCLI(t, "", nil, "ingest", "--data", data, "bogus=x")
	if res.Code == 0 || !strings.Contains(res.Stderr, "unknown source") {
		t.Errorf("unknown source: exit %d, stderr %q", res.Code, res.Stderr)
	}
	bad := filepath.Join(t.TempDir(), "bad")
	os.MkdirAll(bad, 0o755)
	os.WriteFile(filepath.Join(bad, "CVE-2020-0001.json"), []byte(`{"dataType": "CVE_RECORD", `), 0o644)
	good, _ := os.ReadFile(filepath.Join(sampleData, "cvelist/CVE-2024-3400.json"))
	os.WriteFile(filepath.Join(bad, "CVE-2024-3400.json"), good, 0o644)
	res = runCLI(t, "", nil, "ingest", "--data", data, "cvelist="+bad)
	if res.Code != 0 || !strings.Contains(res.Stdout, "rejected 1") || !strings.Contains(res.Stdout, "CVE-2020-0001.json") {
		t.Errorf("malformed record: exit %d\n%s%s", res.Code, res.Stdout, res.Stderr)
	}
}

// TestEndToEndKilledIngestKeepsCatalog kills an ingest run with SIGKILL in
// the middle and checks that the previous catalog opens and serves, whole.
func TestEndToEndKilledIngestKeepsCatalog(t *testing.T) {
	e2e(t)
	data := t.TempDir()
	if res := runCLI(t, "", nil, "ingest", "--data", data, "--sample"); res.Code != 0 {
		t.Fatalf("ingest --sample: %s%s", res.Stdout, res.Stderr)
	}
	big := bigEPSS(t)

	for _, delay := range []time.Duration{300 * time.Millisecond, 1200 * time.Millisecond} {
		cmd := exec.Command(binary, "ingest", "--data", data, "epss="+big)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(delay)
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		if cmd.ProcessState.Success() {
			t.Skip("the ingest finished before it could be killed")
		}
	}
	s := startServe(t, data, nil)
	rec := fetchRecord(t, s, "CVE-2021-44228")
	if rec.EPSS == nil || rec.EPSS.Score == 0.00001 {
		t.Errorf("EPSS after a killed run = %+v, want the sample's score", rec.EPSS)
	}
	if strings.Contains(s.Log(), "loading the bundled sample") {
		t.Error("the catalog looked empty after a killed run")
	}
}

// bigEPSS writes an EPSS file large enough that a run ingesting it is still
// going when killed, which scores CVE-2021-44228 0.00001.
func bigEPSS(t *testing.T) string {
	t.Helper()
	big := filepath.Join(t.TempDir(), "epss.csv")
	var b strings.Builder
	b.WriteString("#model_version:v2025.03.14,score_date:2026-11-20T00:00:00+0000\ncve,epss,percentile\n")
	for i := 0; i < 400_000; i++ {
		fmt.Fprintf(&b, "CVE-2099-%d,0.5,0.5\n", 10000+i)
	}
	fmt.Fprintf(&b, "CVE-2021-44228,0.00001,0.001\n")
	if err := os.WriteFile(big, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return big
}

// TestEndToEndKilledRebuild kills ingest runs into an empty catalog, which
// build the new catalog in a file of their own and then install it, and
// checks that the catalog is left empty or whole, that the next run removes
// the killed runs' files, and that it succeeds.
func TestEndToEndKilledRebuild(t *testing.T) {
	e2e(t)
	data := t.TempDir()
	big := bigEPSS(t)
	kev := "kev=" + filepath.Join(sampleData, "kev/known_exploited_vulnerabilities.json")
	path := filepath.Join(data, "catalog.db")
	killed := 0
	for _, delay := range []time.Duration{300 * time.Millisecond, 900 * time.Millisecond} {
		cmd := exec.Command(binary, "ingest", "--data", data, kev, "epss="+big)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(delay)
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		if cmd.ProcessState.Success() {
			break
		}
		killed++
		db, err := sqlite.Open(context.Background(), path)
		if err != nil {
			t.Fatalf("open the catalog after a killed run: %v", err)
		}
		stats, err := db.Stats(context.Background())
		db.Close()
		if err != nil {
			t.Fatal(err)
		}
		// Killed before the install, the catalog is as it was; after
		// it, the run's catalog is there whole.
		if stats.Records != 0 && stats.Facts < 400_000 {
			t.Errorf("catalog after a killed run: %+v, want it empty or whole", stats)
		}
		if stats.Records != 0 {
			break
		}
	}
	if killed == 0 {
		t.Skip("the ingest finished before it could be killed")
	}
	t.Logf("%d runs killed", killed)
	res := runCLI(t, "", nil, "ingest", "--data", data, kev)
	if res.Code != 0 {
		t.Fatalf("ingest after the kills: exit %d: %s%s", res.Code, res.Stdout, res.Stderr)
	}
	if m, _ := filepath.Glob(path + ".rebuild-*"); len(m) > 0 {
		t.Errorf("the files of the killed runs are left: %v", m)
	}
	s := startServe(t, data, nil)
	if rec := fetchRecord(t, s, "CVE-2021-44228"); rec.KEV == nil {
		t.Errorf("record after the kills = %+v, want its KEV entry", rec)
	}
}

// TestEndToEndIngestBesideServe ingests into the catalog of a running
// serve from another process: the next requests see the new facts, though
// serve keeps record bodies, a summary index and counts in memory.
func TestEndToEndIngestBesideServe(t *testing.T) {
	e2e(t)
	data := t.TempDir()
	ingest := func(feeds ...string) {
		t.Helper()
		res := runCLI(t, "", nil, append([]string{"ingest", "--data", data}, feeds...)...)
		if res.Code != 0 {
			t.Fatalf("ingest exit %d\n%s%s", res.Code, res.Stdout, res.Stderr)
		}
	}
	ingest("cvelist=" + filepath.Join(sampleData, "cvelist"))
	s := startServe(t, data, nil)
	const id = "CVE-2021-44228"
	listed := func() string {
		t.Helper()
		status, body, _ := get(t, s.LookupURL+"/api/v1/cve?epss_min=0.5&sort=epss&limit=100")
		if status != 200 {
			t.Fatalf("list = %d: %s", status, body)
		}
		return string(body)
	}
	bulkLine := func() string {
		t.Helper()
		status, body, _ := get(t, s.LookupURL+"/api/v1/cve/bulk.jsonl")
		if status != 200 {
			t.Fatalf("bulk = %d: %s", status, body)
		}
		for _, line := range strings.Split(string(body), "\n") {
			if strings.Contains(line, `"`+id+`"`) {
				return line
			}
		}
		t.Fatalf("bulk.jsonl has no line for %s", id)
		return ""
	}
	// Read everything serve may keep, twice, and give its summary index
	// the time to be built.
	for range 2 {
		if rec := fetchRecord(t, s, id); rec.EPSS != nil {
			t.Fatalf("%s has EPSS before the EPSS ingest: %+v", id, rec.EPSS)
		}
		if strings.Contains(listed(), id) {
			t.Fatalf("%s is listed with EPSS ≥ 0.5 before the EPSS ingest", id)
		}
		bulkLine()
		time.Sleep(500 * time.Millisecond)
	}

	ingest("epss=" + filepath.Join(sampleData, "epss"))
	time.Sleep(10 * time.Millisecond) // serve sees another process's commit within a millisecond
	if rec := fetchRecord(t, s, id); rec.EPSS == nil || rec.EPSS.Score < 0.5 {
		t.Errorf("GET %s after the EPSS ingest: epss %+v", id, rec.EPSS)
	}
	if !strings.Contains(listed(), id) {
		t.Errorf("%s is not listed with EPSS ≥ 0.5 after the EPSS ingest", id)
	}
	if line := bulkLine(); strings.Contains(line, `"epss":null`) {
		t.Errorf("bulk.jsonl after the EPSS ingest: %s", line)
	}
}
