package lookupapi

import (
	"context"
	"net/http"
	"net/http/httptest"
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
