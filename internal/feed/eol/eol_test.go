package eol

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/feed/feedtest"
)

const dataDir = "eol/"

func readFile(tb testing.TB, name string) []byte {
	tb.Helper()
	return feedtest.Sample(tb, dataDir+name)
}

func parseDoc(t *testing.T, name string, data []byte) (*feedtest.Recorder, error) {
	t.Helper()
	var rec feedtest.Recorder
	err := Parser.Parse(context.Background(), name, bytes.NewReader(data), &rec)
	return &rec, err
}

func TestParserDeclaration(t *testing.T) {
	if Parser.Name != "eol" || !cmp.Equal(Parser.Exts, []string{".md", ".json"}) || Parser.Parse == nil {
		t.Errorf("Parser = %+v", Parser)
	}
}

func TestParseProductFiles(t *testing.T) {
	tests := []struct {
		file  string
		count int // releases in the file's front matter
		want  []cve.Lifecycle
	}{
		{
			file:  "debian.md",
			count: 18,
			want: []cve.Lifecycle{
				{Product: "debian", Cycle: "9", Codename: "Stretch", EOL: "2020-07-18", EOES: "2022-07-01", Latest: "9.13"},
				{Product: "debian", Cycle: "12", Codename: "Bookworm", EOL: "2026-07-11", EOES: "2028-06-30", Latest: "12.15"},
				{Product: "debian", Cycle: "3.0", Codename: "Woody", EOL: "2006-06-30", EOES: "2006-06-30", Latest: "3.0r6"},
				{Product: "debian", Cycle: "1.1", Codename: "Buzz", EOL: "1996-12-12", EOES: "1996-12-12", Latest: "1.1"},
			},
		},
		{
			file:  "ubuntu.md",
			count: 44,
			want: []cve.Lifecycle{
				{Product: "ubuntu", Cycle: "22.04", Codename: "Jammy Jellyfish", EOL: "2027-04-01", EOES: "2032-04-09", Latest: "22.04.5"},
				// Not an LTS release: no extended support.
				{Product: "ubuntu", Cycle: "25.10", Codename: "Questing Quokka", EOL: "2026-07-01", Latest: "25.10"},
			},
		},
		{
			file:  "nodejs.md",
			count: 26,
			want: []cve.Lifecycle{
				// eoes: false
				{Product: "nodejs", Cycle: "22", EOL: "2027-04-30", Latest: "22.23.2"},
				// eol: true (ended, date unknown)
				{Product: "nodejs", Cycle: "3", EOL: "true", Latest: "3.3.1"},
			},
		},
		{
			file:  "python.md",
			count: 17,
			want:  []cve.Lifecycle{{Product: "python", Cycle: "3.10", EOL: "2026-10-31", Latest: "3.10.21"}},
		},
		{
			file:  "windows.md",
			count: 47,
			want:  []cve.Lifecycle{{Product: "windows", Cycle: "11-24h2-e", EOL: "2027-10-12", Latest: "10.0.26100"}},
		},
		{
			file:  "openssl.md",
			count: 14,
			want:  []cve.Lifecycle{{Product: "openssl", Cycle: "1.1.1", EOL: "2023-09-11", Latest: "1.1.1w"}},
		},
		{file: "alpine-linux.md", count: 32},
		{file: "chrome.md", count: 144},
		{file: "firefox.md", count: 55},
		{file: "go.md", count: 18},
		{file: "ios.md", count: 15},
		{file: "macos.md", count: 22},
		{file: "rhel.md", count: 7},
		{file: "windows-server.md", count: 20},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			rec, err := parseDoc(t, "products/"+tt.file, readFile(t, "products/"+tt.file))
			if err != nil {
				t.Fatal(err)
			}
			if len(rec.Lifecycles) != tt.count || len(rec.Rejects()) != 0 {
				t.Errorf("got %d lifecycles, rejects %v; want %d, none", len(rec.Lifecycles), rec.Rejects(), tt.count)
			}
			for _, want := range tt.want {
				if diff := cmp.Diff(&want, rec.FindLifecycle(want.Product, want.Cycle)); diff != "" {
					t.Errorf("%s %s (-want +got):\n%s", want.Product, want.Cycle, diff)
				}
			}
			for _, l := range rec.Lifecycles {
				checkLifecycle(t, l)
			}
		})
	}
}

func TestParseReleaseData(t *testing.T) {
	files := feedtest.SampleGlob(t, dataDir+"release-data/*.json")
	if len(files) == 0 {
		t.Fatal("no release-data files")
	}
	for _, file := range files {
		name := strings.TrimPrefix(file, dataDir)
		t.Run(name, func(t *testing.T) {
			rec, err := parseDoc(t, name, readFile(t, name))
			if err != nil || len(rec.Lifecycles) != 0 || len(rec.Rejects()) != 0 {
				t.Errorf("err %v, %d lifecycles, rejects %v; want a file passed over", err, len(rec.Lifecycles), rec.Rejects())
			}
		})
	}
}

// The API documents below are not real copies (none is kept in the
// repository): they are built from endoflife.date's API documentation
// (https://endoflife.date/docs/api/v1/ and the older /api/<product>.json
// form), with values taken from products/debian.md.
const (
	apiV1Debian = `{
  "schema_version": "1.0.0",
  "generated_at": "2025-08-25T00:00:00+00:00",
  "last_modified": "2025-08-20T10:00:00+00:00",
  "result": {
    "name": "debian",
    "aliases": [],
    "label": "Debian",
    "category": "os",
    "tags": ["linux-distribution", "os"],
    "versionCommand": "cat /etc/os-release",
    "identifiers": [{"type": "cpe", "id": "cpe:2.3:o:debian:debian_linux"}],
    "labels": {"eoas": null, "discontinued": null, "eol": "Debian Security Support", "eoes": "Debian LTS"},
    "links": {"icon": "https://cdn.jsdelivr.net/npm/simple-icons/icons/debian.svg", "html": "https://endoflife.date/debian", "releasePolicy": "https://wiki.debian.org/DebianReleases"},
    "releases": [
      {"name": "13", "codename": "Trixie", "label": "13 (Trixie)", "releaseDate": "2025-08-09", "isLts": false, "ltsFrom": null,
       "isEol": false, "eolFrom": "2028-08-09", "isEoes": false, "eoesFrom": "2030-06-30", "isMaintained": true,
       "latest": {"name": "13.0", "date": "2025-08-09", "link": "https://www.debian.org/News/2025/20250809"}},
      {"name": "9", "codename": "Stretch", "label": "9 (Stretch)", "releaseDate": "2017-06-17", "isLts": false, "ltsFrom": null,
       "isEol": true, "eolFrom": "2020-07-18", "isEoes": true, "eoesFrom": "2022-07-01", "isMaintained": false,
       "latest": {"name": "9.13", "date": "2020-07-18", "link": null}},
      {"name": "1.1", "codename": "Buzz", "label": "1.1 (Buzz)", "releaseDate": "1996-06-17", "isLts": false, "ltsFrom": null,
       "isEol": true, "eolFrom": null, "isEoes": true, "eoesFrom": null, "isMaintained": false, "latest": null}
    ]
  }
}`
	apiV0Debian = `[
  {"cycle": "13", "codename": "Trixie", "releaseDate": "2025-08-09", "eol": "2028-08-09", "eoes": "2030-06-30", "latest": "13.0", "latestReleaseDate": "2025-08-09", "lts": false},
  {"cycle": "9", "codename": "Stretch", "releaseDate": "2017-06-17", "eol": "2020-07-18", "extendedSupport": "2022-07-01", "latest": "9.13", "lts": false},
  {"cycle": 8, "codename": null, "eol": true, "extendedSupport": false, "latest": "8.11"},
  {"cycle": "7", "eol": false}
]`
)

func TestParseAPI(t *testing.T) {
	tests := []struct {
		name    string
		file    string
		doc     string
		want    []*cve.Lifecycle
		rejects []string
		wantErr bool
	}{
		{
			name: "v1 product",
			file: "debian", // https://endoflife.date/api/v1/products/debian/
			doc:  apiV1Debian,
			want: []*cve.Lifecycle{
				{Product: "debian", Cycle: "13", Codename: "Trixie", EOL: "2028-08-09", EOES: "2030-06-30", Latest: "13.0"},
				{Product: "debian", Cycle: "9", Codename: "Stretch", EOL: "2020-07-18", EOES: "2022-07-01", Latest: "9.13"},
				{Product: "debian", Cycle: "1.1", Codename: "Buzz", EOL: "true", EOES: "true"},
			},
		},
		{
			name: "v1 all products",
			file: "full",
			doc: `{"schema_version":"1.0.0","total":2,"result":[
				{"name":"ubuntu","label":"Ubuntu","releases":[{"name":"22.04","codename":"Jammy Jellyfish","isEol":false,"eolFrom":"2027-04-01","isEoes":false,"eoesFrom":"2032-04-09","latest":{"name":"22.04.5"}}]},
				{"name":"go","label":"Go","releases":[{"name":"1.22","codename":null,"isEol":true,"eolFrom":"2025-02-11","latest":{"name":"1.22.12"}},{"name":"1.27","isEol":false,"eolFrom":null}]}]}`,
			want: []*cve.Lifecycle{
				{Product: "ubuntu", Cycle: "22.04", Codename: "Jammy Jellyfish", EOL: "2027-04-01", EOES: "2032-04-09", Latest: "22.04.5"},
				{Product: "go", Cycle: "1.22", EOL: "2025-02-11", Latest: "1.22.12"},
				{Product: "go", Cycle: "1.27"},
			},
		},
		{
			name: "v1 bad release is rejected",
			file: "full",
			doc:  `{"result":[{"name":"x","releases":[{"name":"1","eolFrom":"someday"},{"codename":"none"},{"name":"2","isEol":"yes"},{"name":"3"}]}]}`,
			want: []*cve.Lifecycle{{Product: "x", Cycle: "3"}},
			// Named by product when the file name does not give it.
			rejects: []string{"full#x/1", "full#x/1", "full#x/2"},
		},
		{
			name:    "v1 single release",
			file:    "12",
			doc:     `{"schema_version":"1.0.0","result":{"name":"12","codename":"Bookworm","isEol":false,"eolFrom":"2026-06-10"}}`,
			wantErr: true,
		},
		{name: "v1 product without a name", file: "x.json", doc: `{"result":{"releases":[{"name":"1"}]}}`, wantErr: true},
		{
			name: "v0",
			file: "debian.json", // https://endoflife.date/api/debian.json
			doc:  apiV0Debian,
			want: []*cve.Lifecycle{
				{Product: "debian", Cycle: "13", Codename: "Trixie", EOL: "2028-08-09", EOES: "2030-06-30", Latest: "13.0"},
				{Product: "debian", Cycle: "9", Codename: "Stretch", EOL: "2020-07-18", EOES: "2022-07-01", Latest: "9.13"},
				{Product: "debian", Cycle: "8", EOL: "true", Latest: "8.11"},
				{Product: "debian", Cycle: "7"},
			},
		},
		{
			name:    "v0 bad cycles are rejected",
			file:    "p.json",
			doc:     `[{"cycle":"1","eol":"2020-13-01"},{"cycle":{}},{"eol":true},{"cycle":"2","eol":3},{"cycle":"3","eol":"2020-01-02T00:00:00Z"},"x"]`,
			want:    []*cve.Lifecycle{{Product: "p", Cycle: "3", EOL: "2020-01-02"}},
			rejects: []string{"p.json#1", "p.json#1", "p.json#2", "p.json#2", "p.json#5"},
		},
		{name: "unknown JSON object", file: "x.json", doc: `{"data":[]}`, wantErr: true},
		{name: "JSON syntax error", file: "x.json", doc: `[{"cycle":"1"`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec, err := parseDoc(t, tt.file, []byte(tt.doc))
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, rec.Lifecycles); diff != "" {
				t.Errorf("lifecycles (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.rejects, rec.Rejects()); diff != "" {
				t.Errorf("rejects (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseMarkdown(t *testing.T) {
	tests := []struct {
		name    string
		file    string
		doc     string
		want    []*cve.Lifecycle
		rejects []string
		wantErr bool
	}{
		{
			name: "CRLF, unquoted cycles, anchors, extendedSupport",
			file: "products/demo.md",
			doc: "---\r\ntitle: Demo\r\nreleases:\r\n" +
				"  - releaseCycle: 3.10\r\n    eol: &d 2026-10-31\r\n    eoes: *d\r\n    latest: 3.10.1\r\n" +
				"  - releaseCycle: 2\r\n    eol: True\r\n    extendedSupport: 2030-01-01\r\n    codename: null\r\n" +
				"---\r\n\r\n> Demo is a product.\r\n---\r\n",
			want: []*cve.Lifecycle{
				{Product: "demo", Cycle: "3.10", EOL: "2026-10-31", EOES: "2026-10-31", Latest: "3.10.1"},
				{Product: "demo", Cycle: "2", EOL: "true", EOES: "2030-01-01"},
			},
		},
		{
			name: "bad releases are rejected, the others kept",
			file: "demo.md",
			doc: "---\nreleases:\n" +
				"  - releaseCycle: \"1\"\n    eol: soon\n" +
				"  - eol: 2020-01-01\n" +
				"  - releaseCycle: [1, 2]\n" +
				"  - releaseCycle: \"4\"\n    eoes: {a: 1}\n" +
				"  - releaseCycle: \"5\"\n    eol: false\n" +
				"---\n",
			want:    []*cve.Lifecycle{{Product: "demo", Cycle: "5"}},
			rejects: []string{"demo.md#1", "demo.md#1", "demo.md#2", "demo.md#4"},
		},
		{name: "no releases", file: "index.md", doc: "---\ntitle: Home\n---\nText\n"},
		{name: "no front matter", file: "notes.md", doc: "# Notes\n---\nreleases: []\n---\n", wantErr: true},
		{name: "unterminated front matter", file: "x.md", doc: "---\nreleases: []\n", wantErr: true},
		{name: "empty file", file: "x.md", wantErr: true},
		{name: "releases not a list", file: "x.md", doc: "---\nreleases: 3\n---\n", wantErr: true},
		{name: "YAML syntax error", file: "x.md", doc: "---\nreleases: [\n---\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec, err := parseDoc(t, tt.file, []byte(tt.doc))
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, rec.Lifecycles); diff != "" {
				t.Errorf("lifecycles (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.rejects, rec.Rejects()); diff != "" {
				t.Errorf("rejects (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseSinkError(t *testing.T) {
	for _, tt := range []struct{ name, doc string }{
		{"products/debian.md", string(readFile(t, "products/debian.md"))},
		{"debian", apiV1Debian},
		{"debian.json", apiV0Debian},
	} {
		feedtest.CheckSinkError(t, Parser, tt.name, []byte(tt.doc), 2)
	}
}

func TestParseCanceled(t *testing.T) {
	feedtest.CheckCanceled(t, Parser, "products/debian.md", readFile(t, "products/debian.md"))
}

// checkLifecycle checks what every emitted lifecycle must satisfy.
func checkLifecycle(t *testing.T, l *cve.Lifecycle) {
	t.Helper()
	if l.Product == "" || l.Cycle == "" {
		t.Fatalf("lifecycle without product or cycle: %+v", l)
	}
	for _, w := range []string{l.EOL, l.EOES} {
		if w == "" || w == "true" {
			continue
		}
		if _, err := time.Parse(time.DateOnly, w); err != nil {
			t.Fatalf("%s %s: bad date %q", l.Product, l.Cycle, w)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add("products/debian.md", readFile(f, "products/debian.md"))
	f.Add("products/nodejs.md", readFile(f, "products/nodejs.md"))
	f.Add("release-data/rhel.json", readFile(f, "release-data/rhel.json"))
	f.Add("debian", []byte(apiV1Debian))
	f.Add("debian.json", []byte(apiV0Debian))
	feedtest.FuzzNamed(f, Parser, func(t *testing.T, rec *feedtest.Recorder, _ error) {
		if len(rec.Received) != 0 {
			t.Fatalf("%d facts from endoflife.date", len(rec.Received))
		}
		for _, l := range rec.Lifecycles {
			checkLifecycle(t, l)
		}
	})
}
