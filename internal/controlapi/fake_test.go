package controlapi

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/patchline/patchline/internal/apikey"
	"github.com/patchline/patchline/internal/audit"
)

// fakeKeys is a KeyStore whose methods are function fields.
type fakeKeys struct {
	FindKeyByIDFunc func(ctx context.Context, id string) (*apikey.Key, error)
}

var _ apikey.KeyStore = (*fakeKeys)(nil)

func (f *fakeKeys) CreateKey(ctx context.Context, k *apikey.Key) error { return nil }
func (f *fakeKeys) FindKeyByID(ctx context.Context, id string) (*apikey.Key, error) {
	return f.FindKeyByIDFunc(ctx, id)
}
func (f *fakeKeys) FindKeys(ctx context.Context, kf apikey.KeyFilter) ([]*apikey.Key, error) {
	return nil, nil
}
func (f *fakeKeys) RevokeKey(ctx context.Context, id string, at time.Time) (*apikey.Key, error) {
	return nil, nil
}
func (f *fakeKeys) EnablePrivileged(ctx context.Context, id string, expiresAt, now time.Time) (*apikey.Key, error) {
	return nil, nil
}
func (f *fakeKeys) TouchKey(ctx context.Context, id string, at time.Time) error { return nil }

// fakeAudit is an audit log that keeps entries in memory, or fails.
type fakeAudit struct {
	entries []*audit.Entry
	err     error
}

var _ audit.Log = (*fakeAudit)(nil)

func (f *fakeAudit) AppendAudit(ctx context.Context, e *audit.Entry) error {
	if f.err != nil {
		return f.err
	}
	f.entries = append(f.entries, e)
	return nil
}
func (f *fakeAudit) FindAuditEntries(ctx context.Context, af audit.Filter) ([]*audit.Entry, error) {
	return nil, nil
}
func (f *fakeAudit) WalkAudit(ctx context.Context, fn func(*audit.Entry) error) error { return nil }

// TestInternalErrors checks that a failing store is a 500 that reveals
// nothing, and that the request is still audited with its keyId.
func TestInternalErrors(t *testing.T) {
	keys := &fakeKeys{FindKeyByIDFunc: func(ctx context.Context, id string) (*apikey.Key, error) {
		return nil, errors.New("open /var/lib/patchline/control.db: disk on fire")
	}}
	log := &fakeAudit{}
	srv := New(Config{Keys: keys, Audit: log})
	full, k, _ := apikey.New(apikey.Params{Name: "x", CreatedBy: "t"}, time.Now())
	r := httptest.NewRequest("GET", "/api/agents", nil)
	r.Header.Set(HeaderAPIKey, full)
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, r)
	if rec.Code != http.StatusInternalServerError || strings.Contains(rec.Body.String(), "disk") || strings.Contains(rec.Body.String(), "/var") {
		t.Errorf("internal error answered %d %s", rec.Code, rec.Body)
	}
	if len(log.entries) != 1 || log.entries[0].KeyID != k.ID || log.entries[0].Status != 500 {
		t.Errorf("audit entries = %+v", log.entries)
	}

	// When the audit log fails, no answer goes out but a 500: nothing is
	// served that the log does not have.
	log.err = errors.New("database is locked")
	rec = httptest.NewRecorder()
	srv.ServeHTTP(rec, httptest.NewRequest("GET", "/api/agents", nil))
	if rec.Code != http.StatusInternalServerError || strings.Contains(rec.Body.String(), "locked") || rec.Header().Get("WWW-Authenticate") != "" {
		t.Errorf("with a failing audit log: %d %s %v", rec.Code, rec.Body, rec.Header())
	}
}
