package sample

import (
	"io/fs"
	"strings"
	"testing"
)

// TestDates checks that every feed of the sample has a date, and that its
// SOURCE.md states that date.
func TestDates(t *testing.T) {
	for _, feed := range Feeds {
		t.Run(feed, func(t *testing.T) {
			d, ok := Date(feed)
			if !ok || d.IsZero() {
				t.Fatalf("Date(%q) = %v, %v: want a date", feed, d, ok)
			}
			src, err := fs.ReadFile(FS(), feed+"/SOURCE.md")
			if err != nil {
				t.Fatal(err)
			}
			if day := d.Format("2006-01-02"); !strings.Contains(string(src), day) {
				t.Errorf("%s/SOURCE.md does not mention %s", feed, day)
			}
		})
	}
	if _, ok := Date("csaf"); ok {
		t.Error("Date(csaf): the sample has no CSAF documents")
	}
}
