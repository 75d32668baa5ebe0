package lookupapi

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/patchline/patchline/internal/cve"
)

// streamCatalog returns a fake catalog of n records in key order, ids
// with gaps between them and sequences of four to six digits, whose
// summaries say version v.
func streamCatalog(n int, v *int) *fakeCatalog {
	cat := memCatalog()
	cat.StatsFn = func(context.Context) (cve.Stats, error) { return cve.Stats{Records: n}, nil }
	cat.WalkFn = func(ctx context.Context, after string, fn func(cve.Summary) error) error {
		from, _ := cve.Key(after)
		for i := range n {
			id := fmt.Sprintf("CVE-2024-%04d", 1000+i*7+i*i*i)
			if k, _ := cve.Key(id); after != "" && k <= from {
				continue
			}
			modified := time.Unix(int64(1700000000+*v), 0).UTC()
			if err := fn(cve.Summary{CVEID: id, ModifiedAt: &modified, IsKEV: i%3 == 0}); err != nil {
				return err
			}
		}
		return nil
	}
	return cat
}

// TestRenditionAfter asks the streams of a catalog of 300 records (a few
// blocks of marks) after every id, after ids between and around them,
// rendered and encoded: the same bytes, with the length of them.
func TestRenditionAfter(t *testing.T) {
	v := 0
	plain := newAPITest(t, Config{Catalog: streamCatalog(300, &v)})
	rendered := newAPITest(t, Config{Catalog: &versionedCatalog{fakeCatalog: streamCatalog(300, &v)}})
	afters := []string{"", "CVE-1999-0001", "CVE-2024-0999", "CVE-2025-0001", "CVE-2024-99999999"}
	for i := range 300 {
		seq := 1000 + i*7 + i*i*i
		afters = append(afters, fmt.Sprintf("CVE-2024-%04d", seq), fmt.Sprintf("CVE-2024-%04d", seq+1))
	}
	for _, stream := range []string{"bulk.jsonl", "modified.csv"} {
		for _, after := range afters {
			path := "/api/v1/cve/" + stream
			if after != "" {
				path += "?after=" + after
			}
			want := plain.get(path, validRequest)
			got := rendered.get(path, validRequest)
			if got.Code != http.StatusOK || want.Code != http.StatusOK {
				t.Fatalf("%s: status %d, encoded %d", path, got.Code, want.Code)
			}
			if diff := cmp.Diff(want.Body.String(), got.Body.String()); diff != "" {
				t.Fatalf("%s (-encoded +rendered):\n%s", path, diff)
			}
			if n := got.Header().Get("Content-Length"); n != strconv.Itoa(got.Body.Len()) {
				t.Errorf("%s: Content-Length %s for %d bytes", path, n, got.Body.Len())
			}
		}
	}
}

// TestRenditionFollowsTheVersion changes the catalog's version: the next
// request has the new lines, and the file of the old rendition is closed
// once the request that reads it is done.
func TestRenditionFollowsTheVersion(t *testing.T) {
	v := 0
	cat := &versionedCatalog{fakeCatalog: streamCatalog(100, &v)}
	a := newAPITest(t, Config{Catalog: cat})
	ctx := context.Background()
	first := a.get("/api/v1/cve/modified.csv", validRequest).Body.String()
	old, err := a.srv.acquire(ctx, "modified", func(dst []byte, _ *cve.Summary) []byte { return dst })
	if err != nil {
		t.Fatal(err)
	}

	v = 1
	cat.version.Add(1)
	second := a.get("/api/v1/cve/modified.csv", validRequest).Body.String()
	if first == second || !strings.Contains(second, "2023-11-14T22:13:21Z") {
		t.Errorf("the stream did not follow the catalog's version:\n%.200s", second)
	}
	if _, err := old.f.Stat(); err != nil {
		t.Errorf("the old rendition was closed while a request read it: %v", err)
	}
	old.release()
	if _, err := old.f.Stat(); err == nil {
		t.Errorf("the old rendition is open once replaced and released")
	}
	if got := a.get("/api/v1/cve/modified.csv", validRequest).Body.String(); got != second {
		t.Errorf("the same version gave other lines")
	}
}
