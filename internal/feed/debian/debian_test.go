package debian

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/feed/feedtest"
)

const dataDir = "debian/"

// keys returns "package/CVE" of every facts received, in order.
func keys(r *feedtest.Recorder) []string {
	var keys []string
	for _, f := range r.Received {
		keys = append(keys, f.Doc+"/"+f.CVEID)
	}
	return keys
}

func find(r *feedtest.Recorder, pkg, id string) *cve.Facts {
	for _, f := range r.Received {
		if f.Doc == pkg && f.CVEID == id {
			return f
		}
	}
	return nil
}

func readFile(tb testing.TB, name string) []byte {
	tb.Helper()
	return feedtest.Sample(tb, dataDir+name)
}

// atom is the atom the parser makes for a fix in a release.
func atom(pkg, id, codename, version, fixed string) cve.ProductAtom {
	return cve.ProductAtom{
		Ecosystem: "Debian:" + version,
		Product:   pkg,
		Release:   codename,
		Atom: cve.Atom{
			FixedVersion:  fixed,
			AffectedRange: feedtest.Ptr("< " + fixed),
			SourceURL:     feedtest.Ptr("https://security-tracker.debian.org/tracker/" + id),
			Source:        "Debian Security Tracker",
			License:       "Debian security tracker data (free to use)",
		},
	}
}

func wantFacts(pkg, id, description string, atoms ...cve.ProductAtom) *cve.Facts {
	return &cve.Facts{
		CVEID: id,
		Feed:  "debian",
		Doc:   pkg,
		Source: cve.DataSource{
			Name:    "debian",
			License: "Debian security tracker data (free to use)",
			URL:     feedtest.Ptr("https://security-tracker.debian.org/tracker/" + id),
		},
		Description: description,
		Atoms:       atoms,
	}
}

func TestParserDeclaration(t *testing.T) {
	if Parser.Name != "debian" || !cmp.Equal(Parser.Exts, []string{".json"}) || Parser.Parse == nil {
		t.Errorf("Parser = %+v", Parser)
	}
}

func TestParseFiles(t *testing.T) {
	type want struct {
		pkg, id string
		facts   *cve.Facts
	}
	tests := []struct {
		file string
		// keys are the facts in the order emitted: packages in file order,
		// the CVEs of a package in id order.
		keys  []string
		facts []want
	}{
		{
			file: "anchore-vunnel_debian.json",
			keys: []string{
				"prototypejs/CVE-2007-2383", "prototypejs/CVE-2008-7220", "txt2man/CVE-2013-1444",
				"backupninja/CVE-2005-3111", "chromium/CVE-2022-0456", "sope/CVE-2025-53603",
				// chromium-browser/CVE-2022-0358 has "releases": [], an
				// empty list, and no description: it says nothing.
			},
			facts: []want{
				{
					// Fixed in bookworm and bullseye; open (end-of-life) in
					// buster and stretch; sid has no version.
					pkg: "chromium", id: "CVE-2022-0456",
					facts: wantFacts("chromium", "CVE-2022-0456", "",
						atom("chromium", "CVE-2022-0456", "bullseye", "11", "98.0.4758.80-1~deb11u1"),
						atom("chromium", "CVE-2022-0456", "bookworm", "12", "98.0.4758.80-1"),
					),
				},
				{
					// Urgency high**; atoms ordered by release.
					pkg: "prototypejs", id: "CVE-2008-7220",
					facts: wantFacts("prototypejs", "CVE-2008-7220",
						`Unspecified vulnerability in Prototype JavaScript framework (prototypejs) before 1.6.0.2 allows attackers to make "cross-site ajax requests" via unknown vectors.`,
						atom("prototypejs", "CVE-2008-7220", "jessie", "8", "1.6.0.2-1"),
						atom("prototypejs", "CVE-2008-7220", "stretch", "9", "1.6.0.2-1"),
						atom("prototypejs", "CVE-2008-7220", "buster", "10", "1.6.0.2-1"),
					),
				},
				{
					// fixed_version 0: not affected anywhere, so no atom.
					pkg: "prototypejs", id: "CVE-2007-2383",
					facts: wantFacts("prototypejs", "CVE-2007-2383",
						`The Prototype (prototypejs) framework before 1.5.1 RC3 exchanges data using JavaScript Object Notation (JSON) without an associated protection scheme, which allows remote attackers to obtain the data via a web page that retrieves the data through a URL in the SRC attribute of a SCRIPT element and captures the data using other JavaScript code, aka "JavaScript Hijacking."`),
				},
				{
					pkg: "sope", id: "CVE-2025-53603",
					facts: wantFacts("sope", "CVE-2025-53603",
						"In Alinto SOPE SOGo 2.0.2 through 5.12.2, sope-core/NGExtensions/NGHashMap.m allows a NULL pointer dereference and SOGo crash via a request in which a parameter in the query string is a duplicate of a parameter in the POST body.",
						atom("sope", "CVE-2025-53603", "bullseye", "11", "5.0.1-2+deb11u1"),
						atom("sope", "CVE-2025-53603", "bookworm", "12", "5.8.0-1+deb12u1"),
						atom("sope", "CVE-2025-53603", "trixie", "13", "5.12.1-2"),
					),
				},
			},
		},
		{
			file: "aquasecurity-vuln-list-update_debian.json",
			keys: []string{"prototypejs/CVE-2007-2383", "prototypejs/CVE-2008-7220", "python-scipy/CVE-2013-4251"},
			facts: []want{{
				pkg: "python-scipy", id: "CVE-2013-4251",
				facts: wantFacts("python-scipy", "CVE-2013-4251", "",
					atom("python-scipy", "CVE-2013-4251", "jessie", "8", "0.12.0-3"),
					atom("python-scipy", "CVE-2013-4251", "stretch", "9", "0.12.0-3"),
					atom("python-scipy", "CVE-2013-4251", "buster", "10", "0.12.0-3"),
					atom("python-scipy", "CVE-2013-4251", "bullseye", "11", "0.12.0-3"),
				),
			}},
		},
		{
			file: "google-osv.dev_debian_security_tracker_mock.json",
			keys: []string{"apparmor/CVE-2014-1424", "apparmor/CVE-2016-1585", "apparmor/CVE-2017-6507"},
			facts: []want{
				{
					// Open in bookworm, bullseye and buster; fixed in sid and
					// trixie.
					pkg: "apparmor", id: "CVE-2016-1585",
					facts: wantFacts("apparmor", "CVE-2016-1585",
						"In all versions of AppArmor mount rules are accidentally widened when compiled.",
						atom("apparmor", "CVE-2016-1585", "trixie", "13", "3.0.12-1"),
					),
				},
				{
					pkg: "apparmor", id: "CVE-2014-1424",
					facts: wantFacts("apparmor", "CVE-2014-1424",
						`apparmor_parser in the apparmor package before 2.8.95~2430-0ubuntu5.1 in Ubuntu 14.04 allows attackers to bypass AppArmor policies via unspecified vectors, related to a "miscompilation flaw."`),
				},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			var rec feedtest.Recorder
			if err := Parser.Parse(context.Background(), tt.file, bytes.NewReader(readFile(t, tt.file)), &rec); err != nil {
				t.Fatal(err)
			}
			if len(rec.Rejects()) != 0 {
				t.Errorf("rejects: %v", rec.Rejects())
			}
			if diff := cmp.Diff(tt.keys, keys(&rec)); diff != "" {
				t.Errorf("facts (-want +got):\n%s", diff)
			}
			for _, w := range tt.facts {
				if diff := cmp.Diff(w.facts, find(&rec, w.pkg, w.id)); diff != "" {
					t.Errorf("%s/%s (-want +got):\n%s", w.pkg, w.id, diff)
				}
			}
		})
	}
}

func TestParseDocuments(t *testing.T) {
	tests := []struct {
		name    string
		doc     string
		keys    []string
		atoms   map[string][]string // package/CVE → ecosystem=fixed, marked when unparsed
		rejects []string
		wantErr bool
	}{
		{
			name: "one CVE under several packages",
			doc: `{"a":{"CVE-2024-0001":{"releases":{"bookworm":{"status":"resolved","fixed_version":"1.0-1"}}}},
			       "b":{"CVE-2024-0001":{"releases":{"bookworm":{"status":"resolved","fixed_version":"2.0-1"}}}}}`,
			keys:  []string{"a/CVE-2024-0001", "b/CVE-2024-0001"},
			atoms: map[string][]string{"a/CVE-2024-0001": {"Debian:12=1.0-1"}, "b/CVE-2024-0001": {"Debian:12=2.0-1"}},
		},
		{
			name: "statuses, codenames and versions",
			doc: `{"p":{"CVE-2024-0002":{"releases":{
				"sid":{"status":"resolved","fixed_version":"3"},
				"unstable":{"status":"resolved","fixed_version":"3"},
				"experimental":{"status":"resolved","fixed_version":"3"},
				"forky":{"status":"resolved","fixed_version":"3"},
				"Trixie":{"status":"resolved","fixed_version":"2"},
				"bookworm":{"status":"open","urgency":"end-of-life"},
				"bullseye":{"status":"undetermined"},
				"buster":{"status":"resolved"},
				"stretch":{"status":"resolved","fixed_version":"0"},
				"sarge":{"status":"resolved","fixed_version":"1.1"},
				"woody":{"status":"resolved","fixed_version":"1.0","urgency":"high**"},
				"lenny":{"status":"resolved","fixed_version":"not a version!"}}}}}`,
			keys: []string{"p/CVE-2024-0002"},
			atoms: map[string][]string{"p/CVE-2024-0002": {
				"Debian:3.0=1.0", "Debian:3.1=1.1", "Debian:5=not a version! (unparsed)", "Debian:13=2", "Debian:14=3",
			}},
		},
		{
			name:  "TEMP ids are not CVEs",
			doc:   `{"p":{"TEMP-0000000-0A1B2C":{"releases":{}},"cve-2024-0003":{"description":"d","releases":{}}}}`,
			keys:  []string{"p/CVE-2024-0003"},
			atoms: map[string][]string{},
		},
		{
			name:    "malformed records are rejected, the others kept",
			doc:     `{"p":{"CVE-2024":{},"CVE-2024-0004":{"releases":[1]},"CVE-2024-0005":{"releases":{"bookworm":{"fixed_version":5}}},"CVE-2024-0006":[],"CVE-2024-0007":{"description":"d"}},"q":"x","r":[],"s":[1],"t":{"CVE-2024-0008":{"description":"d"}}}`,
			keys:    []string{"p/CVE-2024-0007", "t/CVE-2024-0008"},
			atoms:   map[string][]string{},
			rejects: []string{"f.json#p/CVE-2024-0004", "f.json#p/CVE-2024-0005", "f.json#p/CVE-2024-0006", "f.json#p/CVE-2024", "f.json#q", "f.json#s"},
		},
		{
			name:  "entries that say nothing",
			doc:   `{"p":{"CVE-2024-0009":{},"CVE-2024-0010":{"releases":[]},"CVE-2024-0011":{"releases":{"bookworm":{"status":"open"}}}}}`,
			atoms: map[string][]string{},
		},
		{name: "empty", doc: `{}`, atoms: map[string][]string{}},
		{name: "not an object", doc: `[]`, atoms: map[string][]string{}, wantErr: true},
		{name: "empty file", doc: ``, atoms: map[string][]string{}, wantErr: true},
		{
			name:    "truncated",
			doc:     `{"a":{"CVE-2024-0001":{"description":"d"}},"b":{"CVE-2024-0002":{"rel`,
			keys:    []string{"a/CVE-2024-0001"},
			atoms:   map[string][]string{},
			wantErr: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rec feedtest.Recorder
			err := Parser.Parse(context.Background(), "f.json", strings.NewReader(tt.doc), &rec)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.keys, keys(&rec)); diff != "" {
				t.Errorf("facts (-want +got):\n%s", diff)
			}
			atoms := map[string][]string{}
			for _, f := range rec.Received {
				for _, a := range f.Atoms {
					k := f.Doc + "/" + f.CVEID
					v := a.Ecosystem + "=" + a.FixedVersion
					if a.Unparsed {
						v += " (unparsed)"
					}
					atoms[k] = append(atoms[k], v)
				}
			}
			if diff := cmp.Diff(tt.atoms, atoms); diff != "" {
				t.Errorf("atoms (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.rejects, rec.Rejects()); diff != "" {
				t.Errorf("rejects (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseSinkError(t *testing.T) {
	feedtest.CheckSinkError(t, Parser, "f.json", readFile(t, "anchore-vunnel_debian.json"), 2)
}

func TestParseCanceled(t *testing.T) {
	feedtest.CheckCanceled(t, Parser, "f.json", readFile(t, "anchore-vunnel_debian.json"))
}

func FuzzParse(f *testing.F) {
	for _, name := range []string{
		"anchore-vunnel_debian.json",
		"aquasecurity-vuln-list-update_debian.json",
		"google-osv.dev_debian_security_tracker_mock.json",
	} {
		f.Add(readFile(f, name))
	}
	f.Add([]byte(`{"p":{"cve-2024-0001":{"releases":{"Bookworm":{"status":"resolved","fixed_version":"1"}}},"TEMP-1":{}},"q":[]}`))
	feedtest.Fuzz(f, Parser, "f.json", func(t *testing.T, rec *feedtest.Recorder, _ error) {
		for _, fa := range rec.Received {
			for _, a := range fa.Atoms {
				if !strings.HasPrefix(a.Ecosystem, "Debian:") || a.FixedVersion == "0" || a.Release == "sid" {
					t.Fatalf("%s: bad atom %+v", fa.CVEID, a)
				}
			}
		}
	})
}

// trackerJSON builds a document shaped like the tracker's export, of about
// size bytes: packages of 20 CVEs, each with four releases. The real export
// (some 80 MB) is not kept in the repository.
func trackerJSON(size int) []byte {
	var b bytes.Buffer
	b.WriteString("{")
	n := 0
	for p := 0; b.Len() < size; p++ {
		if p > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"package-%d":{`, p)
		for c := range 20 {
			if c > 0 {
				b.WriteString(",")
			}
			n++
			fmt.Fprintf(&b, `"CVE-2020-%d":{"description":"A flaw was found in package %d that allows a remote attacker to do things it should not.","scope":"remote","debianbug":%d,`+
				`"releases":{"bookworm":{"status":"resolved","repositories":{"bookworm":"1.2-3"},"fixed_version":"1.2-1","urgency":"not yet assigned"},`+
				`"bullseye":{"status":"resolved","repositories":{"bullseye":"1.2-3"},"fixed_version":"0","urgency":"unimportant"},`+
				`"sid":{"status":"resolved","repositories":{"sid":"1.2-3"},"fixed_version":"1.2-1","urgency":"low"},`+
				`"trixie":{"status":"open","repositories":{"trixie":"1.2-3"},"urgency":"low**"}}}`, 10000+n, p, 900000+n)
		}
		b.WriteString("}")
	}
	b.WriteString("}")
	return b.Bytes()
}

func BenchmarkParse(b *testing.B) {
	data := trackerJSON(8 << 20)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if err := Parser.Parse(context.Background(), "tracker.json", bytes.NewReader(data), &feedtest.Discard{}); err != nil {
			b.Fatal(err)
		}
	}
}
