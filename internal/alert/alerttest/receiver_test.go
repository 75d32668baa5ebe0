package alerttest

import (
	"bytes"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/patchline/patchline/internal/alert"
)

// TestAlertBeforeSecret sends a signed alert before the receiver knows the
// secret, as a rule's first alert may come before its creator has read the
// secret: the request waits and is accepted once the secret is set.
func TestAlertBeforeSecret(t *testing.T) {
	rc := NewReceiver(t)
	const secret = "plwh_first-alert-at-once"
	body := []byte(`{"cveId":"CVE-2024-9680"}`)
	now := time.Now()
	req, err := http.NewRequest(http.MethodPost, rc.URL, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(alert.HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
	req.Header.Set(alert.HeaderSignature, alert.Sign(secret, now, body))
	status := make(chan int, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			status <- 0
			return
		}
		resp.Body.Close()
		status <- resp.StatusCode
	}()
	select {
	case s := <-status:
		t.Fatalf("answered %d before the secret was set", s)
	case <-time.After(100 * time.Millisecond):
	}
	rc.SetSecret(secret)
	if s := <-status; s != http.StatusNoContent {
		t.Fatalf("status %d, want 204", s)
	}
	if p := rc.Payloads(); len(p) != 1 || p[0].CVEID != "CVE-2024-9680" {
		t.Errorf("payloads %+v", p)
	}
}
