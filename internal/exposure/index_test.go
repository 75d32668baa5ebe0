package exposure

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/device"
	"github.com/patchline/patchline/internal/errs"
	"github.com/patchline/patchline/internal/sbom"
)

// mapCatalog is a catalog of records held in a map, for Refresh: it
// answers Walk and Record.
type mapCatalog struct {
	cve.Catalog
	records  map[string]*cve.Record
	modified map[string]time.Time
	epss     map[string]float64 // scores, when given
}

func (c *mapCatalog) Walk(ctx context.Context, after string, fn func(cve.Summary) error) error {
	var ids []string
	for id := range c.records {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, cve.Compare)
	for _, id := range ids {
		m := c.modified[id]
		r := c.records[id]
		s := cve.Summary{CVEID: id, ModifiedAt: &m, HasRemediation: r.Remediation.Available}
		if e, ok := c.epss[id]; ok {
			s.EPSS = &e
		}
		if err := fn(s); err != nil {
			return err
		}
	}
	return nil
}

func (c *mapCatalog) Record(ctx context.Context, id string) (*cve.Record, error) {
	if r, ok := c.records[id]; ok {
		return r, nil
	}
	return nil, errs.ErrNotFound
}

func windowsFix(id, build, kb string) *cve.Record {
	return &cve.Record{CVEID: id, Remediation: cve.Remediation{Available: true, Products: []cve.Product{
		{Ecosystem: "Windows", Product: "Windows 11 Version 23H2 for x64-based Systems", Atoms: []cve.Atom{
			{FixedVersion: build, KB: kb, SourceURL: str("https://msrc.microsoft.com/update-guide/vulnerability/" + id)},
		}},
	}}}
}

// fixedOf returns the fixed version of each affected finding, by CVE.
func fixedOf(findings []Finding) map[string]string {
	out := map[string]string{}
	for _, f := range findings {
		if f.Status == Affected {
			out[f.CVEID] = f.Fixed
		}
	}
	return out
}

// TestRefreshSharesAndForgets refreshes an index as its catalog changes:
// CVEs fixed by the same update share the product's atoms, and a change or
// a removal of one of them leaves the others as they were.
func TestRefreshSharesAndForgets(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2024, 11, 12, 18, 0, 0, 0, time.UTC)
	cat := &mapCatalog{
		records: map[string]*cve.Record{
			"CVE-2024-43451": windowsFix("CVE-2024-43451", "10.0.22631.4460", "KB5046633"),
			"CVE-2024-49039": windowsFix("CVE-2024-49039", "10.0.22631.4460", "KB5046633"),
			"CVE-2021-44228": log4j,
		},
		modified: map[string]time.Time{"CVE-2024-43451": t0, "CVE-2024-49039": t0, "CVE-2021-44228": t0},
	}
	x := NewIndex()
	if _, err := x.Refresh(ctx, cat); err != nil {
		t.Fatal(err)
	}
	if list := x.products.get(Key("Windows", "Windows 11 Version 23H2")); len(list) != 2 || list[0].fixes != list[1].fixes {
		t.Fatalf("two CVEs fixed by one update do not share its atoms: %+v", list)
	}
	pc := device.Inventory{Software: []device.Software{{Name: "Windows 11 Version 23H2", Version: "10.0.22631.4317", Ecosystem: "Windows", Arch: "x64"}}}
	match := func() map[string]string {
		findings, _ := x.Match(pc)
		return fixedOf(findings)
	}
	want := map[string]string{"CVE-2024-43451": "10.0.22631.4460", "CVE-2024-49039": "10.0.22631.4460"}
	if got := match(); !maps.Equal(got, want) {
		t.Fatalf("before the change: %v, want %v", got, want)
	}

	cat.records["CVE-2024-49039"] = windowsFix("CVE-2024-49039", "10.0.22631.4602", "KB5048685")
	cat.modified["CVE-2024-49039"] = t0.Add(24 * time.Hour)
	up, err := x.Refresh(ctx, cat)
	if err != nil {
		t.Fatal(err)
	}
	if up.Records != 1 || !slices.Contains(up.Keys, Key("Windows", "Windows 11 Version 23H2")) {
		t.Fatalf("refresh after one change: read %d records, keys %q", up.Records, up.Keys)
	}
	want = map[string]string{"CVE-2024-43451": "10.0.22631.4460", "CVE-2024-49039": "10.0.22631.4602"}
	if got := match(); !maps.Equal(got, want) {
		t.Fatalf("after the change: %v, want %v", got, want)
	}

	delete(cat.records, "CVE-2024-43451")
	if _, err := x.Refresh(ctx, cat); err != nil {
		t.Fatal(err)
	}
	want = map[string]string{"CVE-2024-49039": "10.0.22631.4602"}
	if got := match(); !maps.Equal(got, want) {
		t.Fatalf("after the removal: %v, want %v", got, want)
	}
	if x.Len() != 2 {
		t.Fatalf("index holds %d CVEs, want 2", x.Len())
	}

	// A CVE added since takes the slot of one dropped before.
	cat.records["CVE-2024-38063"] = windowsFix("CVE-2024-38063", "10.0.22631.4391", "KB5044380")
	cat.modified["CVE-2024-38063"] = t0
	if _, err := x.Refresh(ctx, cat); err != nil {
		t.Fatal(err)
	}
	want = map[string]string{"CVE-2024-38063": "10.0.22631.4391", "CVE-2024-49039": "10.0.22631.4602"}
	if got := match(); !maps.Equal(got, want) {
		t.Fatalf("after an addition: %v, want %v", got, want)
	}
	// Four slots were taken before: three CVEs and the one CVE-2024-49039
	// left when read again.
	if len(x.cves) != 4 || x.Len() != 3 {
		t.Errorf("%d slots for %d CVEs, want 4 for 3: a dropped slot is taken again", len(x.cves), x.Len())
	}
}

// TestRefreshWithoutFix indexes a record that names versions affected with
// no fix known (its summary says it has no remediation), and reads a
// record that names no product once, then again only when it changes.
func TestRefreshWithoutFix(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2024, 4, 16, 20, 57, 36, 0, time.UTC)
	cat := &mapCatalog{
		records: map[string]*cve.Record{
			"CVE-2024-1135": {CVEID: "CVE-2024-1135", Remediation: cve.Remediation{Products: []cve.Product{
				{Ecosystem: "PyPI", Product: "gunicorn", Atoms: []cve.Atom{{AffectedRange: str("<= 21.2.0")}}},
			}}},
			"CVE-2024-3094": {CVEID: "CVE-2024-3094"},
		},
		modified: map[string]time.Time{"CVE-2024-1135": t0, "CVE-2024-3094": t0},
	}
	x := NewIndex()
	for i, want := range []int{2, 0} {
		up, err := x.Refresh(ctx, cat)
		if err != nil {
			t.Fatal(err)
		}
		if up.Records != want {
			t.Errorf("refresh %d read %d records, want %d", i+1, up.Records, want)
		}
	}
	refs, _ := x.AffectedCVEs(sbom.Package{Ecosystem: "PyPI", Name: "gunicorn"}, 0)
	if want := []CVERef{{"CVE-2024-1135", t0}}; !slices.Equal(refs, want) || x.Len() != 1 {
		t.Fatalf("index holds %d CVEs, gunicorn's %v: want %v alone", x.Len(), refs, want)
	}
	got := fixedOf(x.MatchPackage(sbom.Package{Ecosystem: "PyPI", Name: "gunicorn", Version: "21.2.0"}))
	if want := map[string]string{"CVE-2024-1135": ""}; !maps.Equal(got, want) {
		t.Errorf("gunicorn 21.2.0: %v, want %v", got, want)
	}
	cat.modified["CVE-2024-3094"] = t0.Add(time.Hour)
	if up, err := x.Refresh(ctx, cat); err != nil || up.Records != 1 {
		t.Errorf("refresh after a change read %d records (%v), want 1", up.Records, err)
	}
}

// TestRefreshKeepsCVEOrder changes the first of three CVEs of a product:
// read again, it goes back to its place in the product's entries, which
// AffectedCVEs answers in order.
func TestRefreshKeepsCVEOrder(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2024, 11, 12, 18, 0, 0, 0, time.UTC)
	ids := []string{"CVE-2024-9999", "CVE-2024-10000", "CVE-2024-43451"}
	cat := &mapCatalog{records: map[string]*cve.Record{}, modified: map[string]time.Time{}}
	for _, id := range ids {
		cat.records[id], cat.modified[id] = windowsFix(id, "10.0.22631.4460", "KB5046633"), t0
	}
	x := NewIndex()
	if _, err := x.Refresh(ctx, cat); err != nil {
		t.Fatal(err)
	}
	cat.records[ids[0]], cat.modified[ids[0]] = windowsFix(ids[0], "10.0.22631.4602", "KB5048685"), t0.Add(time.Hour)
	if up, err := x.Refresh(ctx, cat); err != nil || up.Records != 1 {
		t.Fatalf("refresh: %v, %d records read", err, up.Records)
	}
	pc := sbom.Package{Ecosystem: "Windows", Name: "Windows 11 Version 23H2", Version: "10.0.22631.4317"}
	want := []CVERef{{ids[0], t0.Add(time.Hour)}, {ids[1], t0}, {ids[2], t0}}
	if got, complete := x.AffectedCVEs(pc, 0); !slices.Equal(got, want) || !complete {
		t.Errorf("AffectedCVEs = %v, %v; want %v, complete", got, complete, want)
	}
	if got, complete := x.AffectedCVEs(pc, 2); !slices.Equal(got, want[:2]) || complete {
		t.Errorf("AffectedCVEs at most 2 = %v, %v; want %v, not complete", got, complete, want[:2])
	}
	if got, complete := x.AffectedCVEs(pc, 3); !slices.Equal(got, want) || !complete {
		t.Errorf("AffectedCVEs at most 3 = %v, %v; want %v, complete", got, complete, want)
	}
	var order []string
	for _, en := range x.products.get(Key("Windows", "Windows 11 Version 23H2")) {
		order = append(order, x.cveID(en))
	}
	if !slices.Equal(order, ids) {
		t.Errorf("entries in the order %v, want %v", order, ids)
	}
}

// TestRefreshToRisks refreshes an index through RefreshTo: the records it
// reads give their risks with their description, in batches, and a score
// that changes without its record gives the new score alone.
func TestRefreshToRisks(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2024, 11, 12, 18, 0, 0, 0, time.UTC)
	cat := &mapCatalog{records: map[string]*cve.Record{}, modified: map[string]time.Time{}, epss: map[string]float64{}}
	n := riskBatch + 10
	for i := range n {
		id := fmt.Sprintf("CVE-2024-%d", 10000+i)
		r := windowsFix(id, "10.0.22631.4460", "KB5046633")
		r.Description = str("about " + id)
		cat.records[id], cat.modified[id], cat.epss[id] = r, t0, 0.1
	}
	type batch struct {
		n          int
		scoresOnly bool
	}
	var batches []batch
	var last []Risk
	put := func(risks []Risk, scoresOnly bool) error {
		batches = append(batches, batch{len(risks), scoresOnly})
		last = slices.Clone(risks)
		return nil
	}
	x := NewIndex()
	up, err := x.RefreshTo(ctx, cat, put)
	if err != nil {
		t.Fatal(err)
	}
	if want := []batch{{riskBatch, false}, {10, false}}; !slices.Equal(batches, want) || up.Records != n || up.Risks != nil {
		t.Fatalf("first build: batches %v, %d records read, Risks %d; want %v, %d, none", batches, up.Records, len(up.Risks), want, n)
	}
	if r := last[9]; r.Description != "about "+r.CVEID || r.EPSS == nil || *r.EPSS != 0.1 {
		t.Errorf("risk of a record read = %+v", r)
	}

	batches = nil
	id := "CVE-2024-10003"
	cat.epss[id] = 0.9
	if up, err = x.RefreshTo(ctx, cat, put); err != nil {
		t.Fatal(err)
	}
	if want := []batch{{1, true}}; !slices.Equal(batches, want) || up.Records != 0 || len(up.Keys) != 0 {
		t.Fatalf("after a new score: batches %v, %d records read, keys %v; want %v, none, none", batches, up.Records, up.Keys, want)
	}
	if r := last[0]; r.CVEID != id || r.EPSS == nil || *r.EPSS != 0.9 || r.Description != "" {
		t.Errorf("score = %+v, want %s at 0.9 without description", r, id)
	}

	stop := errors.New("store down")
	if _, err := x.RefreshTo(ctx, cat, func([]Risk, bool) error { return stop }); err != nil {
		t.Errorf("refresh with nothing to put: %v", err)
	}
	cat.modified[id] = t0.Add(time.Hour)
	if _, err := x.RefreshTo(ctx, cat, func([]Risk, bool) error { return stop }); !errors.Is(err, stop) {
		t.Errorf("refresh whose put fails: %v, want %v", err, stop)
	}
}

// TestFixesSharedByHash shares a set of atoms between the records that
// have it, and gives a set its own id when another holds its hash.
func TestFixesSharedByHash(t *testing.T) {
	x := NewIndex()
	first := x.productsOf(log4j)
	again := x.productsOf(log4j)
	if !slices.Equal(first, again) {
		t.Fatalf("the same products got ids %v, then %v", first, again)
	}
	// The Vendor product's hash made to name the Maven product's set, as
	// a collision would.
	vendor := x.fixes.get(first[1])
	h := x.pool.hashFixes(vendor.ecosystem, vendor.product, vendor.atoms)
	x.pool.fixes[h] = first[0]
	ids := x.productsOf(log4j)
	if ids[0] != first[0] || ids[1] == first[0] {
		t.Fatalf("after a collision, ids %v (before %v)", ids, first)
	}
	if !x.fixes.is(ids[1], "Vendor", "Apache Log4j2", vendor.atoms) {
		got := x.fixes.get(ids[1])
		t.Errorf("the colliding product got the set of %s %q", got.ecosystem, got.product)
	}
	if x.pool.fixes[h] != first[0] {
		t.Error("the set that held the hash lost it")
	}
}

// TestFixesTableLimits leaves out of the index a product the table cannot
// hold, and keeps the record's other products.
func TestFixesTableLimits(t *testing.T) {
	long := strings.Repeat("x", 1<<16)
	r := &cve.Record{CVEID: "CVE-2024-0001", Remediation: cve.Remediation{Available: true, Products: []cve.Product{
		{Ecosystem: "PyPI", Product: long, Atoms: []cve.Atom{{FixedVersion: "1.0"}}},
		{Ecosystem: "PyPI", Product: "requests", Atoms: []cve.Atom{{FixedVersion: "2.31.0"}}},
	}}}
	x := indexOf(r)
	if got := x.products.get(Key("PyPI", long)); len(got) != 0 {
		t.Errorf("the product of a 64 KiB name has %d entries", len(got))
	}
	list := x.products.get(Key("PyPI", "requests"))
	if len(list) != 1 {
		t.Fatalf("requests has %d entries, want 1", len(list))
	}
	if f := x.fixes.get(list[0].fixes); f.ecosystem != "PyPI" || f.product != "requests" || len(f.atoms) != 1 || f.atoms[0].fixedVersion != "2.31.0" {
		t.Errorf("requests's set: %+v", f)
	}
}
