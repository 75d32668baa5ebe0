package lookupapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/patchline/patchline/internal/errs"
)

// appendingCatalog is a catalog that appends record bodies to the
// caller's buffer, as the SQLite catalog does.
type appendingCatalog struct {
	*fakeCatalog
	bodies map[string]string
}

func (c *appendingCatalog) AppendRecordJSON(_ context.Context, dst []byte, id string) ([]byte, error) {
	b, ok := c.bodies[id]
	if !ok {
		return dst, errs.NotFoundf("%s is not in the catalog", id)
	}
	return append(dst, b...), nil
}

func (c *appendingCatalog) EachRecordJSON(_ context.Context, ids []string, fn func(id string, body []byte) error) error {
	buf := make([]byte, 0, 16)
	for _, id := range ids {
		b, ok := c.bodies[id]
		if !ok {
			continue
		}
		buf = append(buf[:0], b...) // one buffer, overwritten by the next body
		if err := fn(id, buf); err != nil {
			return err
		}
	}
	return nil
}

// TestBatchVisited answers a batch from EachRecordJSON, whose bodies are
// only valid during each call: every record is its own, in request order.
func TestBatchVisited(t *testing.T) {
	cat := &appendingCatalog{fakeCatalog: &fakeCatalog{}, bodies: map[string]string{
		"CVE-2024-0001": `{"cveId":"CVE-2024-0001","n":1}`,
		"CVE-2024-0002": `{"cveId":"CVE-2024-0002","n":2}`,
	}}
	srv, err := New(Config{Catalog: cat, PublicURL: "https://cve.example.org/api/v1"})
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	srv.ServeHTTP(w, httptest.NewRequest("POST", "/api/v1/cve/batch",
		strings.NewReader(`{"ids":["CVE-2024-0002","bad","CVE-2024-0009","CVE-2024-0001","CVE-2024-0002"]}`)))
	var got struct {
		Results []struct {
			CVEID string `json:"cveId"`
			N     int    `json:"n"`
		} `json:"results"`
		NotFound []string `json:"notFound"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || w.Code != http.StatusOK {
		t.Fatalf("batch = %d %s: %v", w.Code, w.Body, err)
	}
	if len(got.Results) != 2 || got.Results[0].CVEID != "CVE-2024-0002" || got.Results[0].N != 2 ||
		got.Results[1].CVEID != "CVE-2024-0001" || got.Results[1].N != 1 {
		t.Errorf("results %+v, want CVE-2024-0002 (2) then CVE-2024-0001 (1)", got.Results)
	}
	if want := []string{"bad", "CVE-2024-0009"}; !slices.Equal(got.NotFound, want) {
		t.Errorf("notFound %v, want %v", got.NotFound, want)
	}
}

// TestGetRecordAppended reads records through AppendRecordJSON, one after
// another on pooled buffers: each answer is its own record's.
func TestGetRecordAppended(t *testing.T) {
	cat := &appendingCatalog{fakeCatalog: &fakeCatalog{}, bodies: map[string]string{
		"CVE-2024-0001": `{"cveId":"CVE-2024-0001","description":"` + strings.Repeat("long ", 5000) + `"}`,
		"CVE-2024-0002": `{"cveId":"CVE-2024-0002"}`,
	}}
	srv, err := New(Config{Catalog: cat, PublicURL: "https://cve.example.org/api/v1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		id     string
		status int
		want   string
	}{
		{"CVE-2024-0001", http.StatusOK, `"description":"long long`},
		{"CVE-2024-0002", http.StatusOK, `{"cveId":"CVE-2024-0002","_links":{"self":"https://cve.example.org/api/v1/cve/CVE-2024-0002"`},
		{"CVE-2024-0003", http.StatusNotFound, `CVE-2024-0003 is not in the catalog`},
		{"CVE-2024-0002", http.StatusOK, `{"cveId":"CVE-2024-0002","_links"`},
	} {
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, httptest.NewRequest("GET", "/api/v1/cve/"+c.id, nil))
		if w.Code != c.status || !strings.Contains(w.Body.String(), c.want) {
			t.Errorf("GET %s = %d %.200s; want %d with %s", c.id, w.Code, w.Body, c.status, c.want)
		}
	}
}
