package msrc

import (
	"context"
	"path"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/feed/feedtest"
)

// The documents under test are the real monthly CVRF documents in
// internal/sample/data/msrc (see its SOURCE.md), and small documents
// written inline in the same format for the cases they do not hold.

const dataDir = "msrc"

// month returns a monthly document of the sample, decompressed.
func month(tb testing.TB, name string) []byte {
	tb.Helper()
	return feedtest.Sample(tb, path.Join(dataDir, name+".xml.gz"))
}

func mustParse(t *testing.T, name string, data []byte) *feedtest.Recorder {
	t.Helper()
	return feedtest.Parse(t, Parser, name, data)
}

func source(id string) cve.DataSource {
	return cve.DataSource{Name: "msrc", License: "Microsoft Terms of Use", URL: feedtest.Ptr(guideURL + id)}
}

func guide(id string) []cve.Reference {
	return []cve.Reference{{URL: guideURL + id, Tags: []string{"vendor-advisory"}}}
}

// build is the atom of a fixed build with its KB.
func build(eco, product, fixed, kb, url string) cve.ProductAtom {
	a := cve.ProductAtom{
		Ecosystem: eco,
		Product:   product,
		Atom: cve.Atom{
			FixedVersion:  fixed,
			AffectedRange: feedtest.Ptr("< " + fixed),
			AdvisoryID:    feedtest.Ptr(kb),
			SourceURL:     feedtest.Ptr(url),
			Source:        Source,
			License:       License,
			KB:            kb,
		},
	}
	return a
}

// pkg is the atom of an Azure Linux package.
func pkg(eco, name, fixed, id string) cve.ProductAtom {
	a := build(eco, name, fixed, "", guideURL+id)
	a.AdvisoryID = feedtest.Ptr(id)
	return a
}

func withURL(a cve.ProductAtom, url string) cve.ProductAtom {
	a.SourceURL = &url
	return a
}

func TestParseMonths(t *testing.T) {
	const catalog = "https://catalog.update.microsoft.com/v7/site/Search.aspx?q="
	tests := []struct {
		month string
		id    string
		want  *cve.Facts // Atoms compared by wantAtoms when set
		// wantAtoms are some of the atoms, wantCount all of them.
		wantAtoms []cve.ProductAtom
		wantCount int
	}{
		{
			month: "2024-Aug",
			id:    "CVE-2024-38063",
			want: &cve.Facts{
				CVEID:     "CVE-2024-38063",
				Feed:      "msrc",
				Doc:       "2024-Aug",
				Source:    source("CVE-2024-38063"),
				Published: feedtest.Time("2024-08-13T07:00:00Z"),
				Modified:  feedtest.Time("2024-09-10T07:00:00Z"),
				Metrics: []cve.Metric{{
					Version: "3.1", Vector: "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H/E:U/RL:O/RC:C", Score: 9.8,
					Severity: "CRITICAL", Source: "microsoft", Type: cve.MetricCNA,
				}},
				CWEs:       []string{"CWE-191"},
				References: guide("CVE-2024-38063"),
			},
			wantAtoms: []cve.ProductAtom{
				build("Windows", "Windows Server 2019", "10.0.17763.6293", "KB5043050", catalog+"KB5043050"),
				build("Windows", "Windows 11 Version 23H2 for x64-based Systems", "10.0.22631.4037", "KB5041585", catalog+"KB5041585"),
				// Monthly Rollup and Security Only: one build, two KBs.
				build("Windows", "Windows Server 2008 for x64-based Systems Service Pack 2", "6.0.6003.22825", "KB5041847", catalog+"KB5041847"),
				build("Windows", "Windows Server 2008 for x64-based Systems Service Pack 2", "6.0.6003.22825", "KB5041850", catalog+"KB5041850"),
			},
			wantCount: 43,
		},
		{
			// Azure Linux packages of a CVE whose CNA is not Microsoft:
			// no scores.
			month: "2023-Oct",
			id:    "CVE-2023-4911",
			want: &cve.Facts{
				CVEID:      "CVE-2023-4911",
				Feed:       "msrc",
				Doc:        "2023-Oct",
				Source:     source("CVE-2023-4911"),
				Published:  feedtest.Time("2023-10-03T00:00:00Z"),
				Modified:   feedtest.Time("2026-02-18T03:10:06Z"),
				CWEs:       []string{"CWE-787"},
				References: guide("CVE-2023-4911"),
				Atoms: []cve.ProductAtom{
					pkg("Azure Linux:2", "glibc", "2.35-5", "CVE-2023-4911"),
					pkg("Azure Linux:3", "glibc", "2.38-6", "CVE-2023-4911"),
				},
			},
		},
		{
			month: "2021-Dec",
			id:    "CVE-2021-44228",
			want: &cve.Facts{
				CVEID:       "CVE-2021-44228",
				Feed:        "msrc",
				Doc:         "2021-Dec",
				Source:      source("CVE-2021-44228"),
				Description: "", // set below
				Published:   feedtest.Time("2021-12-16T08:00:00Z"),
				Modified:    feedtest.Time("2022-01-20T08:00:00Z"),
				References:  guide("CVE-2021-44228"),
				Atoms: []cve.ProductAtom{
					withURL(pkg("Microsoft", "Microsoft Defender for IoT", "10.5.2", "CVE-2021-44228"),
						"https://docs.microsoft.com/en-us/azure/defender-for-iot/organizations/how-to-manage-the-on-premises-management-console#update-the-software-version"),
					withURL(pkg("Microsoft", "Minecraft Java Edition", "1.18.1", "CVE-2021-44228"),
						"https://www.minecraft.net/en-us/article/minecraft-java-edition-1-18-1"),
				},
			},
		},
		{
			// Before FixedBuild: the KB is the fixed version, unparsed.
			month: "2017-Mar",
			id:    "CVE-2017-0144",
			wantAtoms: []cve.ProductAtom{func() cve.ProductAtom {
				a := build("Windows", "Windows 10 Version 1607 for x64-based Systems", "KB4013429", "KB4013429", catalog+"KB4013429")
				a.AffectedRange = nil
				a.Unparsed = true
				return a
			}()},
			wantCount: 37,
		},
		{
			// KEV-listed; Microsoft 365 Apps are fixed in the
			// Click-to-Run release of the month, with no build named.
			month: "2023-Feb",
			id:    "CVE-2023-21715",
			wantAtoms: []cve.ProductAtom{{Ecosystem: "Microsoft", Product: "Microsoft 365 Apps for Enterprise for 64-bit Systems", Atom: cve.Atom{
				FixedVersion: "Click-to-Run release of 2023-02", AdvisoryID: feedtest.Ptr("CVE-2023-21715"),
				SourceURL: feedtest.Ptr("https://aka.ms/OfficeSecurityReleases"), Source: Source, License: License, Unparsed: true,
			}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.month+"/"+tt.id, func(t *testing.T) {
			r := mustParse(t, tt.month+".xml", month(t, tt.month))
			got := r.Find(tt.id)
			if got == nil {
				t.Fatalf("no facts for %s", tt.id)
			}
			if tt.want != nil {
				want := *tt.want
				if tt.id == "CVE-2021-44228" {
					if !strings.HasPrefix(got.Description, "Certain versions of Apache Log4j2 are vulnerable") {
						t.Errorf("description %.80q", got.Description)
					}
					want.Description = got.Description
				}
				opts := []cmp.Option{cmpopts.EquateEmpty()}
				if tt.wantAtoms != nil {
					opts = append(opts, cmpopts.IgnoreFields(cve.Facts{}, "Atoms"))
				}
				if diff := cmp.Diff(&want, got, opts...); diff != "" {
					t.Errorf("facts (-want +got):\n%s", diff)
				}
			}
			for _, w := range tt.wantAtoms {
				found := false
				for _, a := range got.Atoms {
					if a.Product == w.Product && a.KB == w.KB {
						found = true
						if diff := cmp.Diff(w, a); diff != "" {
							t.Errorf("atom (-want +got):\n%s", diff)
						}
					}
				}
				if !found {
					t.Errorf("no atom for %s %s", w.Product, w.KB)
				}
			}
			if tt.wantCount > 0 && len(got.Atoms) != tt.wantCount {
				t.Errorf("%d atoms, want %d", len(got.Atoms), tt.wantCount)
			}
		})
	}
}

func TestParseRejects(t *testing.T) {
	r := mustParse(t, "2022-Dec.xml", month(t, "2022-Dec"))
	want := []string{
		`2022-Dec.xml#CVE-2022-2601-M: malformed CVE id "CVE-2022-2601-M": want CVE-YYYY-NNNN`,
		`2022-Dec.xml#CVE-2022-3775-M: malformed CVE id "CVE-2022-3775-M": want CVE-YYYY-NNNN`,
	}
	if diff := cmp.Diff(want, r.Messages()); diff != "" {
		t.Errorf("rejects (-want +got):\n%s", diff)
	}
	for _, f := range r.Received {
		if strings.HasPrefix(f.CVEID, "ADV") {
			t.Errorf("facts for advisory %s", f.CVEID)
		}
	}
}

// TestParseAllMonths reads every sample document: each fact has a
// canonical CVE id, each atom a fixed version, a source and a license, and
// each Windows update from the catalog its KB.
func TestParseAllMonths(t *testing.T) {
	if testing.Short() {
		t.Skip("reads 60 MB of XML")
	}
	files := feedtest.SampleGlob(t, path.Join(dataDir, "*.xml.gz"))
	facts, atoms, windows := 0, 0, 0
	for _, p := range files {
		name := strings.TrimSuffix(path.Base(p), ".xml.gz")
		r := mustParse(t, name+".xml", month(t, name))
		for _, f := range r.Received {
			facts++
			if c, err := cve.ParseID(f.CVEID); err != nil || c != f.CVEID || f.Doc != name {
				t.Errorf("%s: facts %s in doc %q", name, f.CVEID, f.Doc)
			}
			for _, a := range f.Atoms {
				atoms++
				if a.FixedVersion == "" || a.Source == "" || a.License == "" || a.SourceURL == nil || a.AdvisoryID == nil {
					t.Errorf("%s %s: incomplete atom %+v", name, f.CVEID, a)
				}
				if a.Ecosystem == "Windows" && strings.Contains(*a.SourceURL, "catalog.update.microsoft.com") {
					windows++
					if !strings.HasPrefix(a.KB, "KB") {
						t.Errorf("%s %s: Windows atom %s %s without KB", name, f.CVEID, a.Product, a.FixedVersion)
					}
				}
			}
		}
	}
	if facts < 8000 || atoms < 50000 || windows < 40000 {
		t.Errorf("%d facts, %d atoms, %d Windows catalog atoms: fewer than expected", facts, atoms, windows)
	}
}

// edgeCases is a document in MSRC's CVRF format holding cases the sample
// documents have in other months or not at all.
const edgeCases = `<?xml version="1.0" encoding="utf-8"?>
<cvrf:cvrfdoc xmlns:cvrf="http://www.icasi.org/CVRF/schema/cvrf/1.1" xmlns:prod="http://www.icasi.org/CVRF/schema/prod/1.1" xmlns:vuln="http://www.icasi.org/CVRF/schema/vuln/1.1">
  <cvrf:DocumentTitle>January 2099 Security Updates</cvrf:DocumentTitle>
  <cvrf:DocumentTracking>
    <cvrf:Identification><cvrf:ID>2099-Jan</cvrf:ID><cvrf:Alias>2099-Jan</cvrf:Alias></cvrf:Identification>
    <cvrf:InitialReleaseDate>2099-01-10T08:00:00</cvrf:InitialReleaseDate>
  </cvrf:DocumentTracking>
  <prod:ProductTree>
    <prod:Branch Type="Vendor" Name="Microsoft">
      <prod:FullProductName ProductID="1">Windows Server 2022</prod:FullProductName>
      <prod:FullProductName ProductID="2">Microsoft Office 2019 for 32-bit editions</prod:FullProductName>
      <prod:FullProductName ProductID="5">Azure Linux 3.0 x64</prod:FullProductName>
    </prod:Branch>
    <prod:FullProductName ProductID="3-4" CPE="cpe:2.3:a:microsoft:cbl2_golang_1.17.13-2:*:*:*:*:*:*:*:*">cbl2 golang 1.17.13-2 on CBL Mariner 2.0</prod:FullProductName>
    <prod:FullProductName ProductID="6">less-590-2.cm2.x86_64.rpm on CBL Mariner 2.0 x64</prod:FullProductName>
    <prod:FullProductName ProductID="7">Microsoft .NET Framework 3.0 Service Pack 2 on Windows Server 2008</prod:FullProductName>
  </prod:ProductTree>
  <vuln:Vulnerability Ordinal="1">
    <vuln:Title>Windows Example Remote Code Execution Vulnerability</vuln:Title>
    <vuln:Notes>
      <vuln:Note Title="Description" Type="Description" Ordinal="0" />
      <vuln:Note Title="Microsoft" Type="CNA" Ordinal="30">Microsoft</vuln:Note>
    </vuln:Notes>
    <vuln:CVE>CVE-2099-0001</vuln:CVE>
    <vuln:CVSSScoreSets>
      <vuln:ScoreSet><vuln:BaseScore>8.8</vuln:BaseScore><vuln:Vector>CVSS:3.1/AV:N/AC:L/PR:L/UI:N/S:U/C:H/I:H/A:H/E:U/RL:O/RC:C</vuln:Vector><vuln:ProductID>1</vuln:ProductID></vuln:ScoreSet>
      <vuln:ScoreSet><vuln:BaseScore>8.8</vuln:BaseScore><vuln:Vector>CVSS:3.1/AV:N/AC:L/PR:L/UI:N/S:U/C:H/I:H/A:H/E:U/RL:O/RC:C</vuln:Vector><vuln:ProductID>7</vuln:ProductID></vuln:ScoreSet>
      <vuln:ScoreSet><vuln:BaseScore>9.3</vuln:BaseScore><vuln:Vector>AV:N/AC:M/Au:N/C:C/I:C/A:C</vuln:Vector><vuln:ProductID>7</vuln:ProductID></vuln:ScoreSet>
    </vuln:CVSSScoreSets>
    <vuln:Remediations>
      <vuln:Remediation Type="Vendor Fix">
        <vuln:Description>5031364</vuln:Description>
        <vuln:URL>https://catalog.update.microsoft.com/v7/site/Search.aspx?q=KB5031364</vuln:URL>
        <vuln:ProductID>1</vuln:ProductID>
        <vuln:SubType>Security Update</vuln:SubType>
        <vuln:FixedBuild>10.0.20348.2031` + "\u200b\u200b" + `</vuln:FixedBuild>
      </vuln:Remediation>
      <vuln:Remediation Type="Release Notes">
        <vuln:URL>https://support.microsoft.com/help/5031364</vuln:URL>
        <vuln:ProductID>1</vuln:ProductID>
      </vuln:Remediation>
      <vuln:Remediation Type="Vendor Fix">
        <vuln:Description>Click to Run</vuln:Description>
        <vuln:URL />
        <vuln:ProductID>2</vuln:ProductID>
        <vuln:FixedBuild>https://aka.ms/OfficeSecurityReleases</vuln:FixedBuild>
      </vuln:Remediation>
      <vuln:Remediation Type="Vendor Fix">
        <vuln:Description>5027543</vuln:Description>
        <vuln:URL>https://catalog.update.microsoft.com/v7/site/Search.aspx?q=KB5027543</vuln:URL>
        <vuln:ProductID>7</vuln:ProductID>
        <vuln:SubType>Monthly Rollup</vuln:SubType>
        <vuln:FixedBuild>3.0.6920.8954; 2.0.50727.8970</vuln:FixedBuild>
      </vuln:Remediation>
      <vuln:Remediation Type="Vendor Fix">
        <vuln:Description>5099999</vuln:Description>
        <vuln:ProductID>99</vuln:ProductID>
      </vuln:Remediation>
    </vuln:Remediations>
    <vuln:RevisionHistory>
      <vuln:Revision><cvrf:Number>1.0</cvrf:Number><cvrf:Date>2099-01-10T08:00:00</cvrf:Date></vuln:Revision>
    </vuln:RevisionHistory>
  </vuln:Vulnerability>
  <vuln:Vulnerability Ordinal="2">
    <vuln:Title>Denial of service in golang net/http</vuln:Title>
    <vuln:Notes>
      <vuln:Note Title="Description" Type="Description" Ordinal="0">&lt;p&gt;A flaw in Go&apos;s   net/http&lt;br/&gt;server.&lt;/p&gt;</vuln:Note>
      <vuln:Note Title="mitre" Type="CNA" Ordinal="30">mitre</vuln:Note>
    </vuln:Notes>
    <vuln:CVE>CVE-2099-0002</vuln:CVE>
    <vuln:CWE ID="CWE-400">Uncontrolled Resource Consumption</vuln:CWE>
    <vuln:CVSSScoreSets>
      <vuln:ScoreSet><vuln:BaseScore>7.5</vuln:BaseScore><vuln:Vector>CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:N/I:N/A:H</vuln:Vector><vuln:ProductID>3-4</vuln:ProductID></vuln:ScoreSet>
    </vuln:CVSSScoreSets>
    <vuln:Remediations>
      <vuln:Remediation Type="Vendor Fix">
        <vuln:Description>CBL-Mariner Releases</vuln:Description>
        <vuln:URL />
        <vuln:ProductID>3-4</vuln:ProductID>
        <vuln:FixedBuild>1.17.13-2,1.18.8-2</vuln:FixedBuild>
      </vuln:Remediation>
      <vuln:Remediation Type="Vendor Fix">
        <vuln:Description>golang</vuln:Description>
        <vuln:ProductID>5</vuln:ProductID>
        <vuln:FixedBuild>1.22.7-3</vuln:FixedBuild>
      </vuln:Remediation>
      <vuln:Remediation Type="Vendor Fix">
        <vuln:Description>CBL-Mariner Releases</vuln:Description>
        <vuln:ProductID>6</vuln:ProductID>
        <vuln:FixedBuild>-</vuln:FixedBuild>
      </vuln:Remediation>
    </vuln:Remediations>
    <vuln:RevisionHistory>
      <vuln:Revision><cvrf:Number>1.0</cvrf:Number><cvrf:Date>2099-01-02T00:00:00</cvrf:Date></vuln:Revision>
    </vuln:RevisionHistory>
  </vuln:Vulnerability>
  <vuln:Vulnerability Ordinal="3"><vuln:Title>Defense in depth</vuln:Title><vuln:CVE>ADV990001</vuln:CVE></vuln:Vulnerability>
  <vuln:Vulnerability Ordinal="4"><vuln:Title>Duplicate</vuln:Title><vuln:CVE>CVE-2099-0003-M</vuln:CVE></vuln:Vulnerability>
  <vuln:Vulnerability Ordinal="5">
    <vuln:CVE>CVE-2099-0002</vuln:CVE>
    <vuln:Remediations>
      <vuln:Remediation Type="Vendor Fix">
        <vuln:Description>CBL-Mariner Releases</vuln:Description>
        <vuln:ProductID>6</vuln:ProductID>
        <vuln:FixedBuild>590-3</vuln:FixedBuild>
      </vuln:Remediation>
    </vuln:Remediations>
    <vuln:RevisionHistory>
      <vuln:Revision><cvrf:Number>1.1</cvrf:Number><cvrf:Date>2099-01-20T00:00:00</cvrf:Date></vuln:Revision>
    </vuln:RevisionHistory>
  </vuln:Vulnerability>
</cvrf:cvrfdoc>
`

func TestParseEdgeCases(t *testing.T) {
	const catalog = "https://catalog.update.microsoft.com/v7/site/Search.aspx?q="
	r := mustParse(t, "2099-Jan.xml", []byte(edgeCases))
	want := []*cve.Facts{
		{
			CVEID:     "CVE-2099-0001",
			Feed:      "msrc",
			Doc:       "2099-Jan",
			Source:    source("CVE-2099-0001"),
			Published: feedtest.Time("2099-01-10T08:00:00Z"),
			Modified:  feedtest.Time("2099-01-10T08:00:00Z"),
			Metrics: []cve.Metric{{
				Version: "3.1", Vector: "CVSS:3.1/AV:N/AC:L/PR:L/UI:N/S:U/C:H/I:H/A:H/E:U/RL:O/RC:C", Score: 8.8,
				Severity: "HIGH", Source: "microsoft", Type: cve.MetricCNA,
			}},
			References: guide("CVE-2099-0001"),
			// Click to Run names no build and no KB: it is fixed in the
			// Click-to-Run release of the document's month, which cannot
			// be compared. Product 99 is not in the tree: no atom for it.
			Atoms: []cve.ProductAtom{
				build("Microsoft", "Microsoft .NET Framework 3.0 Service Pack 2 on Windows Server 2008", "2.0.50727.8970", "KB5027543", catalog+"KB5027543"),
				build("Microsoft", "Microsoft .NET Framework 3.0 Service Pack 2 on Windows Server 2008", "3.0.6920.8954", "KB5027543", catalog+"KB5027543"),
				{Ecosystem: "Microsoft", Product: "Microsoft Office 2019 for 32-bit editions", Atom: cve.Atom{
					FixedVersion: "Click-to-Run release of 2099-01", AdvisoryID: feedtest.Ptr("CVE-2099-0001"),
					SourceURL: feedtest.Ptr("https://aka.ms/OfficeSecurityReleases"), Source: Source, License: License, Unparsed: true}},
				build("Windows", "Windows Server 2022", "10.0.20348.2031", "KB5031364", catalog+"KB5031364"),
			},
		},
		{
			CVEID:       "CVE-2099-0002",
			Feed:        "msrc",
			Doc:         "2099-Jan",
			Source:      source("CVE-2099-0002"),
			Description: "A flaw in Go's net/http server.",
			Published:   feedtest.Time("2099-01-02T00:00:00Z"),
			Modified:    feedtest.Time("2099-01-20T00:00:00Z"),
			CWEs:        []string{"CWE-400"},
			References:  guide("CVE-2099-0002"),
			Atoms: []cve.ProductAtom{
				pkg("Azure Linux:2", "golang", "1.17.13-2", "CVE-2099-0002"),
				pkg("Azure Linux:2", "golang", "1.18.8-2", "CVE-2099-0002"),
				pkg("Azure Linux:2", "less", "590-3", "CVE-2099-0002"),
				pkg("Azure Linux:3", "golang", "1.22.7-3", "CVE-2099-0002"),
			},
		},
	}
	if diff := cmp.Diff(want, r.Received, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("facts (-want +got):\n%s", diff)
	}
	wantRejects := []string{`2099-Jan.xml#CVE-2099-0003-M: malformed CVE id "CVE-2099-0003-M": want CVE-YYYY-NNNN`}
	if diff := cmp.Diff(wantRejects, r.Messages()); diff != "" {
		t.Errorf("rejects (-want +got):\n%s", diff)
	}
}

// msrcCSAF is a CSAF document in the layout MSRC publishes.
const msrcCSAF = `{"document":{"category":"csaf_vex","csaf_version":"2.0",
	"publisher":{"category":"vendor","name":"Microsoft Security Response Center","namespace":"https://msrc.microsoft.com"},
	"distribution":{"text":"Public","tlp":{"label":"WHITE"}},
	"references":[{"category":"self","url":"https://msrc.microsoft.com/csaf/vex/2024/msrc_cve-2024-38063.json"}],
	"tracking":{"id":"msrc_CVE-2024-38063","initial_release_date":"2024-08-13T07:00:00.000Z","current_release_date":"2024-08-13T07:00:00.000Z"}},
"product_tree":{"branches":[{"category":"vendor","name":"Microsoft","branches":[{"category":"product_family","name":"Windows","branches":[
	{"category":"product_name","name":"Windows Server 2019","branches":[
		{"category":"product_version_range","name":"<10.0.17763.6189","product":{"name":"Windows Server 2019 <10.0.17763.6189","product_id":"11571"}}]}]}]}]},
"vulnerabilities":[{"cve":"CVE-2024-38063","product_status":{"known_affected":["11571"]},
	"remediations":[{"category":"vendor_fix","details":"5041578","url":"https://catalog.update.microsoft.com/v7/site/Search.aspx?q=KB5041578","product_ids":["11571"]}],
	"scores":[{"products":["11571"],"cvss_v3":{"version":"3.1","baseScore":9.8,"baseSeverity":"CRITICAL","vectorString":"CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H"}}]}]}`

func TestParseJSON(t *testing.T) {
	r := mustParse(t, "msrc_cve-2024-38063.json", []byte(msrcCSAF))
	want := []*cve.Facts{{
		CVEID:     "CVE-2024-38063",
		Feed:      "msrc",
		Doc:       "msrc_CVE-2024-38063",
		Source:    source("CVE-2024-38063"),
		Published: feedtest.Time("2024-08-13T07:00:00Z"),
		Modified:  feedtest.Time("2024-08-13T07:00:00Z"),
		Metrics: []cve.Metric{{
			Version: "3.1", Vector: "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H", Score: 9.8,
			Severity: "CRITICAL", Source: "microsoft", Type: cve.MetricCNA,
		}},
		References: []cve.Reference{{URL: "https://msrc.microsoft.com/csaf/vex/2024/msrc_cve-2024-38063.json", Tags: []string{"vendor-advisory"}}},
		Atoms: []cve.ProductAtom{func() cve.ProductAtom {
			a := build("Windows", "Windows Server 2019", "10.0.17763.6189", "KB5041578", "https://catalog.update.microsoft.com/v7/site/Search.aspx?q=KB5041578")
			a.AffectedRange = feedtest.Ptr("<10.0.17763.6189")
			return a
		}()},
	}}
	if diff := cmp.Diff(want, r.Received, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("facts (-want +got):\n%s", diff)
	}

	index := feedtest.Sample(t, path.Join(dataDir, "updates-index.json"))
	if r := mustParse(t, "updates-index.json", index); len(r.Received)+len(r.Messages()) > 0 {
		t.Errorf("updates index: %d facts, rejects %v", len(r.Received), r.Messages())
	}
}

func TestParseErrors(t *testing.T) {
	for name, data := range map[string]string{
		"truncated.xml": edgeCases[:len(edgeCases)/2],
		"other.xml":     `<rss><channel/></rss>`,
		"empty.xml":     ``,
		"cisco.json":    strings.ReplaceAll(msrcCSAF, "Microsoft Security Response Center", "Cisco PSIRT"),
		"other.json":    `{"value":[{"ID":"2024-Aug"}]}`,
		"broken.json":   `{"document":`,
	} {
		var r feedtest.Recorder
		if err := Parser.Parse(context.Background(), name, strings.NewReader(data), &r); err == nil {
			t.Errorf("%s: no error", name)
		}
		if len(r.Received) > 0 {
			t.Errorf("%s: %d facts from a document that cannot be read", name, len(r.Received))
		}
	}
}

// excerpt returns a real document cut down to its first n
// vulnerabilities and the products they name, without its release notes.
func excerpt(tb testing.TB, name string, n int) []byte {
	tb.Helper()
	doc := string(month(tb, name))
	treeStart := strings.Index(doc, "<prod:ProductTree>")
	treeEnd := strings.Index(doc, "</prod:ProductTree>")
	if treeStart < 0 || treeEnd < treeStart {
		tb.Fatalf("%s: no product tree", name)
	}
	vulns := treeEnd + len("</prod:ProductTree>")
	end := vulns
	for i := 0; i < n; i++ {
		next := strings.Index(doc[end:], "</vuln:Vulnerability>")
		if next < 0 {
			break
		}
		end += next + len("</vuln:Vulnerability>")
	}
	used := map[string]bool{}
	for _, m := range productRef.FindAllStringSubmatch(doc[vulns:end], -1) {
		used[m[1]] = true
	}
	head := doc[:treeStart]
	if i, j := strings.Index(head, "<cvrf:DocumentNotes>"), strings.Index(head, "</cvrf:DocumentNotes>"); i >= 0 && j > i {
		head = head[:i] + head[j+len("</cvrf:DocumentNotes>"):]
	}
	var b strings.Builder
	b.WriteString(head)
	b.WriteString("<prod:ProductTree>\n")
	for _, m := range productName.FindAllStringSubmatch(doc[treeStart:treeEnd], -1) {
		if used[m[1]] {
			b.WriteString(m[0] + "\n")
		}
	}
	b.WriteString(doc[treeEnd:end])
	b.WriteString("\n</cvrf:cvrfdoc>\n")
	return []byte(b.String())
}

var (
	productRef  = regexp.MustCompile(`<vuln:ProductID>([^<]+)</vuln:ProductID>`)
	productName = regexp.MustCompile(`<prod:FullProductName\s+ProductID="([^"]+)"[^>]*>[^<]*</prod:FullProductName>`)
)

func TestExcerpt(t *testing.T) {
	full := mustParse(t, "2021-Dec.xml", month(t, "2021-Dec"))
	r := mustParse(t, "2021-Dec.xml", excerpt(t, "2021-Dec", 3))
	if len(r.Received) != 3 {
		t.Fatalf("%d facts from 3 vulnerabilities", len(r.Received))
	}
	if diff := cmp.Diff(full.Received[:3], r.Received); diff != "" {
		t.Errorf("excerpt facts differ from the document's (-full +excerpt):\n%s", diff)
	}
}

func FuzzParse(f *testing.F) {
	f.Add("2021-Dec.xml", excerpt(f, "2021-Dec", 2))
	f.Add("2023-Oct.xml", excerpt(f, "2023-Oct", 1))
	f.Add("2017-Mar.xml", excerpt(f, "2017-Mar", 1))
	f.Add("2099-Jan.xml", []byte(edgeCases))
	f.Add("msrc_cve-2024-38063.json", []byte(msrcCSAF))
	feedtest.FuzzNamed(f, Parser, nil)
}
