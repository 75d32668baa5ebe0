// The console's exposure pages against a real evaluation: a SQLite control
// store whose agents reported real products, matched against records of
// the bundled sample. This file is over 600 lines because
// TestExposurePages checks the risk list, a CVE's agents and an agent's
// tab against what it computes from the findings, one page after another.

package console

import (
	"context"
	"fmt"
	"html"
	"io/fs"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"

	catalogsqlite "github.com/patchline/patchline/internal/catalog/sqlite"
	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/device"
	"github.com/patchline/patchline/internal/exposure"
	"github.com/patchline/patchline/internal/ingest"
	"github.com/patchline/patchline/internal/sample"
)

// exposureSample is the part of the bundled sample that the exposure
// tests ingest: the CVE records, KEV, EPSS, the Debian tracker and the
// end-of-life data, and of MSRC only July and August 2024 (the other
// months only slow the ingest). NVD and OSV add nothing these agents
// report.
func exposureSample(tb testing.TB) fs.FS {
	tb.Helper()
	keep := map[string]bool{"cvelist": true, "kev": true, "epss": true, "debian": true, "eol": true,
		"msrc/2024-Jul.xml.gz": true, "msrc/2024-Aug.xml.gz": true}
	out := fstest.MapFS{}
	err := fs.WalkDir(sample.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		feed, _, _ := strings.Cut(p, "/")
		if !keep[feed] && !keep[p] {
			return nil
		}
		b, err := fs.ReadFile(sample.FS(), p)
		out[p] = &fstest.MapFile{Data: b}
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// mustOpenExposureCatalog returns a SQLite catalog holding exposureSample,
// ingested as `patchline ingest --sample` would, at a fixed time.
func mustOpenExposureCatalog(tb testing.TB) *catalogsqlite.DB {
	tb.Helper()
	ctx := context.Background()
	cat, err := catalogsqlite.Open(ctx, filepath.Join(tb.TempDir(), "catalog.db"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cat.Close() })
	files := exposureSample(tb)
	var sources []ingest.Source
	for _, src := range ingest.SampleSources() {
		if _, err := fs.Stat(files, src.Location); err == nil {
			src.FS = files
			sources = append(sources, src)
		}
	}
	now := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	if _, err := ingest.Run(ctx, cat, sources, ingest.Options{Now: func() time.Time { return now }}); err != nil {
		tb.Fatalf("ingest the sample: %v", err)
	}
	return cat
}

// exposureEnv is a console with endpoint exposure: its control store
// evaluated against a catalog of real records.
type exposureEnv struct {
	*env
	svc *exposure.Service
	// idx matches inventories for the expected results, apart from the
	// service and the store.
	idx   *exposure.Index
	risks map[string]exposure.Risk
	// invs are the inventories the agents reported, by agent id.
	invs map[string]device.Inventory
}

// newExposureEnv returns newEnv's console and store with endpoint exposure
// turned on: the same configuration with the store as exposure.Store,
// served anew.
func newExposureEnv(t *testing.T) *exposureEnv {
	t.Helper()
	e := newEnv(t)
	cat := mustOpenExposureCatalog(t)
	e.reconfigure(func(c *Config) { c.Exposure, c.Catalog = e.store, cat })

	x := &exposureEnv{env: e, svc: exposure.NewService(cat, e.store, nil), idx: exposure.NewIndex(),
		risks: map[string]exposure.Risk{}, invs: map[string]device.Inventory{}}
	up, err := x.idx.Refresh(context.Background(), cat)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range up.Risks {
		x.risks[r.CVEID] = r
	}
	return x
}

// checkIn enrolls an agent that then checks in with inv.
func (x *exposureEnv) checkIn(hostname string, inv device.Inventory) *device.Agent {
	x.t.Helper()
	a := x.enroll(hostname, device.FeatureUpgrade{State: device.FeatureUpgradeNone})
	if _, err := x.store.CheckIn(context.Background(), a.ID, device.CheckIn{Time: x.clock.Now(), Hostname: hostname, OS: a.OS,
		Arch: a.Arch, Inventory: &inv, InventoryHash: "h-" + hostname}); err != nil {
		x.t.Fatal(err)
	}
	x.invs[a.ID] = inv
	return a
}

// evaluate runs the exposure service over the queued agents, as serve
// does every second.
func (x *exposureEnv) evaluate() {
	x.t.Helper()
	ctx := context.Background()
	if err := x.svc.RefreshCatalog(ctx); err != nil {
		x.t.Fatal(err)
	}
	if _, err := x.svc.Drain(ctx); err != nil {
		x.t.Fatal(err)
	}
}

// expected is what the index says of the fleet, apart from the store.
type expected struct {
	// findings of each CVE by agent id.
	byCVE map[string]map[string][]exposure.Finding
}

func (x *exposureEnv) expect() expected {
	want := expected{byCVE: map[string]map[string][]exposure.Finding{}}
	for id, inv := range x.invs {
		findings, _ := x.idx.Match(inv)
		for _, f := range findings {
			if want.byCVE[f.CVEID] == nil {
				want.byCVE[f.CVEID] = map[string][]exposure.Finding{}
			}
			want.byCVE[f.CVEID][id] = append(want.byCVE[f.CVEID][id], f)
		}
	}
	return want
}

// status is an agent's status for one CVE: affected when any of its
// findings is.
func status(findings []exposure.Finding) exposure.Status {
	for _, f := range findings {
		if f.Status == exposure.Affected {
			return exposure.Affected
		}
	}
	return exposure.Unknown
}

// counts returns the affected and unknown agents of a CVE.
func (w expected) counts(cveID string) (affected, unknown int) {
	for _, found := range w.byCVE[cveID] {
		if status(found) == exposure.Affected {
			affected++
		} else {
			unknown++
		}
	}
	return affected, unknown
}

// fleet returns the CVEs that affect an agent, in risk order.
func (x *exposureEnv) fleet(w expected) []string {
	var out []string
	for id := range w.byCVE {
		if a, _ := w.counts(id); a > 0 {
			out = append(out, id)
		}
	}
	x.sortByRisk(out)
	return out
}

func (x *exposureEnv) sortByRisk(ids []string) {
	cursor := func(id string) exposure.Cursor {
		r := x.risks[id]
		key, _ := cve.Key(id)
		return exposure.Cursor{KEV: r.KEV, EPSS: orMinus(r.EPSS), CVSS: orMinus(r.CVSS), CVEKey: key}
	}
	sort.Slice(ids, func(i, j int) bool { return exposure.Less(cursor(ids[i]), cursor(ids[j])) })
}

var (
	tableRow = regexp.MustCompile(`(?s)<tr>(.*?)</tr>`)
	rowHead  = regexp.MustCompile(`(?s)<th scope="row"><a href="([^"]+)">(.*?)</a></th>`)
	cell     = regexp.MustCompile(`(?s)<td>(.*?)</td>`)
	tag      = regexp.MustCompile(`<[^>]*>`)
	space    = regexp.MustCompile(`\s+`)
	nextPage = regexp.MustCompile(`href="(/vulnerabilities\?[^"]*)" rel="next">Next page</a>`)
)

// text is what a reader sees of a fragment of HTML.
func text(s string) string {
	return strings.TrimSpace(space.ReplaceAllString(html.UnescapeString(tag.ReplaceAllString(s, " ")), " "))
}

// row is a table body row as a reader sees it: the link of its heading
// cell and the heading, if any, and its other cells but empty spans.
type row struct {
	Href, Head string
	Cells      []string
}

func rows(body string) []row {
	var out []row
	for _, m := range tableRow.FindAllStringSubmatch(body, -1) {
		var r row
		if h := rowHead.FindStringSubmatch(m[1]); h != nil {
			r.Href, r.Head = html.UnescapeString(h[1]), text(h[2])
		}
		for _, c := range cell.FindAllStringSubmatch(m[1], -1) {
			r.Cells = append(r.Cells, text(c[1]))
		}
		if r.Head != "" || len(r.Cells) > 0 {
			out = append(out, r)
		}
	}
	return out
}

// sortFindings sorts findings as the store lists them.
func sortFindings(found []exposure.Finding) {
	sort.Slice(found, func(i, j int) bool {
		a, b := found[i], found[j]
		if a.Ecosystem != b.Ecosystem {
			return a.Ecosystem < b.Ecosystem
		}
		if a.Product != b.Product {
			return a.Product < b.Product
		}
		if a.Package != b.Package {
			return a.Package < b.Package
		}
		return a.Installed < b.Installed
	})
}

// score is how the pages show an optional score.
func score(f *float64, format string) string {
	if f == nil {
		return "—"
	}
	return fmt.Sprintf(format, *f)
}

// fixText is how the pages show the fix of a finding.
func fixText(f exposure.Finding) string {
	s := f.Fixed
	if s == "" {
		s = f.Reason
	}
	if f.KB != "" {
		s += " (" + f.KB + ")"
	}
	return s
}

// TestExposurePages checks the fleet risk list, a CVE's agents and an
// agent's exposure tab against a real evaluation: a SQLite control store
// whose agents reported real products, matched against a catalog of
// records from the bundled sample by the exposure service.
func TestExposurePages(t *testing.T) {
	x := newExposureEnv(t)
	x.mustAdmin()
	ctx := context.Background()
	const (
		kbFix     = "KB5041585"      // August 2024 cumulative update of Windows 11 23H2
		tcpip     = "CVE-2024-38063" // Windows TCP/IP, fixed by build 22631.4037
		winrar    = "CVE-2023-38831" // WinRAR < 6.23, in CISA KEV
		sope      = "CVE-2025-53603" // Debian 12 sope < 5.8.0-1+deb12u1
		noSuchCVE = "CVE-2099-0001"
	)
	windows := func(build string) device.Inventory {
		return device.Inventory{
			Software:       []device.Software{{Name: "Windows 11 Version 23H2", Version: "10.0." + build, Ecosystem: "Windows", Arch: "x64"}},
			PendingUpdates: []device.Update{{ID: kbFix, Title: "2024-08 Cumulative Update for Windows 11 Version 23H2", Severity: "critical"}},
		}
	}
	debian := func(sopeVersion, winrarVersion string) device.Inventory {
		return device.Inventory{Software: []device.Software{
			{Name: "libsope1", Version: sopeVersion, Ecosystem: "Debian:12", Source: "sope"},
			{Name: "WinRAR", Version: winrarVersion, Ecosystem: "Desktop"},
		}}
	}
	b := x.browser()
	b.signIn()

	// Before any evaluation, nothing is known to be affected.
	r := b.get("/vulnerabilities")
	wantStatus(t, "fleet risk before evaluation", r, http.StatusOK)
	if !strings.Contains(r.Body, "No agent is known to be affected by a CVE of the catalog.") || len(rows(r.Body)) != 0 {
		t.Errorf("fleet risk before evaluation:\n%s", r.Body)
	}

	old := x.checkIn("win-june", windows("22631.3737"))       // June 2024: before the July and August fixes
	patched := x.checkIn("win-august", windows("22631.4037")) // August 2024: fixed
	debOld := x.checkIn("deb-old", debian("5.8.0-1", "6.22"))
	debNew := x.checkIn("deb-new", debian("5.8.0-1+deb12u1", "6.23"))
	odd := x.checkIn("odd-winrar", device.Inventory{Software: []device.Software{{Name: "WinRAR", Version: "six", Ecosystem: "Desktop"}}})
	x.evaluate()
	want := x.expect()
	host := map[string]string{old.ID: "win-june", patched.ID: "win-august", debOld.ID: "deb-old", debNew.ID: "deb-new", odd.ID: "odd-winrar"}

	// What the real records say of these agents, so that the checks
	// below check something.
	for _, c := range []struct {
		cve               string
		affected, unknown []string
		fixed             string
	}{
		{cve: tcpip, affected: []string{old.ID}, fixed: "10.0.22631.4037"},
		{cve: winrar, affected: []string{debOld.ID}, unknown: []string{odd.ID}, fixed: "6.23"},
		{cve: sope, affected: []string{debOld.ID}, fixed: "5.8.0-1+deb12u1"},
	} {
		var gotA, gotU []string
		for id, found := range want.byCVE[c.cve] {
			if status(found) == exposure.Affected {
				gotA = append(gotA, id)
				if found[0].Fixed != c.fixed {
					t.Errorf("%s: %s fixed by %q, want %q", c.cve, host[id], found[0].Fixed, c.fixed)
				}
			} else {
				gotU = append(gotU, id)
			}
		}
		if !cmp.Equal(gotA, c.affected) || !cmp.Equal(gotU, c.unknown) {
			t.Fatalf("the sample catalog: %s affects %v and leaves %v unknown, want %v and %v", c.cve, gotA, gotU, c.affected, c.unknown)
		}
	}
	if !x.risks[winrar].KEV || x.risks[tcpip].KEV || x.risks[tcpip].Severity == "" {
		t.Fatalf("the sample catalog: risks %+v %+v", x.risks[winrar], x.risks[tcpip])
	}
	fleet := x.fleet(want)
	if len(fleet) <= fleetPageSize {
		t.Fatalf("the fleet has %d CVEs, want more than a page of %d", len(fleet), fleetPageSize)
	}

	t.Run("fleet", func(t *testing.T) {
		var got []string
		var pages int
		seenKB := false
		for next := "/vulnerabilities"; next != ""; pages++ {
			if pages == 5 {
				t.Fatalf("more than %d pages: %s", pages, next)
			}
			r := b.get(next)
			wantStatus(t, next, r, http.StatusOK)
			page := rows(r.Body)
			if len(page) == 0 || len(page) > fleetPageSize {
				t.Fatalf("%s: %d rows", next, len(page))
			}
			for _, row := range page {
				got = append(got, row.Head)
				id, risk := row.Head, x.risks[row.Head]
				if row.Href != "/vulnerabilities/"+id || len(row.Cells) != 7 {
					t.Fatalf("%s: row %+v", next, row)
				}
				affected, unknown := want.counts(id)
				kev := "—"
				if risk.KEV {
					kev = "KEV"
				}
				severity := risk.Severity
				if severity == "" {
					severity = "—"
				}
				wantCells := []string{kev, score(risk.EPSS, "%.3f"), score(risk.CVSS, "%.1f"), severity, fmt.Sprint(affected), fmt.Sprint(unknown)}
				if diff := cmp.Diff(wantCells, row.Cells[:6]); diff != "" {
					t.Errorf("%s row (-want +got):\n%s", id, diff)
				}
				for _, found := range want.byCVE[id] {
					for _, f := range found {
						if f.Status != exposure.Affected {
							continue
						}
						fix := f.Product + " " + f.Fixed
						if f.KB != "" {
							fix += " (" + f.KB + ")"
							seenKB = true
						}
						if !strings.Contains(row.Cells[6], fix) {
							t.Errorf("%s: fixed in %q, want %q in it", id, row.Cells[6], fix)
						}
					}
				}
			}
			next = ""
			if m := nextPage.FindStringSubmatch(r.Body); m != nil {
				next = html.UnescapeString(m[1])
			}
		}
		if diff := cmp.Diff(fleet, got); diff != "" {
			t.Errorf("CVEs over %d pages, in risk order (-want +got):\n%s", pages, diff)
		}
		if want := (len(fleet) + fleetPageSize - 1) / fleetPageSize; pages != want {
			t.Errorf("%d CVEs on %d pages, want %d", len(fleet), pages, want)
		}
		if !seenKB {
			t.Error("no fix names a KB")
		}
		wantStatus(t, "a forged page link", b.get("/vulnerabilities?after=CVE-2024-38063&kev=0&epss=high&cvss=9.8"), http.StatusBadRequest)
		wantStatus(t, "a page link without a CVE", b.get("/vulnerabilities?after=x&kev=0&epss=0.5&cvss=9.8"), http.StatusBadRequest)
	})

	t.Run("cve", func(t *testing.T) {
		for _, id := range []string{tcpip, winrar, sope} {
			r := b.get("/vulnerabilities/" + id)
			wantStatus(t, id, r, http.StatusOK)
			risk := x.risks[id]
			affected, unknown := want.counts(id)
			facts := text(r.Body)
			kev := "KEV No"
			if risk.KEV {
				kev = "KEV Known exploited (CISA KEV)"
			}
			cvss := "CVSS " + score(risk.CVSS, "%.1f")
			if risk.Severity != "" {
				cvss += " (" + risk.Severity + ")"
			}
			for _, s := range []string{"<h1>" + id + "</h1>", kev, cvss, fmt.Sprintf("Agents %d affected, %d unknown", affected, unknown)} {
				if !strings.Contains(r.Body, s) && !strings.Contains(facts, s) {
					t.Errorf("%s: page lacks %q", id, s)
				}
			}
			if !strings.Contains(r.Body, `action="/vulnerabilities/`+id+`/install-fix"`) {
				t.Errorf("%s: no install-the-fix form", id)
			}
			var wantRows, gotRows []row
			for agentID, found := range want.byCVE[id] {
				sortFindings(found)
				var installed, fixed []string
				for _, f := range found {
					installed = append(installed, f.Package+" "+f.Installed)
					fixed = append(fixed, fixText(f))
				}
				wantRows = append(wantRows, row{Href: "/agents/" + agentID + "/vulnerabilities", Head: host[agentID],
					Cells: []string{"—", string(status(found)), strings.Join(installed, "; "), strings.Join(fixed, "; ")}})
			}
			sort.Slice(wantRows, func(i, j int) bool { return wantRows[i].Href < wantRows[j].Href })
			gotRows = rows(r.Body)
			if diff := cmp.Diff(wantRows, gotRows); diff != "" {
				t.Errorf("%s: agents (-want +got):\n%s", id, diff)
			}
		}
		// Agents that the CVE does not affect are not listed.
		r := b.get("/vulnerabilities/" + winrar)
		if strings.Contains(r.Body, "deb-new") || strings.Contains(r.Body, "win-june") {
			t.Errorf("%s lists agents it does not affect", winrar)
		}
		r = b.get("/vulnerabilities/" + tcpip)
		if strings.Contains(r.Body, "win-august") || !strings.Contains(r.Body, "win-june") {
			t.Errorf("%s: the agents are wrong", tcpip)
		}
		wantStatus(t, "unknown CVE", b.get("/vulnerabilities/"+noSuchCVE), http.StatusNotFound)
		wantStatus(t, "not a CVE id", b.get("/vulnerabilities/log4shell"), http.StatusNotFound)
	})

	t.Run("agent", func(t *testing.T) {
		r := b.get("/agents/" + old.ID)
		if !strings.Contains(r.Body, `href="/agents/`+old.ID+`/vulnerabilities"`) {
			t.Errorf("the agent page has no link to its exposure")
		}
		for _, a := range []*device.Agent{old, patched, debOld, odd} {
			r := b.get("/agents/" + a.ID + "/vulnerabilities")
			wantStatus(t, host[a.ID], r, http.StatusOK)
			if !strings.Contains(r.Body, "<h1>Exposure of "+host[a.ID]+"</h1>") {
				t.Errorf("%s: no heading", host[a.ID])
			}
			findings, _ := x.idx.Match(x.invs[a.ID])
			var ids []string
			byCVE := map[string][]exposure.Finding{}
			for _, f := range findings {
				if byCVE[f.CVEID] == nil {
					ids = append(ids, f.CVEID)
				}
				byCVE[f.CVEID] = append(byCVE[f.CVEID], f)
			}
			x.sortByRisk(ids)
			var wantRows []row
			for _, id := range ids {
				risk := x.risks[id]
				kev := "—"
				if risk.KEV {
					kev = "KEV"
				}
				// One row per finding, the CVE's facts on the first.
				sortFindings(byCVE[id])
				for i, f := range byCVE[id] {
					finding := []string{f.Package + " (" + f.Ecosystem + ")", f.Installed, fixText(f)}
					if i > 0 {
						wantRows = append(wantRows, row{Cells: finding})
						continue
					}
					wantRows = append(wantRows, row{Href: "/vulnerabilities/" + id, Head: id, Cells: append([]string{
						string(status(byCVE[id])), kev, score(risk.EPSS, "%.3f"), score(risk.CVSS, "%.1f")}, finding...)})
				}
			}
			if diff := cmp.Diff(wantRows, rows(r.Body)); diff != "" {
				t.Errorf("%s (-want +got):\n%s", host[a.ID], diff)
			}
		}
		r = b.get("/agents/" + debNew.ID + "/vulnerabilities")
		wantStatus(t, "an agent without vulnerabilities", r, http.StatusOK)
		if !strings.Contains(r.Body, "No CVE of the catalog is known to affect this agent.") || len(rows(r.Body)) != 0 {
			t.Errorf("an agent without vulnerabilities:\n%s", r.Body)
		}
		wantStatus(t, "unknown agent", b.get("/agents/agt_unknown/vulnerabilities"), http.StatusNotFound)
	})

	t.Run("access", func(t *testing.T) {
		anon := x.browser()
		for _, p := range []string{"/vulnerabilities", "/vulnerabilities/" + tcpip, "/agents/" + old.ID + "/vulnerabilities"} {
			wantRedirect(t, "signed out "+p, anon.get(p), "/sign-in?next="+url.QueryEscape(p))
		}
		wantStatus(t, "signed-out install fix", anon.post("/vulnerabilities/"+tcpip+"/install-fix", url.Values{"csrf": {"x"}}), http.StatusForbidden)
		b.get("/vulnerabilities/" + tcpip)
		for _, bad := range []string{"", "forged"} {
			wantStatus(t, "install fix with token "+bad, b.post("/vulnerabilities/"+tcpip+"/install-fix", url.Values{"csrf": {bad}}), http.StatusForbidden)
		}
		req, _ := http.NewRequest("POST", x.http.URL+"/vulnerabilities/"+tcpip+"/install-fix", strings.NewReader(url.Values{"csrf": {b.csrf}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Sec-Fetch-Site", "cross-site")
		wantStatus(t, "cross-site install fix", b.do(req), http.StatusForbidden)
		if rs, _ := x.store.FindRollouts(ctx, device.RolloutFilter{}); len(rs) != 0 {
			t.Errorf("refused requests created rollouts: %+v", rs)
		}
	})

	// Last, as it changes the store.
	t.Run("install fix", func(t *testing.T) {
		b := x.browser()
		b.signIn()
		r := b.get("/vulnerabilities/" + tcpip)
		if !strings.Contains(r.Body, "you may be asked for your password") {
			t.Errorf("the form does not say that it may ask for the password")
		}
		// A privileged action: the console asks who it is first, and
		// says what for.
		r = b.post("/vulnerabilities/"+tcpip+"/install-fix", nil)
		wantStatus(t, "install fix without re-authentication", r, http.StatusOK)
		if !strings.Contains(r.Body, "reauth_password") || !strings.Contains(r.Body, "Install the fix of "+tcpip) ||
			!strings.Contains(r.Body, `href="/vulnerabilities/`+tcpip+`"`) {
			t.Fatalf("install fix without re-authentication:\n%s", r.Body)
		}
		wantStatus(t, "wrong password", b.post("/vulnerabilities/"+tcpip+"/install-fix", url.Values{"reauth_password": {"not the password"}}), http.StatusUnprocessableEntity)
		if rs, _ := x.store.FindRollouts(ctx, device.RolloutFilter{}); len(rs) != 0 {
			t.Fatalf("a rollout was created before re-authentication: %+v", rs)
		}

		// Without deployment rings there is nothing to roll out to.
		r = b.post("/vulnerabilities/"+tcpip+"/install-fix", url.Values{"reauth_password": {testPassword}})
		wantRedirect(t, "install fix without rings", r, "/vulnerabilities/"+tcpip)
		if r := b.get("/vulnerabilities/" + tcpip); !strings.Contains(r.Body, "There are no deployment rings to roll out to.") {
			t.Errorf("no rings: the page does not say why:\n%s", r.Body)
		}

		if err := x.store.CreateRing(ctx, &device.Ring{Name: "pilot", Position: 10, CreatedAt: x.clock.Now()}); err != nil {
			t.Fatal(err)
		}
		for _, a := range []*device.Agent{old, patched} {
			if _, err := x.store.SetAgentRing(ctx, a.ID, "pilot"); err != nil {
				t.Fatal(err)
			}
		}
		// Re-authenticated a moment ago: this one goes through.
		b.get("/vulnerabilities/" + tcpip)
		r = b.post("/vulnerabilities/"+tcpip+"/install-fix", nil)
		wantRedirect(t, "install fix", r, "/rollouts/"+device.RolloutIDPrefix)
		rolloutPath := r.Header.Get("Location")
		r = b.get(rolloutPath)
		wantStatus(t, "the fix rollout", r, http.StatusOK)
		for _, s := range []string{"Install the fix of " + tcpip, "Rollout created for the 1 agent(s) " + tcpip + " affects."} {
			if !strings.Contains(html.UnescapeString(r.Body), s) {
				t.Errorf("rollout page lacks %q", s)
			}
		}
		en := x.lastAudit("rollout.created")
		if en.Actor != "admin:"+testEmail || en.KeyID != "" || !strings.Contains(string(en.Details), strings.TrimPrefix(rolloutPath, "/rollouts/")) {
			t.Errorf("rollout.created entry = %+v %s", en, en.Details)
		}

		// Its first ring installs the pending updates (every one: no
		// list) of the affected agent only.
		wantRedirect(t, "start the first ring", b.post(rolloutPath+"/advance", url.Values{"fromRing": {""}}), rolloutPath)
		cmds, err := x.store.FindCommands(ctx, device.CommandFilter{RolloutID: strings.TrimPrefix(rolloutPath, "/rollouts/")})
		if err != nil {
			t.Fatal(err)
		}
		if len(cmds) != 1 || cmds[0].AgentID != old.ID || cmds[0].Type != device.InstallUpdates || len(cmds[0].Params) != 0 {
			for _, c := range cmds {
				t.Errorf("command of the fix rollout: %+v %s", c, c.Params)
			}
			t.Errorf("%d commands, want the install-updates of %s", len(cmds), old.ID)
		}
	})

	// A CVE that affects no agent has no fix to install.
	t.Run("nothing to fix", func(t *testing.T) {
		r := b.post("/vulnerabilities/"+noSuchCVE+"/install-fix", url.Values{"reauth_password": {testPassword}})
		wantRedirect(t, "install the fix of an unknown CVE", r, "/vulnerabilities/"+noSuchCVE)
		if rs, _ := x.store.FindRollouts(ctx, device.RolloutFilter{}); len(rs) != 1 {
			t.Errorf("%d rollouts, want 1", len(rs))
		}
	})
}

// TestExposureUnavailable checks the pages of a console without endpoint
// exposure.
func TestExposureUnavailable(t *testing.T) {
	e := newEnv(t)
	e.mustAdmin()
	a := e.enroll("laptop-0042", device.FeatureUpgrade{State: device.FeatureUpgradeNone})
	b := e.browser()
	b.signIn()
	for _, p := range []string{"/vulnerabilities", "/vulnerabilities/CVE-2024-38063", "/agents/" + a.ID + "/vulnerabilities", "/kev", "/kev.csv"} {
		r := b.get(p)
		wantStatus(t, p, r, http.StatusNotFound)
		if !strings.Contains(r.Body, "Endpoint exposure is not available on this server.") {
			t.Errorf("%s:\n%s", p, r.Body)
		}
	}
}

// TestKEVPage shows the KEV CVEs of the fleet with CISA's due dates, and
// exports them.
func TestKEVPage(t *testing.T) {
	x := newExposureEnv(t)
	x.mustAdmin()
	const winrar = "CVE-2023-38831" // WinRAR < 6.23: CISA KEV, added 2023-08-24, due 2023-09-14
	b := x.browser()
	b.signIn()
	r := b.get("/kev")
	wantStatus(t, "KEV page before evaluation", r, http.StatusOK)
	if !strings.Contains(r.Body, "No agent is known to be affected by a CVE of CISA’s KEV catalog.") {
		t.Errorf("KEV page before evaluation:\n%s", r.Body)
	}
	winrarAt := func(v string) device.Inventory {
		return device.Inventory{Software: []device.Software{{Name: "WinRAR", Version: v, Ecosystem: "Desktop"}}}
	}
	x.checkIn("=old-winrar", winrarAt("6.22"))
	x.checkIn("new-winrar", winrarAt("6.23"))
	x.evaluate()

	r = b.get("/kev")
	wantStatus(t, "KEV page", r, http.StatusOK)
	for _, want := range []string{winrar, "2023-08-24", "2023-09-14", "overdue by", "=old-winrar", "winrar 6.23", `href="/kev.csv"`, `aria-current="page">KEV due dates`} {
		if !strings.Contains(html.UnescapeString(r.Body), want) {
			t.Errorf("KEV page lacks %q:\n%s", want, r.Body)
		}
	}
	if strings.Contains(r.Body, "new-winrar") {
		t.Error("the KEV page names an agent that has the fix")
	}
	r = b.get("/kev.csv")
	wantStatus(t, "KEV CSV", r, http.StatusOK)
	lines := strings.Split(strings.TrimSpace(r.Body), "\n")
	if len(lines) != 2 || !strings.Contains(lines[1], ",'=old-winrar,") || !strings.Contains(lines[1], ","+winrar+",") {
		t.Errorf("KEV CSV:\n%s", r.Body)
	}
}
