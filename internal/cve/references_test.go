package cve

import (
	"reflect"
	"testing"
)

// TestReferences gathers references as the feeds give them: one per URL,
// spaces trimmed, tags once each in the order they come, empty URLs and
// tags left out.
func TestReferences(t *testing.T) {
	var r References
	if r.List() != nil {
		t.Fatalf("no reference gathered: %v, want nil", r.List())
	}
	adds := []struct {
		url  string
		tags []string
		ok   bool
	}{
		{" https://example.com/a ", []string{"patch", " ", "vendor-advisory"}, true},
		{"https://example.com/b", nil, true},
		{"  ", []string{"patch"}, false},
		{"https://example.com/a", []string{"vendor-advisory", " exploit "}, true},
	}
	for _, a := range adds {
		if ok := r.Add(a.url, a.tags...); ok != a.ok {
			t.Errorf("Add(%q) = %v, want %v", a.url, ok, a.ok)
		}
	}
	want := []Reference{
		{URL: "https://example.com/a", Tags: []string{"patch", "vendor-advisory", "exploit"}},
		{URL: "https://example.com/b", Tags: []string{}},
	}
	if got := r.List(); !reflect.DeepEqual(got, want) {
		t.Errorf("List() = %+v, want %+v", got, want)
	}
}
