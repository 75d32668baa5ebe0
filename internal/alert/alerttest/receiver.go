// Package alerttest is a webhook for the tests of alert rules: it checks
// every request's signature as a receiver must, and keeps the payloads.
package alerttest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/patchline/patchline/internal/alert"
)

// Receiver is a webhook served on 127.0.0.1 until the test ends.
type Receiver struct {
	// URL is the webhook's address.
	URL string

	// secretSet is closed by SetSecret.
	secretSet chan struct{}
	once      sync.Once

	mu     sync.Mutex
	secret string
	fail   int
	got    []alert.Payload
}

// NewReceiver starts a receiver. A request waits for SetSecret, since a
// rule's secret is known only once the rule is created and its first
// alert may come at once; one it cannot verify fails tb and gets 401.
func NewReceiver(tb testing.TB) *Receiver {
	rc := &Receiver{secretSet: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		select {
		case <-rc.secretSet:
		case <-r.Context().Done():
			return
		case <-time.After(time.Minute):
			tb.Errorf("webhook: a request came and no secret was set in a minute")
			http.Error(w, "no secret", http.StatusUnauthorized)
			return
		}
		rc.mu.Lock()
		defer rc.mu.Unlock()
		if err := alert.Verify(rc.secret, r.Header.Get(alert.HeaderTimestamp), r.Header.Get(alert.HeaderSignature), body, time.Now(), 5*time.Minute); err != nil {
			tb.Errorf("webhook: %v", err)
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		if rc.fail > 0 {
			rc.fail--
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		var p alert.Payload
		if err := json.Unmarshal(body, &p); err != nil {
			tb.Errorf("webhook body: %v", err)
		}
		rc.got = append(rc.got, p)
		w.WriteHeader(http.StatusNoContent)
	}))
	tb.Cleanup(srv.Close)
	rc.URL = srv.URL
	return rc
}

// SetSecret sets the secret the signatures are checked with.
func (rc *Receiver) SetSecret(s string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.secret = s
	rc.once.Do(func() { close(rc.secretSet) })
}

// FailNext answers the next n verified requests 503.
func (rc *Receiver) FailNext(n int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.fail = n
}

// Payloads returns the payloads accepted so far.
func (rc *Receiver) Payloads() []alert.Payload {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]alert.Payload(nil), rc.got...)
}
