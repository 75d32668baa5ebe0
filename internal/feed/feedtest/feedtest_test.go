package feedtest

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/feed"
)

func TestRecorder(t *testing.T) {
	r := Recorder{FailOn: 3}
	for i, err := range []error{
		r.Facts(&cve.Facts{CVEID: "CVE-2024-0001"}),
		r.Lifecycle(&cve.Lifecycle{Product: "debian", Cycle: "12"}),
		r.Facts(&cve.Facts{CVEID: "CVE-2024-0002"}),
		r.Facts(&cve.Facts{CVEID: "CVE-2024-0002", Doc: "second"}),
	} {
		if want := i == 2; errors.Is(err, ErrSink) != want {
			t.Errorf("call %d: err %v, want the sink's error %v", i+1, err, want)
		}
	}
	r.Reject("f.json#1", errors.New("bad"))
	if f := r.Find("CVE-2024-0002"); f == nil || f.Doc != "" {
		t.Errorf("Find = %+v, want the first facts", f)
	}
	if r.Find("CVE-2024-9999") != nil || r.FindLifecycle("debian", "12") == nil {
		t.Error("Find or FindLifecycle")
	}
	if diff := cmp.Diff([]string{"f.json#1"}, r.Rejects()); diff != "" {
		t.Errorf("Rejects (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"f.json#1: bad"}, r.Messages()); diff != "" {
		t.Errorf("Messages (-want +got):\n%s", diff)
	}
}

func TestSample(t *testing.T) {
	month := Sample(t, "msrc/2024-Aug.xml.gz")
	if len(month) < 1000 || string(month[:13]) != "<cvrf:cvrfdoc" {
		t.Errorf("Sample of a .gz file: %.20q", month)
	}
	if names := SampleGlob(t, "osv/go/*.json"); len(names) == 0 {
		t.Error("SampleGlob found no Go records")
	}
}

// parser hands the sink the same complete facts twice.
var parser = feed.Parser{Name: "test", Parse: func(ctx context.Context, name string, r io.Reader, sink feed.Sink) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f := &cve.Facts{CVEID: "CVE-2024-0001", Atoms: []cve.ProductAtom{
		{Ecosystem: "Go", Product: "example.com/x", Atom: cve.Atom{FixedVersion: "1.0.1", Source: "s", License: "CC0-1.0"}},
	}}
	if err := sink.Facts(f); err != nil {
		return err
	}
	return sink.Facts(f)
}}

func TestChecks(t *testing.T) {
	CheckSinkError(t, parser, "f", []byte{}, 1)
	CheckSinkError(t, parser, "f", []byte{}, 2)
	CheckCanceled(t, parser, "f", []byte{})
	var r Recorder
	_ = parser.Parse(context.Background(), "f", strings.NewReader(""), &r)
	CheckFacts(t, r.Received)
}
