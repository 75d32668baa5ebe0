package exposure

import (
	"fmt"
	"testing"

	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/device"
)

func str(s string) *string { return &s }

// indexOf builds an index of records, as Refresh does.
func indexOf(records ...*cve.Record) *Index {
	x := NewIndex()
	for _, r := range records {
		key, _ := cve.Key(r.CVEID)
		x.insert(cveEntry{key: key}, x.productsOf(r), nil)
	}
	return x
}

// log4j is CVE-2021-44228 as the catalog holds it: the Maven atoms of
// OSV with their ranges, and the Vendor atoms of the CNA.
var log4j = &cve.Record{CVEID: "CVE-2021-44228", Remediation: cve.Remediation{Available: true, Products: []cve.Product{
	{Ecosystem: "Maven", Product: "org.apache.logging.log4j:log4j-core", Atoms: []cve.Atom{
		{FixedVersion: "2.3.1", AffectedRange: str("< 2.3.1")},
		{FixedVersion: "2.12.2", AffectedRange: str(">= 2.4, < 2.12.2")},
		{FixedVersion: "2.15.0", AffectedRange: str(">= 2.13.0, < 2.15.0")},
	}},
	// Without ranges: the branch rule decides.
	{Ecosystem: "Vendor", Product: "Apache Log4j2", Atoms: []cve.Atom{
		{FixedVersion: "2.3.1"}, {FixedVersion: "2.12.2"}, {FixedVersion: "2.15.0"},
	}},
}}}

// win is CVE-2024-38063 as the catalog holds it: MSRC's products, one per
// architecture, with their KB, and the CNA's product without architecture
// or KB.
var win = &cve.Record{CVEID: "CVE-2024-38063", Remediation: cve.Remediation{Available: true, Products: []cve.Product{
	{Ecosystem: "Windows", Product: "Windows 11 Version 23H2", Atoms: []cve.Atom{{FixedVersion: "10.0.22631.4037"}}},
	{Ecosystem: "Windows", Product: "Windows 11 Version 23H2 for x64-based Systems", Atoms: []cve.Atom{{FixedVersion: "10.0.22631.4037", KB: "KB5041585"}}},
	{Ecosystem: "Windows", Product: "Windows 11 Version 23H2 for ARM64-based Systems", Atoms: []cve.Atom{{FixedVersion: "10.0.22631.4037", KB: "KB5041585"}}},
	{Ecosystem: "Windows", Product: "Windows 10 Version 1607 for x64-based Systems", Atoms: []cve.Atom{{FixedVersion: "KB4013429", KB: "KB4013429", Unparsed: true}}},
}}}

var sope = &cve.Record{CVEID: "CVE-2025-53603", Remediation: cve.Remediation{Available: true, Products: []cve.Product{
	{Ecosystem: "Debian:12", Product: "sope", Atoms: []cve.Atom{{FixedVersion: "5.8.0-1+deb12u1", AffectedRange: str("< 5.8.0-1+deb12u1"),
		EOL: &cve.EOL{EOLFrom: str("2026-06-10")}}}},
}}}

var winrar = &cve.Record{CVEID: "CVE-2023-38831", Remediation: cve.Remediation{Available: true, Products: []cve.Product{
	{Ecosystem: "Desktop", Product: "rarlab:winrar", Atoms: []cve.Atom{{FixedVersion: "6.23", AffectedRange: str("< 6.23")}}},
}}}

func one(t *testing.T, x *Index, inv device.Inventory) []Finding {
	t.Helper()
	f, _ := x.Match(inv)
	return f
}

func TestMatchMultiBranch(t *testing.T) {
	x := indexOf(log4j)
	for _, eco := range []string{"Maven", "Vendor"} {
		name := "org.apache.logging.log4j:log4j-core"
		if eco == "Vendor" {
			name = "Apache Log4j2"
		}
		for _, tt := range []struct{ installed, fixed string }{
			{"2.0", "2.3.1"}, {"2.3.0", "2.3.1"}, {"2.3.1", ""}, {"2.3.2", ""},
			{"2.12.1", "2.12.2"}, {"2.12.2", ""}, {"2.13.0", "2.15.0"}, {"2.14.1", "2.15.0"},
			{"2.15.0", ""}, {"2.17.1", ""},
		} {
			got := one(t, x, device.Inventory{Software: []device.Software{{Name: name, Version: tt.installed, Ecosystem: eco}}})
			switch {
			case tt.fixed == "" && len(got) != 0:
				t.Errorf("%s %s: %+v, want not affected", eco, tt.installed, got)
			case tt.fixed != "" && (len(got) != 1 || got[0].Status != Affected || got[0].Fixed != tt.fixed):
				t.Errorf("%s %s: %+v, want affected, fixed by %s", eco, tt.installed, got, tt.fixed)
			}
		}
	}
}

// TestMatchWithoutFix matches the ranges affected with no fix known: a
// last affected version (CVE-2024-1135, gunicorn, "<= 21.2.0"), an
// introducing version with no end (CVE-2022-24730, argo-cd, ">= 1.3.0"),
// every version ("*"), and such a range beside fixes of the same product,
// whose fix applies where it holds.
func TestMatchWithoutFix(t *testing.T) {
	x := indexOf(
		&cve.Record{CVEID: "CVE-2024-1135", Remediation: cve.Remediation{Products: []cve.Product{
			{Ecosystem: "PyPI", Product: "gunicorn", Atoms: []cve.Atom{{AffectedRange: str("<= 21.2.0")}}},
		}}},
		&cve.Record{CVEID: "CVE-2022-24730", Remediation: cve.Remediation{Available: true, Products: []cve.Product{
			{Ecosystem: "Go", Product: "github.com/argoproj/argo-cd", Atoms: []cve.Atom{{AffectedRange: str(">= 1.3.0")}}},
			{Ecosystem: "Go", Product: "github.com/argoproj/argo-cd/v2", Atoms: []cve.Atom{
				{FixedVersion: "2.1.11", AffectedRange: str("< 2.1.11")},
				{FixedVersion: "2.2.6", AffectedRange: str(">= 2.2.0, < 2.2.6")},
				{AffectedRange: str(">= 2.4.0, <= 2.4.2")},
			}},
		}}},
		&cve.Record{CVEID: "CVE-2020-8911", Remediation: cve.Remediation{Products: []cve.Product{
			{Ecosystem: "Go", Product: "github.com/aws/aws-sdk-go", Atoms: []cve.Atom{{AffectedRange: str("*")}}},
		}}},
	)
	for _, tt := range []struct {
		eco, name, installed string
		affected             bool
		fixed                string
	}{
		{"PyPI", "gunicorn", "19.0", true, ""},
		{"PyPI", "gunicorn", "21.2.0", true, ""},
		{"PyPI", "gunicorn", "21.2.1", false, ""},
		{"PyPI", "gunicorn", "22.0.0", false, ""},
		{"Go", "github.com/argoproj/argo-cd", "1.2.9", false, ""},
		{"Go", "github.com/argoproj/argo-cd", "1.3.0", true, ""},
		{"Go", "github.com/argoproj/argo-cd", "1.8.7", true, ""},
		{"Go", "github.com/argoproj/argo-cd/v2", "2.1.10", true, "2.1.11"},
		{"Go", "github.com/argoproj/argo-cd/v2", "2.1.11", false, ""},
		{"Go", "github.com/argoproj/argo-cd/v2", "2.2.5", true, "2.2.6"},
		{"Go", "github.com/argoproj/argo-cd/v2", "2.3.0", false, ""},
		{"Go", "github.com/argoproj/argo-cd/v2", "2.4.0", true, ""},
		{"Go", "github.com/argoproj/argo-cd/v2", "2.4.2", true, ""},
		{"Go", "github.com/argoproj/argo-cd/v2", "2.4.3", false, ""},
		{"Go", "github.com/aws/aws-sdk-go", "0.0.0-20150717181359-44718f8a89b0", true, ""},
		{"Go", "github.com/aws/aws-sdk-go", "1.55.5", true, ""},
	} {
		got := one(t, x, device.Inventory{Software: []device.Software{{Name: tt.name, Version: tt.installed, Ecosystem: tt.eco}}})
		switch {
		case !tt.affected && len(got) != 0:
			t.Errorf("%s %s: %+v, want not affected", tt.name, tt.installed, got)
		case tt.affected && (len(got) != 1 || got[0].Status != Affected || got[0].Fixed != tt.fixed):
			t.Errorf("%s %s: %+v, want affected, fixed by %q", tt.name, tt.installed, got, tt.fixed)
		}
	}
}

func TestMatchUnparsedIsUnknown(t *testing.T) {
	x := indexOf(log4j, sope)
	got := one(t, x, device.Inventory{Software: []device.Software{{Name: "org.apache.logging.log4j:log4j-core", Version: "not a version!", Ecosystem: "Maven"}}})
	if len(got) != 1 || got[0].Status != Unknown || got[0].Reason == "" {
		t.Fatalf("unparsed version: %+v, want unknown", got)
	}
	got = one(t, x, device.Inventory{Software: []device.Software{{Name: "libsope1", Source: "sope", Version: "5.8.0 1", Ecosystem: "Debian:12"}}})
	if len(got) != 1 || got[0].Status != Unknown {
		t.Fatalf("unparsed Debian version: %+v, want unknown", got)
	}
}

func TestMatchWindows(t *testing.T) {
	x := indexOf(win)
	os := func(build string, kbs ...string) device.Inventory {
		inv := device.Inventory{Software: []device.Software{{Name: "Windows 11 Version 23H2", Version: build, Ecosystem: "Windows", Arch: "x64"}}}
		for _, kb := range kbs {
			inv.InstalledUpdates = append(inv.InstalledUpdates, device.Update{ID: kb})
		}
		return inv
	}
	got := one(t, x, os("10.0.22631.3880", "KB5040442"))
	if len(got) != 1 || got[0].Status != Affected || got[0].Fixed != "10.0.22631.4037" || got[0].KB != "KB5041585" {
		t.Errorf("build below the fix: %+v", got)
	}
	if got := one(t, x, os("10.0.22631.4037")); len(got) != 0 {
		t.Errorf("build at the fix: %+v", got)
	}
	if got := one(t, x, os("10.0.22631.3000", "KB5041585")); len(got) != 0 {
		t.Errorf("KB installed: %+v", got)
	}
	// A fix known only as a KB that is not installed is unknown.
	got = one(t, x, device.Inventory{Software: []device.Software{{Name: "Windows 10 Version 1607", Version: "10.0.14393.0", Ecosystem: "Windows", Arch: "x64"}}})
	if len(got) != 1 || got[0].Status != Unknown || got[0].KB != "KB4013429" {
		t.Errorf("KB-only fix: %+v", got)
	}
}

func TestMatchSourcePackageAndNames(t *testing.T) {
	x := indexOf(sope, winrar)
	got := one(t, x, device.Inventory{Software: []device.Software{
		{Name: "libsope1", Source: "sope", Version: "5.8.0-1", Ecosystem: "Debian:12"},
		{Name: "sogo", Version: "5.8.0-1", Ecosystem: "Debian:12"},
		{Name: "WinRAR", Version: "6.22", Ecosystem: "Desktop"},
	}})
	if len(got) != 2 || got[0].CVEID != "CVE-2023-38831" || got[1].CVEID != "CVE-2025-53603" {
		t.Fatalf("findings %+v", got)
	}
	if got[1].Package != "libsope1" || got[1].EOLFrom != "2026-06-10" {
		t.Errorf("sope finding %+v", got[1])
	}
	if got := one(t, x, device.Inventory{Software: []device.Software{{Name: "libsope1", Source: "sope", Version: "5.8.0-1+deb12u1", Ecosystem: "Debian:12"},
		{Name: "WinRAR", Version: "7.01", Ecosystem: "Desktop"}}}); len(got) != 0 {
		t.Errorf("fixed versions: %+v", got)
	}
	// Another release's ecosystem does not match.
	if got := one(t, x, device.Inventory{Software: []device.Software{{Name: "sope", Version: "1.0", Ecosystem: "Debian:11"}}}); len(got) != 0 {
		t.Errorf("Debian 11: %+v", got)
	}
}

func TestBranch(t *testing.T) {
	for in, want := range map[string]string{"2.12.2": "2.12", "1:9.2p1-2+deb12u3": "9", "10.0.22631.4037": "10.0.22631", "v1.2.3": "1.2", "7": "7"} {
		if got := branch(in); got != want {
			t.Errorf("branch(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestAddFindingAndKeep(t *testing.T) {
	var agents []CVEAgent
	add := func(id string, st Status) {
		agents = AddFinding(agents, CVEAgent{AgentID: id, Hostname: "host-" + id},
			Finding{CVEID: "CVE-2024-0001", Package: id + "-pkg", Status: st})
	}
	add("a", Unknown)
	add("a", Affected) // a second finding of a makes it affected
	add("b", Unknown)
	add("c", Affected)
	if len(agents) != 3 || agents[0].Status != Affected || len(agents[0].Findings) != 2 || agents[1].Status != Unknown {
		t.Fatalf("grouped: %+v", agents)
	}
	affected := AgentFilter{Status: Affected}.Keep(append([]CVEAgent(nil), agents...))
	if len(affected) != 2 || affected[0].AgentID != "a" || affected[1].AgentID != "c" {
		t.Errorf("Keep(affected) = %+v", affected)
	}
	if got := (AgentFilter{Limit: 1}).Keep(append([]CVEAgent(nil), agents...)); len(got) != 1 || got[0].AgentID != "a" {
		t.Errorf("Keep(limit 1) = %+v", got)
	}
	if got := (AgentFilter{}).Keep(agents); len(got) != 3 {
		t.Errorf("Keep(no filter) = %+v", got)
	}
}

// publisher is CVE-2023-21715 as the catalog holds it: Microsoft 365
// Apps fixed in the Click-to-Run release of February 2023, no build named.
var publisher = &cve.Record{CVEID: "CVE-2023-21715", Remediation: cve.Remediation{Available: true, Products: []cve.Product{
	{Ecosystem: "Microsoft", Product: "Microsoft 365 Apps for Enterprise for 64-bit Systems", Atoms: []cve.Atom{{
		FixedVersion: "Click-to-Run release of 2023-02", SourceURL: str("https://aka.ms/OfficeSecurityReleases"), Unparsed: true}}},
	{Ecosystem: "Microsoft", Product: "Microsoft 365 Apps for Enterprise for 32-bit Systems", Atoms: []cve.Atom{{
		FixedVersion: "Click-to-Run release of 2023-02", SourceURL: str("https://aka.ms/OfficeSecurityReleases"), Unparsed: true}}},
}}}

func TestMatchClickToRun(t *testing.T) {
	x := indexOf(publisher)
	// An Office build as the Windows agent reports it, with the
	// platform of its Click-to-Run installation.
	got := one(t, x, device.Inventory{Software: []device.Software{
		{Name: "Microsoft 365 Apps for enterprise", Version: "16.0.17029.20108", Ecosystem: "Microsoft", Arch: "x64"}}})
	if len(got) != 1 {
		t.Fatalf("findings %+v, want one", got)
	}
	f := got[0]
	if f.Status != Unknown || f.Product != "Microsoft 365 Apps for Enterprise for 64-bit Systems" || f.Fixed != "Click-to-Run release of 2023-02" ||
		f.Reason != "the fix is known only as \u201cClick-to-Run release of 2023-02\u201d, which cannot be compared with the installed version (see https://aka.ms/OfficeSecurityReleases)" {
		t.Errorf("finding %+v", f)
	}
}

// TestMemo finds each answer it keeps, in its list and past it in its map.
func TestMemo(t *testing.T) {
	var m memo
	for i := range int32(3 * memoList) {
		if m.find(i) != nil {
			t.Fatalf("find(%d) before add", i)
		}
		if j := m.add(judged{fixes: i, f: Finding{Fixed: fmt.Sprint(i)}, ok: i%2 == 0}); j.fixes != i {
			t.Fatalf("add(%d) returned %d", i, j.fixes)
		}
		for k := range i + 1 {
			if j := m.find(k); j == nil || j.f.Fixed != fmt.Sprint(k) || j.ok != (k%2 == 0) {
				t.Fatalf("after %d adds, find(%d) = %+v", i+1, k, j)
			}
		}
	}
	if m.find(-1) != nil {
		t.Error("find of a set never added")
	}
}
