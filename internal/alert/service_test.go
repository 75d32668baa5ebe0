package alert_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/patchline/patchline/internal/alert"
	"github.com/patchline/patchline/internal/alert/alerttest"
	"github.com/patchline/patchline/internal/apikey"
	catalogsqlite "github.com/patchline/patchline/internal/catalog/sqlite"
	"github.com/patchline/patchline/internal/control/sqlstore"
	"github.com/patchline/patchline/internal/device"
	"github.com/patchline/patchline/internal/exposure"
	"github.com/patchline/patchline/internal/ingest"
)

// ingestSample ingests feeds of the bundled sample into cat.
func ingestSample(t *testing.T, cat *catalogsqlite.DB, feeds ...string) {
	t.Helper()
	want := map[string]bool{}
	for _, f := range feeds {
		want[f] = true
	}
	var sources []ingest.Source
	for _, src := range ingest.SampleSources() {
		if want[src.Location] {
			sources = append(sources, src)
		}
	}
	if _, err := ingest.Run(context.Background(), cat, sources, ingest.Options{}); err != nil {
		t.Fatalf("ingest %v: %v", feeds, err)
	}
}

// A KEV feed update that adds a CVE present on an endpoint fires one
// webhook per rule that it meets, signed, naming the endpoint, the CVE
// and its fix; evaluating again fires nothing more, and a webhook that
// fails is tried again.
func TestKEVUpdateFiresOneSignedWebhookPerRule(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cat, err := catalogsqlite.Open(ctx, filepath.Join(dir, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	store, err := sqlstore.OpenSQLite(ctx, filepath.Join(dir, "control.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ingestSample(t, cat, "cvelist")

	// An endpoint with WinRAR 6.22: CVE-2023-38831, fixed in 6.23, is in
	// CISA's KEV catalog, which the catalog does not hold yet.
	now := time.Now()
	secret := apikey.NewSecret(device.EnrollSecretPrefix)
	if err := store.CreateEnrollSecret(ctx, &device.EnrollSecret{ID: device.NewID(device.EnrollSecretIDPrefix), SecretHash: apikey.HashSecret(secret), CreatedBy: "test", CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	inv := device.Inventory{Software: []device.Software{{Name: "WinRAR", Version: "6.22", Ecosystem: "Desktop"}}}
	a := &device.Agent{ID: device.NewID(device.AgentIDPrefix), Hostname: "pc-0042", OS: device.OS{Platform: "windows", Name: "Windows 11 Pro", Version: "23H2", Build: "22631.4460"},
		Arch: "amd64", AgentVersion: "1.0.0", Capability: 4, IPs: []string{}, EnrolledAt: now, LastSeenAt: now,
		CredentialHash: apikey.HashSecret(apikey.NewSecret(device.AgentCredentialPrefix))}
	if err := store.EnrollAgent(ctx, apikey.HashSecret(secret), a); err != nil {
		t.Fatal(err)
	}
	if _, err := store.CheckIn(ctx, a.ID, device.CheckIn{Time: now, Hostname: a.Hostname, OS: a.OS, Arch: a.Arch, Inventory: &inv, InventoryHash: "h1"}); err != nil {
		t.Fatal(err)
	}
	exp := exposure.NewService(cat, store, nil)
	evaluate := func() {
		t.Helper()
		if err := exp.RefreshCatalog(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := exp.Drain(ctx); err != nil {
			t.Fatal(err)
		}
	}
	evaluate()

	rc := alerttest.NewReceiver(t)
	rules := map[string]*alert.Rule{}
	for _, r := range []*alert.Rule{
		alert.NewRule("KEV on endpoints", alert.KEV, 0, rc.URL, "admin:ops@example.com", now),
		alert.NewRule("KEV due within two weeks", alert.KEVDue, 14, rc.URL, "admin:ops@example.com", now),
	} {
		if err := r.Validate(); err != nil {
			t.Fatal(err)
		}
		r.Secret = "plwh_shared-by-both-rules-of-this-test"
		rules[string(r.Kind)] = r
		if err := store.CreateAlertRule(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	svc := alert.NewService(store, store, cat, nil)
	clock := now
	svc.Now = func() time.Time { return clock }
	rc.SetSecret("plwh_shared-by-both-rules-of-this-test")
	rc.FailNext(1)

	if created, err := svc.Evaluate(ctx); err != nil || len(created) != 0 {
		t.Fatalf("before the KEV update: %d alerts, %v", len(created), err)
	}

	ingestSample(t, cat, "kev")
	evaluate()
	created, err := svc.Evaluate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(created) != 2 {
		t.Fatalf("the KEV update made %d alerts, want one per rule", len(created))
	}
	if n, err := svc.Deliver(ctx); err != nil || n != 1 {
		t.Fatalf("first delivery: %d delivered, %v; want one, the other refused once", n, err)
	}
	clock = clock.Add(alert.Backoff(1) + time.Second)
	if n, err := svc.Deliver(ctx); err != nil || n != 1 {
		t.Fatalf("the retry: %d delivered, %v", n, err)
	}
	if again, err := svc.Evaluate(ctx); err != nil || len(again) != 0 {
		t.Errorf("evaluating again: %d alerts, %v", len(again), err)
	}
	clock = clock.Add(time.Hour) // a full evaluation
	if again, err := svc.Evaluate(ctx); err != nil || len(again) != 0 {
		t.Errorf("a full evaluation: %d alerts, %v", len(again), err)
	}
	if n, _ := svc.Deliver(ctx); n != 0 {
		t.Errorf("%d more deliveries", n)
	}

	got := rc.Payloads()
	if len(got) != 2 {
		t.Fatalf("the webhook got %d alerts, want 2: %+v", len(got), got)
	}
	kinds := map[alert.Kind]bool{}
	for _, p := range got {
		kinds[p.Rule.Kind] = true
		if p.CVEID != "CVE-2023-38831" || !p.KEV || p.DueDate != "2023-09-14" || len(p.Agents) != 1 || p.Agents[0].Hostname != "pc-0042" ||
			len(p.Fixes) != 1 || p.Fixes[0].Version != "6.23" {
			t.Errorf("payload = %+v", p)
		}
	}
	if !kinds[alert.KEV] || !kinds[alert.KEVDue] {
		t.Errorf("rules alerted: %v", kinds)
	}
	list, err := store.FindAlerts(ctx, alert.Filter{})
	if err != nil || len(list) != 2 {
		t.Fatalf("alerts: %v %v", list, err)
	}
	attempts := 0
	for _, al := range list {
		full, err := store.FindAlertByID(ctx, al.ID)
		if err != nil || full.State != alert.Delivered {
			t.Errorf("alert %+v, %v", full, err)
		}
		attempts += len(full.Deliveries)
	}
	if attempts != 3 {
		t.Errorf("%d delivery attempts, want 3", attempts)
	}
}

func TestSignAndVerify(t *testing.T) {
	ts := time.Unix(1732521600, 0)
	body := []byte(`{"event":"alert"}`)
	sig := alert.Sign("plwh_secret", ts, body)
	// HMAC-SHA256 of "1732521600." and the body, computed apart.
	if want := "sha256=a6802075457b0d2751fb44c0d437af70e16d13b0ce2271d399c8d151aa4cadc1"; sig != want {
		t.Fatalf("Sign = %q, want %q", sig, want)
	}
	for _, tc := range []struct {
		name, secret, ts, sig string
		body                  []byte
		now                   time.Time
		ok                    bool
	}{
		{"valid", "plwh_secret", "1732521600", sig, body, ts.Add(time.Minute), true},
		{"other secret", "plwh_other", "1732521600", sig, body, ts, false},
		{"other body", "plwh_secret", "1732521600", sig, []byte(`{"event":"alert "}`), ts, false},
		{"replayed later", "plwh_secret", "1732521600", sig, body, ts.Add(10 * time.Minute), false},
		{"other timestamp", "plwh_secret", "1732521601", sig, body, ts, false},
		{"bad timestamp", "plwh_secret", "soon", sig, body, ts, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := alert.Verify(tc.secret, tc.ts, tc.sig, tc.body, tc.now, 5*time.Minute)
			if (err == nil) != tc.ok {
				t.Errorf("Verify = %v, want ok %v", err, tc.ok)
			}
		})
	}
}

func TestRuleValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		rule alert.Rule
		ok   bool
	}{
		{"kev", alert.Rule{Name: "k", Kind: alert.KEV, WebhookURL: "https://hooks.example.com/x"}, true},
		{"epss", alert.Rule{Name: "e", Kind: alert.EPSS, Threshold: 0.4, WebhookURL: "http://10.0.0.5:9000/hook"}, true},
		{"epss above 1", alert.Rule{Name: "e", Kind: alert.EPSS, Threshold: 4, WebhookURL: "https://h.example.com"}, false},
		{"cvss", alert.Rule{Name: "c", Kind: alert.CVSS, Threshold: 9, WebhookURL: "https://h.example.com"}, true},
		{"cvss 0", alert.Rule{Name: "c", Kind: alert.CVSS, WebhookURL: "https://h.example.com"}, false},
		{"due in days", alert.Rule{Name: "d", Kind: alert.KEVDue, Threshold: 7, WebhookURL: "https://h.example.com"}, true},
		{"due in half days", alert.Rule{Name: "d", Kind: alert.KEVDue, Threshold: 7.5, WebhookURL: "https://h.example.com"}, false},
		{"unknown kind", alert.Rule{Name: "x", Kind: "sunspots", WebhookURL: "https://h.example.com"}, false},
		{"no name", alert.Rule{Name: " ", Kind: alert.KEV, WebhookURL: "https://h.example.com"}, false},
		{"ftp", alert.Rule{Name: "k", Kind: alert.KEV, WebhookURL: "ftp://h.example.com"}, false},
		{"credentials in the URL", alert.Rule{Name: "k", Kind: alert.KEV, WebhookURL: "https://u:p@h.example.com"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.rule.Validate(); (err == nil) != tc.ok {
				t.Errorf("Validate = %v, want ok %v", err, tc.ok)
			}
		})
	}
}

func TestValidRuleID(t *testing.T) {
	r := alert.NewRule("x", alert.KEV, 0, "https://h.example.com", "t", time.Now())
	for id, want := range map[string]bool{r.ID: true, "alr_nope": false, "": false, "alr_" + strings.Repeat("A", 24): false,
		strings.Replace(r.ID, "alr_", "agt_", 1): false, r.ID + "\r\nX: 1": false} {
		if got := alert.ValidRuleID(id); got != want {
			t.Errorf("ValidRuleID(%q) = %v, want %v", id, got, want)
		}
	}
}
