package epss

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/feed/feedtest"
)

const (
	dailyFile  = "epss/epss_scores-2025-02-20.csv"
	mirrorFile = "epss/epss_public_ids.csv"
)

// scores returns the scores received, by CVE id.
func scores(r *feedtest.Recorder) map[string]cve.EPSS {
	m := make(map[string]cve.EPSS)
	for _, f := range r.Received {
		m[f.CVEID] = *f.EPSS
	}
	return m
}

func readFile(tb testing.TB, name string) []byte {
	tb.Helper()
	return feedtest.Sample(tb, name)
}

func TestParserDeclaration(t *testing.T) {
	if Parser.Name != "epss" || !cmp.Equal(Parser.Exts, []string{".csv"}) || Parser.Parse == nil {
		t.Errorf("Parser = %+v", Parser)
	}
}

func TestParseDailyFile(t *testing.T) {
	var rec feedtest.Recorder
	err := Parser.Parse(context.Background(), "epss_scores-2025-02-20.csv", bytes.NewReader(readFile(t, dailyFile)), &rec)
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Rejects()) != 0 {
		t.Errorf("rejects: %v", rec.Rejects())
	}
	url := "https://www.first.org/epss/"
	want := &cve.Facts{
		CVEID:  "CVE-1999-0001",
		Feed:   "epss",
		Source: cve.DataSource{Name: "epss", License: "FIRST EPSS (free to use, attribution to FIRST.org)", URL: &url},
		EPSS:   &cve.EPSS{Score: 0.00383, Percentile: 0.73075, Date: "2025-02-20", Model: "v2023.03.01"},
	}
	if len(rec.Received) == 0 {
		t.Fatal("no facts")
	}
	if diff := cmp.Diff(want, rec.Received[0]); diff != "" {
		t.Errorf("first facts (-want +got):\n%s", diff)
	}
	wantScores := map[string]cve.EPSS{
		"CVE-1999-0001": {Score: 0.00383, Percentile: 0.73075, Date: "2025-02-20", Model: "v2023.03.01"},
		"CVE-1999-0002": {Score: 0.01328, Percentile: 0.85996, Date: "2025-02-20", Model: "v2023.03.01"},
		"CVE-1999-0003": {Score: 0.04409, Percentile: 0.92440, Date: "2025-02-20", Model: "v2023.03.01"},
		"CVE-1999-0004": {Score: 0.00917, Percentile: 0.82963, Date: "2025-02-20", Model: "v2023.03.01"},
		"CVE-1999-0005": {Score: 0.91963, Percentile: 0.99214, Date: "2025-02-20", Model: "v2023.03.01"},
	}
	if diff := cmp.Diff(wantScores, scores(&rec)); diff != "" {
		t.Errorf("scores (-want +got):\n%s", diff)
	}
}

func TestParseMirrorFile(t *testing.T) {
	var rec feedtest.Recorder
	err := Parser.Parse(context.Background(), "epss_public_ids.csv", bytes.NewReader(readFile(t, mirrorFile)), &rec)
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Received) != 65 || len(rec.Rejects()) != 0 {
		t.Fatalf("got %d facts, %d rejects (%v); want 65, 0", len(rec.Received), len(rec.Rejects()), rec.Rejects())
	}
	scores := scores(&rec)
	for id, want := range map[string]cve.EPSS{
		"CVE-2021-44228": {Score: 0.99999, Percentile: 1},
		"CVE-2024-3094":  {Score: 0.85974, Percentile: 0.99712},
		"CVE-2023-4863":  {Score: 0.99735, Percentile: 0.99953},
	} {
		if diff := cmp.Diff(want, scores[id]); diff != "" {
			t.Errorf("%s (-want +got):\n%s", id, diff)
		}
	}
}

func TestParseRows(t *testing.T) {
	const head = "#model_version:v2023.03.01,score_date:2025-02-20T00:00:00+0000\ncve,epss,percentile\n"
	tests := []struct {
		name    string
		doc     string
		want    map[string]cve.EPSS
		rejects []string
		wantErr bool
	}{
		{
			name: "bad rows are rejected by line",
			doc: head +
				"CVE-2024-0001,0.5,0.9\n" +
				"CVE-2024-0002,abc,0.9\n" +
				"CVE-2024-0003,1.5,0.9\n" +
				"CVE-2024-0004,0.5,-0.1\n" +
				"CVE-2024-0005,NaN,0.9\n" +
				"CVE-24-0006,0.5,0.9\n" +
				"CVE-2024-0007,0.5\n" +
				"CVE-2024-0008,0.5,0.9,1\n" +
				"CVE-2024-0009\n" +
				"CVE-2024-0010,,0.9\n" +
				"CVE-2024-0011,1,0\n",
			want: map[string]cve.EPSS{
				"CVE-2024-0001": {Score: 0.5, Percentile: 0.9, Date: "2025-02-20", Model: "v2023.03.01"},
				"CVE-2024-0011": {Score: 1, Percentile: 0, Date: "2025-02-20", Model: "v2023.03.01"},
			},
			rejects: []string{"f.csv:4", "f.csv:5", "f.csv:6", "f.csv:7", "f.csv:8", "f.csv:9", "f.csv:10", "f.csv:11", "f.csv:12"},
		},
		{
			name: "CRLF, byte order mark, blank lines, lower-case ids",
			doc:  "\xef\xbb\xbf#model_version:v2025.03.14,score_date:2025-03-17T12:55:00Z\r\ncve,epss,percentile\r\n\r\ncve-2024-12345,0.00043,0.12\r\n",
			want: map[string]cve.EPSS{"CVE-2024-12345": {Score: 0.00043, Percentile: 0.12, Date: "2025-03-17", Model: "v2025.03.14"}},
		},
		{
			name: "mirror form",
			doc:  "CVE-2021-44228;0.999990000;1.000000000\nCVE-2014-0160;0.999990000;0.999970000\n",
			want: map[string]cve.EPSS{
				"CVE-2021-44228": {Score: 0.99999, Percentile: 1},
				"CVE-2014-0160":  {Score: 0.99999, Percentile: 0.99997},
			},
		},
		{
			name: "header without comment",
			doc:  "cve,epss,percentile\nCVE-2024-0001,0.1,0.2\n",
			want: map[string]cve.EPSS{"CVE-2024-0001": {Score: 0.1, Percentile: 0.2}},
		},
		{
			name: "unparsable score date leaves the date unknown",
			doc:  "#model_version:v2023.03.01,score_date:yesterday\ncve,epss,percentile\nCVE-2024-0001,0.1,0.2\n",
			want: map[string]cve.EPSS{"CVE-2024-0001": {Score: 0.1, Percentile: 0.2, Model: "v2023.03.01"}},
		},
		{
			name:    "separators are not mixed within a row",
			doc:     "CVE-2024-0001;0.1,0.2\n",
			want:    map[string]cve.EPSS{},
			rejects: []string{"f.csv:1"},
		},
		{name: "empty file", want: map[string]cve.EPSS{}},
		{name: "unknown header", doc: "cve,percentile,epss\nCVE-2024-0001,0.2,0.1\n", want: map[string]cve.EPSS{}, wantErr: true},
		{name: "line too long", doc: "CVE-2024-0001,0.1," + strings.Repeat("0", maxLine) + "\n", want: map[string]cve.EPSS{}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rec feedtest.Recorder
			err := Parser.Parse(context.Background(), "f.csv", strings.NewReader(tt.doc), &rec)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, scores(&rec)); diff != "" {
				t.Errorf("scores (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.rejects, rec.Rejects()); diff != "" {
				t.Errorf("rejects (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseSinkError(t *testing.T) {
	feedtest.CheckSinkError(t, Parser, "m.csv", readFile(t, mirrorFile), 2)
}

func TestParseCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var d feedtest.Discard
	err := Parser.Parse(ctx, "big.csv", bytes.NewReader(dailyCSV(10000)), &d)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

// TestParseAllocations checks that a row costs no more than the Facts it
// emits: one allocation for the facts and one for the id.
func TestParseAllocations(t *testing.T) {
	const rows = 2000
	data := dailyCSV(rows)
	allocs := testing.AllocsPerRun(5, func() {
		var d feedtest.Discard
		if err := Parser.Parse(context.Background(), "big.csv", bytes.NewReader(data), &d); err != nil || d.N != rows {
			t.Fatalf("err = %v, %d facts", err, d.N)
		}
	})
	if perRow := allocs / rows; perRow > 2.05 {
		t.Errorf("%.0f allocations for %d rows (%.2f a row), want at most 2 a row", allocs, rows, perRow)
	}
}

// dailyCSV builds a file in FIRST's daily format with n rows. FIRST's daily
// file has about 300,000 rows; none is kept in the repository.
func dailyCSV(n int) []byte {
	var b bytes.Buffer
	b.WriteString("#model_version:v2025.03.14,score_date:2025-08-25T00:00:00+0000\ncve,epss,percentile\n")
	for i := range n {
		fmt.Fprintf(&b, "CVE-%d-%d,%.5f,%.5f\n", 1999+i%27, 1000+i, float64(i%1000)/1000, float64(i%997)/997)
	}
	return b.Bytes()
}

func BenchmarkParse(b *testing.B) {
	data := dailyCSV(300_000)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		var d feedtest.Discard
		if err := Parser.Parse(context.Background(), "epss_scores.csv", bytes.NewReader(data), &d); err != nil {
			b.Fatal(err)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add(readFile(f, dailyFile))
	f.Add(readFile(f, mirrorFile))
	f.Add([]byte("#model_version:x,score_date:2025-02-20\ncve;epss;percentile\ncve-2024-0001;1;0\nCVE-2024-0002,NaN,1e-3\n"))
	feedtest.Fuzz(f, Parser, "f.csv", func(t *testing.T, rec *feedtest.Recorder, _ error) {
		for _, fa := range rec.Received {
			e := fa.EPSS
			if e == nil || !(e.Score >= 0 && e.Score <= 1) || !(e.Percentile >= 0 && e.Percentile <= 1) {
				t.Fatalf("%s: bad scores %+v", fa.CVEID, e)
			}
			if e.Date != "" && len(e.Date) != 10 {
				t.Fatalf("%s: bad date %q", fa.CVEID, e.Date)
			}
		}
	})
}
