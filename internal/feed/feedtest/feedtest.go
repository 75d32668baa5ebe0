// Package feedtest holds what the tests of the feed parsers share: a
// feed.Sink that records what a parser hands it, readers of the bundled
// sample's files, the checks that every parser's output passes, and the
// fuzz targets built on them.
package feedtest

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"io/fs"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/feed"
	"github.com/patchline/patchline/internal/sample"
)

// ErrSink is the error of a Recorder's failing call.
var ErrSink = errors.New("sink full")

// Rejection is one record a parser rejected.
type Rejection struct {
	Name string
	Err  error
}

// Recorder is a feed.Sink that keeps what it receives, in order.
type Recorder struct {
	Received   []*cve.Facts
	Lifecycles []*cve.Lifecycle
	Rejections []Rejection
	// FailOn makes the FailOn-th call of Facts or Lifecycle (counting from
	// 1) return ErrSink; 0 means never.
	FailOn int
	// OnFacts, when set, is called with every facts received; its error is
	// returned.
	OnFacts func(*cve.Facts) error
}

var _ feed.Sink = (*Recorder)(nil)

// Facts implements feed.Sink.
func (r *Recorder) Facts(f *cve.Facts) error {
	r.Received = append(r.Received, f)
	if r.OnFacts != nil {
		if err := r.OnFacts(f); err != nil {
			return err
		}
	}
	return r.fail()
}

// Lifecycle implements feed.Sink.
func (r *Recorder) Lifecycle(l *cve.Lifecycle) error {
	r.Lifecycles = append(r.Lifecycles, l)
	return r.fail()
}

func (r *Recorder) fail() error {
	if r.FailOn > 0 && len(r.Received)+len(r.Lifecycles) == r.FailOn {
		return ErrSink
	}
	return nil
}

// Reject implements feed.Sink.
func (r *Recorder) Reject(name string, err error) {
	r.Rejections = append(r.Rejections, Rejection{Name: name, Err: err})
}

// Rejects returns the names of the rejected records, in order.
func (r *Recorder) Rejects() []string {
	var out []string
	for _, j := range r.Rejections {
		out = append(out, j.Name)
	}
	return out
}

// Messages returns "name: error" of each rejected record, in order.
func (r *Recorder) Messages() []string {
	var out []string
	for _, j := range r.Rejections {
		out = append(out, j.Name+": "+j.Err.Error())
	}
	return out
}

// Find returns the first facts received about a CVE, or nil.
func (r *Recorder) Find(id string) *cve.Facts {
	for _, f := range r.Received {
		if f.CVEID == id {
			return f
		}
	}
	return nil
}

// FindLifecycle returns the lifecycle received for a product's cycle, or
// nil.
func (r *Recorder) FindLifecycle(product, cycle string) *cve.Lifecycle {
	for _, l := range r.Lifecycles {
		if l.Product == product && l.Cycle == cycle {
			return l
		}
	}
	return nil
}

// Discard is a feed.Sink that counts what it receives and keeps nothing,
// for benchmarks.
type Discard struct {
	// N counts the facts and lifecycles received.
	N int
}

// Facts implements feed.Sink.
func (d *Discard) Facts(*cve.Facts) error { d.N++; return nil }

// Lifecycle implements feed.Sink.
func (d *Discard) Lifecycle(*cve.Lifecycle) error { d.N++; return nil }

// Reject implements feed.Sink.
func (d *Discard) Reject(string, error) {}

// Parse runs p on data as the file name and returns what it emitted. It
// fails the test when the parser returns an error.
func Parse(tb testing.TB, p feed.Parser, name string, data []byte) *Recorder {
	tb.Helper()
	var r Recorder
	if err := p.Parse(context.Background(), name, bytes.NewReader(data), &r); err != nil {
		tb.Fatalf("parse %s: %v", name, err)
	}
	return &r
}

// Sample returns a file of the bundled sample catalog (internal/sample/data)
// by its path there ("osv/go/GO-2023-2153.json"), uncompressed when the
// path ends in ".gz".
func Sample(tb testing.TB, name string) []byte {
	tb.Helper()
	data, err := fs.ReadFile(sample.FS(), name)
	if err != nil {
		tb.Fatal(err)
	}
	if path.Ext(name) != ".gz" {
		return data
	}
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		tb.Fatalf("%s: %v", name, err)
	}
	if data, err = io.ReadAll(zr); err != nil {
		tb.Fatalf("%s: %v", name, err)
	}
	return data
}

// SampleGlob returns the paths of the sample's files that match pattern,
// as fs.Glob matches them ("osv/*/*.json").
func SampleGlob(tb testing.TB, pattern string) []string {
	tb.Helper()
	names, err := fs.Glob(sample.FS(), pattern)
	if err != nil {
		tb.Fatal(err)
	}
	return names
}

// Ptr returns a pointer to a copy of v.
func Ptr[T any](v T) *T { return &v }

// Time parses an RFC 3339 time for a table of expected values; it panics on
// a malformed one.
func Time(s string) *time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return &t
}

// CheckFacts fails the test for facts that no parser may emit: a CVE id
// that is not canonical, or an atom without ecosystem, product, source or
// license, or with neither a fixed version nor an affected range.
func CheckFacts(tb testing.TB, facts []*cve.Facts) {
	tb.Helper()
	for _, f := range facts {
		if id, err := cve.ParseID(f.CVEID); err != nil || id != f.CVEID {
			tb.Fatalf("facts with CVE id %q, which is not canonical", f.CVEID)
		}
		for _, a := range f.Atoms {
			if strings.TrimSpace(a.Ecosystem) == "" || strings.TrimSpace(a.Product) == "" || (strings.TrimSpace(a.FixedVersion) == "" && strings.TrimSpace(deref(a.AffectedRange)) == "") ||
				a.Source == "" || a.License == "" {
				tb.Fatalf("%s: incomplete atom %+v", f.CVEID, a)
			}
		}
	}
}

// Fuzz fuzzes p with the inputs f was seeded with by f.Add(data []byte),
// each read as the file name. What the parser emits passes CheckFacts, and
// check when it is set; err is what the parser returned.
func Fuzz(f *testing.F, p feed.Parser, name string, check func(t *testing.T, r *Recorder, err error)) {
	f.Fuzz(func(t *testing.T, data []byte) {
		run(t, p, name, data, check)
	})
}

// FuzzNamed is Fuzz for inputs seeded by f.Add(name string, data []byte):
// file names and contents.
func FuzzNamed(f *testing.F, p feed.Parser, check func(t *testing.T, r *Recorder, err error)) {
	f.Fuzz(func(t *testing.T, name string, data []byte) {
		run(t, p, name, data, check)
	})
}

func run(t *testing.T, p feed.Parser, name string, data []byte, check func(*testing.T, *Recorder, error)) {
	var r Recorder
	err := p.Parse(context.Background(), name, bytes.NewReader(data), &r)
	CheckFacts(t, r.Received)
	if check != nil {
		check(t, &r, err)
	}
}

// Published is what a test expects of the facts of a published record,
// remediation atoms aside.
type Published struct {
	Source cve.DataSource
	// Desc is a prefix of the description.
	Desc string
	// Published and Modified are RFC 3339 times.
	Published, Modified string
	Metrics             []cve.Metric
	CWEs                []string
	// Ref, when its URL is set, is a reference that must be there with
	// exactly these tags; Refs is the number of references.
	Ref  cve.Reference
	Refs int
}

// CheckPublished compares the facts of a published record with want; the
// caller compares the atoms.
func CheckPublished(t *testing.T, f *cve.Facts, want Published) {
	t.Helper()
	if diff := cmp.Diff(want.Source, f.Source); diff != "" {
		t.Errorf("source (-want +got):\n%s", diff)
	}
	if !strings.HasPrefix(f.Description, want.Desc) {
		t.Errorf("description = %q, want prefix %q", f.Description, want.Desc)
	}
	if diff := cmp.Diff(Time(want.Published), f.Published); diff != "" {
		t.Errorf("published (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(Time(want.Modified), f.Modified); diff != "" {
		t.Errorf("modified (-want +got):\n%s", diff)
	}
	if f.Published.Location() != time.UTC || f.Modified.Location() != time.UTC {
		t.Errorf("times not in UTC: %v, %v", f.Published, f.Modified)
	}
	if diff := cmp.Diff(want.Metrics, f.Metrics); diff != "" {
		t.Errorf("metrics (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want.CWEs, f.CWEs); diff != "" {
		t.Errorf("cwes (-want +got):\n%s", diff)
	}
	if len(f.References) != want.Refs {
		t.Errorf("%d references, want %d", len(f.References), want.Refs)
	}
	if want.Ref.URL == "" {
		return
	}
	var got *cve.Reference
	for i := range f.References {
		if f.References[i].URL == want.Ref.URL {
			got = &f.References[i]
		}
	}
	if diff := cmp.Diff(&want.Ref, got); diff != "" {
		t.Errorf("reference (-want +got):\n%s", diff)
	}
}

// CheckSinkError parses data with a sink whose n-th call fails, and checks
// that the parser stops there and returns the sink's error.
func CheckSinkError(t *testing.T, p feed.Parser, name string, data []byte, n int) {
	t.Helper()
	r := Recorder{FailOn: n}
	err := p.Parse(context.Background(), name, bytes.NewReader(data), &r)
	if got := len(r.Received) + len(r.Lifecycles); !errors.Is(err, ErrSink) || got != n {
		t.Errorf("%s: err = %v after %d calls of the sink; want the sink's error after %d", name, err, got, n)
	}
}

// CheckCanceled parses data under a canceled context, and checks that the
// parser returns context.Canceled and hands nothing to the sink.
func CheckCanceled(t *testing.T, p feed.Parser, name string, data []byte) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var r Recorder
	err := p.Parse(ctx, name, bytes.NewReader(data), &r)
	if got := len(r.Received) + len(r.Lifecycles); !errors.Is(err, context.Canceled) || got != 0 {
		t.Errorf("%s: err = %v after %d calls of the sink; want context.Canceled before any", name, err, got)
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
