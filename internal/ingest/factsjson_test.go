package ingest

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/patchline/patchline/internal/catalog/sqlite"
	"github.com/patchline/patchline/internal/cve"
)

// checkDecodeFacts checks that decodeFacts gives what json.Unmarshal gives,
// error or not, and reports whether the fast path read body.
func checkDecodeFacts(t *testing.T, name string, body []byte) bool {
	t.Helper()
	var want, got cve.Facts
	wantErr := json.Unmarshal(body, &want)
	gotErr := decodeFacts(body, &got)
	if (wantErr == nil) != (gotErr == nil) {
		t.Errorf("%s: decodeFacts error %v, json.Unmarshal error %v", name, gotErr, wantErr)
		return false
	}
	if !reflect.DeepEqual(want, got) {
		t.Errorf("%s: decodeFacts differs from json.Unmarshal (-want +got):\n%s", name, cmp.Diff(want, got))
	}
	d := factsDecoder{b: body}
	var fast cve.Facts
	return d.facts(&fast) && d.end()
}

func TestDecodeFactsCases(t *testing.T) {
	for _, tt := range []struct {
		name, body string
		fast       bool
	}{
		{"empty", `{}`, true},
		{"escapes", `{"cveId":"CVE-2024-1","description":"a \"quoted\" \\ / \/ \b\f\n\r\t \u003c\u00e9\ud83d\ude00 \ud800x é"}`, true},
		{"bad surrogate", `{"description":"\ud800\u0041"}`, true},
		{"nulls", `{"cveId":null,"source":null,"published":null,"metrics":null,"cwes":null,"kev":null,"epss":null,"atoms":[null,{"eol":null,"advisoryId":null}]}`, true},
		{"empty arrays", `{"metrics":[],"cwes":[],"references":[{"url":"u","tags":[]}],"atoms":[]}`, true},
		{"every member", `{"cveId":"CVE-2024-3094","feed":"osv","doc":"GHSA-x","source":{"name":"osv:PyPI","use":"u","license":"CC-BY-4.0","url":"https://osv.dev"},
			"state":"PUBLISHED","rejectedReason":"r","description":"d","published":"2024-03-29T17:15:21.15Z","modified":"2024-03-30T00:00:00+02:00",
			"metrics":[{"version":"3.1","vector":"CVSS:3.1/AV:N","score":10,"severity":"CRITICAL","source":"nvd","type":"Primary"},{"score":-1.5e-3}],
			"cwes":["CWE-506"],"references":[{"url":"https://x","tags":["patch","x"]}],
			"atoms":[{"ecosystem":"Debian:12","product":"xz-utils","release":"bookworm","fixedVersion":"5.4.1-1","affectedRange":"\u003c 5.4.1-1","advisoryId":"DSA-1","sourceUrl":"https://s","source":"debian","license":"l","eol":{"eolFrom":"2028-06-30","eoesFrom":null},"kb":"KB1","unparsedVersion":true}],
			"kev":{"dateAdded":"2024-03-29","dueDate":"2024-04-19","requiredAction":"a","knownRansomwareCampaignUse":"Unknown","vendorProject":"v","product":"p","vulnerabilityName":"n","shortDescription":"s","notes":"n","cwes":["CWE-1"]},
			"epss":{"score":0.97,"percentile":0.999,"date":"2026-11-20","model":"v2025.03.14"}}`, true},
		{"duplicate members", `{"kev":{"dateAdded":"a"},"kev":{"dueDate":"b"},"cwes":["x"],"cwes":["y"]}`, true},
		{"unknown member", `{"cveId":"CVE-2024-1","future":{"a":[1,2]}}`, false},
		{"other case", `{"CVEID":"CVE-2024-1"}`, false},
		{"bad escape", `{"description":"\'"}`, false},
		{"bad number", `{"epss":{"score":01}}`, false},
		{"hex number", `{"epss":{"score":0x10}}`, false},
		{"bad utf-8", "{\"description\":\"\xff\"}", false},
		{"control", "{\"description\":\"a\nb\"}", false},
		{"trailing", `{"cveId":"x"} x`, false},
		{"truncated", `{"cveId":"x"`, false},
		{"wrong type", `{"cveId":1}`, false},
		{"bad time", `{"published":"yesterday"}`, false},
		{"null body", `null`, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if fast := checkDecodeFacts(t, tt.name, []byte(tt.body)); fast != tt.fast {
				t.Errorf("fast path = %v, want %v", fast, tt.fast)
			}
		})
	}
}

// TestDecodeFactsStored decodes every facts row of the sample catalog, and
// of the catalog named by PATCHLINE_TEST_CATALOG if set, both ways.
func TestDecodeFactsStored(t *testing.T) {
	if testing.Short() {
		t.Skip("decodes every facts row of the bundled sample")
	}
	dbs := []*sqlite.DB{sampleCatalog(t)}
	if p := os.Getenv("PATCHLINE_TEST_CATALOG"); p != "" {
		db, err := sqlite.Open(context.Background(), filepath.Clean(p))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		dbs = append(dbs, db)
	}
	for _, db := range dbs {
		rows, err := db.SQL().Query(`SELECT key, feed, doc, body FROM facts`)
		if err != nil {
			t.Fatal(err)
		}
		n, slow := 0, 0
		for rows.Next() {
			var key int64
			var feed, doc string
			var body []byte
			if err := rows.Scan(&key, &feed, &doc, &body); err != nil {
				t.Fatal(err)
			}
			if !checkDecodeFacts(t, cve.IDOfKey(key)+" "+feed+" "+doc, body) {
				slow++
			}
			n++
		}
		rows.Close()
		if n == 0 || slow > 0 {
			t.Errorf("%d facts, %d not read by the fast path", n, slow)
		}
	}
}

func BenchmarkDecodeFacts(b *testing.B) {
	db := sampleCatalog(b)
	var bodies [][]byte
	rows, err := db.SQL().Query(`SELECT body FROM facts`)
	if err != nil {
		b.Fatal(err)
	}
	size := 0
	for rows.Next() {
		var body []byte
		rows.Scan(&body)
		bodies = append(bodies, body)
		size += len(body)
	}
	rows.Close()
	for _, tt := range []struct {
		name string
		fn   func([]byte, *cve.Facts) error
	}{
		{"json", func(b []byte, f *cve.Facts) error { return json.Unmarshal(b, f) }},
		{"fast", decodeFacts},
	} {
		b.Run(tt.name, func(b *testing.B) {
			b.SetBytes(int64(size))
			for b.Loop() {
				for _, body := range bodies {
					var f cve.Facts
					if err := tt.fn(body, &f); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
