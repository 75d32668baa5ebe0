// Package alert tells administrators when a CVE they care about lands on
// their endpoints: rules (a new exposure that is KEV-listed, EPSS or CVSS
// at or above a threshold, a KEV due date within some days) are evaluated
// against the exposure of the fleet, and each CVE that meets a rule on
// agents it has not named before becomes one alert, delivered to the
// rule's webhook signed with HMAC-SHA256 and retried with backoff until
// the receiver accepts it.
package alert

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/patchline/patchline/internal/apikey"
	"github.com/patchline/patchline/internal/device"
	"github.com/patchline/patchline/internal/errs"
	"github.com/patchline/patchline/internal/exposure"
)

// Kind is what a rule alerts of.
type Kind string

// The kinds of rules.
const (
	// KEV: a CVE listed in CISA's KEV catalog affects agents.
	KEV Kind = "kev"
	// EPSS: a CVE whose EPSS score is at or above Threshold affects
	// agents.
	EPSS Kind = "epss"
	// CVSS: a CVE whose CVSS score is at or above Threshold affects
	// agents.
	CVSS Kind = "cvss"
	// KEVDue: a KEV CVE whose due date is at most Threshold days away,
	// or past, affects agents.
	KEVDue Kind = "kev-due"
)

// Kinds lists the kinds of rules.
var Kinds = []Kind{KEV, EPSS, CVSS, KEVDue}

// Rule is what an administrator wants to be told of, and where.
type Rule struct {
	ID   string
	Name string
	Kind Kind
	// Threshold is the least EPSS (0 to 1) or CVSS (0 to 10) score that
	// alerts, or for KEVDue the days before the due date; unused for KEV.
	Threshold  float64
	WebhookURL string
	// Secret signs the webhook's requests (see Sign). It is shown once,
	// when the rule is created.
	Secret    string
	CreatedBy string
	CreatedAt time.Time
}

// IDPrefix starts the id of a rule, AlertIDPrefix that of an alert.
const (
	IDPrefix      = "alr_"
	AlertIDPrefix = "alt_"
	SecretPrefix  = "plwh_"
)

// ValidRuleID reports whether id has the shape of a rule's id: IDPrefix
// and 24 characters of lowercase base32.
func ValidRuleID(id string) bool {
	rest, ok := strings.CutPrefix(id, IDPrefix)
	return ok && len(rest) == 24 && strings.Trim(rest, "abcdefghijklmnopqrstuvwxyz234567") == ""
}

// Validate checks a rule as an administrator wrote it.
func (r *Rule) Validate() error {
	name := strings.TrimSpace(r.Name)
	if name == "" || utf8.RuneCountInString(name) > 100 {
		return errs.Invalidf("name must have 1 to 100 characters")
	}
	switch r.Kind {
	case KEV:
		r.Threshold = 0
	case EPSS:
		if r.Threshold <= 0 || r.Threshold > 1 {
			return errs.Invalidf("an epss rule needs a threshold above 0 and at most 1, got %g", r.Threshold)
		}
	case CVSS:
		if r.Threshold <= 0 || r.Threshold > 10 {
			return errs.Invalidf("a cvss rule needs a threshold above 0 and at most 10, got %g", r.Threshold)
		}
	case KEVDue:
		if r.Threshold < 0 || r.Threshold > 365 || r.Threshold != float64(int(r.Threshold)) {
			return errs.Invalidf("a kev-due rule needs a whole number of days from 0 to 365, got %g", r.Threshold)
		}
	default:
		return errs.Invalidf("kind must be one of kev, epss, cvss, kev-due, got %q", r.Kind)
	}
	u, err := url.Parse(r.WebhookURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || len(r.WebhookURL) > 2000 {
		return errs.Invalidf("webhookUrl must be an http or https URL without credentials")
	}
	return nil
}

// Describe says in words what the rule alerts of.
func (r *Rule) Describe() string {
	switch r.Kind {
	case KEV:
		return "a CISA KEV CVE affects agents"
	case EPSS:
		return "a CVE with EPSS ≥ " + strconv.FormatFloat(r.Threshold, 'g', -1, 64) + " affects agents"
	case CVSS:
		return "a CVE with CVSS ≥ " + strconv.FormatFloat(r.Threshold, 'g', -1, 64) + " affects agents"
	case KEVDue:
		return fmt.Sprintf("a KEV CVE due within %d days (or overdue) affects agents", int(r.Threshold))
	}
	return string(r.Kind)
}

// State is where the delivery of an alert stands.
type State string

// The states of a delivery.
const (
	Pending   State = "pending" // to be sent at NextAttempt
	Delivered State = "delivered"
	Failed    State = "failed" // given up after MaxAttempts
)

// Alert is one CVE that met a rule on the agents it names.
type Alert struct {
	ID     string
	RuleID string
	CVEID  string
	// Body is the JSON the webhook receives (a Payload).
	Body        []byte
	CreatedAt   time.Time
	State       State
	Attempts    int
	NextAttempt *time.Time
	DeliveredAt *time.Time
	// Deliveries are the attempts so far, oldest first (only when asked
	// for).
	Deliveries []Delivery
}

// Delivery is one attempt to deliver an alert.
type Delivery struct {
	Attempt int
	At      time.Time
	// Status is the HTTP status the webhook answered, 0 when it could not
	// be reached.
	Status int
	Error  string
}

// Payload is the body of a webhook request: the rule, the CVE, its
// scores and KEV entry, the agents it newly affects and the fixes that
// apply to them.
type Payload struct {
	Event     string    `json:"event"` // "alert"
	AlertID   string    `json:"alertId"`
	Rule      RuleRef   `json:"rule"`
	CVEID     string    `json:"cveId"`
	KEV       bool      `json:"isKev"`
	DueDate   string    `json:"kevDueDate,omitempty"`
	EPSS      *float64  `json:"epss"`
	CVSS      *float64  `json:"cvss"`
	Severity  string    `json:"severity,omitempty"`
	Agents    []Agent   `json:"agents"`
	Fixes     []Fix     `json:"fixes"`
	CreatedAt time.Time `json:"createdAt"`
}

// RuleRef names the rule of a payload.
type RuleRef struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Kind        Kind   `json:"kind"`
	Description string `json:"description"`
}

// Agent is an agent a payload names.
type Agent struct {
	ID       string `json:"id"`
	Hostname string `json:"hostname"`
}

// Fix is a fixed version of a payload.
type Fix = exposure.Fix

// MaxAttempts bounds the deliveries of an alert.
const MaxAttempts = 8

// Backoff returns how long to wait after the attempt-th failed delivery:
// 10 s, 30 s, 1 min, 5 min, 15 min, 1 h, 3 h.
func Backoff(attempt int) time.Duration {
	steps := []time.Duration{10 * time.Second, 30 * time.Second, time.Minute, 5 * time.Minute, 15 * time.Minute, time.Hour, 3 * time.Hour}
	return steps[min(max(attempt, 1), len(steps))-1]
}

// Headers of a webhook request.
const (
	HeaderTimestamp = "X-Patchline-Timestamp" // Unix seconds
	HeaderSignature = "X-Patchline-Signature" // sha256=<hex HMAC-SHA256(secret, timestamp + "." + body)>
	HeaderAlertID   = "X-Patchline-Alert"
)

// Sign returns the value of HeaderSignature for a body sent at ts.
func Sign(secret string, ts time.Time, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(strconv.FormatInt(ts.Unix(), 10)))
	m.Write([]byte{'.'})
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Verify checks a webhook request as a receiver would: the signature of
// body at timestamp (the HeaderTimestamp value) under secret, and that
// the timestamp is within tolerance of now.
func Verify(secret, timestamp, signature string, body []byte, now time.Time, tolerance time.Duration) error {
	sec, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil {
		return fmt.Errorf("alert: bad timestamp %q", timestamp)
	}
	ts := time.Unix(sec, 0)
	if d := now.Sub(ts); d > tolerance || d < -tolerance {
		return fmt.Errorf("alert: timestamp %s is %v from now", ts.UTC().Format(time.RFC3339), d.Round(time.Second))
	}
	if !hmac.Equal([]byte(Sign(secret, ts, body)), []byte(signature)) {
		return fmt.Errorf("alert: the signature does not match")
	}
	return nil
}

// Store keeps rules, alerts and their deliveries.
type Store interface {
	// CreateAlertRule stores a new rule.
	CreateAlertRule(ctx context.Context, r *Rule) error
	// FindAlertRules returns every rule, newest first.
	FindAlertRules(ctx context.Context) ([]*Rule, error)
	// FindAlertRuleByID returns a rule, or errs.ErrNotFound.
	FindAlertRuleByID(ctx context.Context, id string) (*Rule, error)
	// DeleteAlertRule deletes a rule and what it has alerted of; its
	// alerts stay in the log. It returns errs.ErrNotFound for an unknown
	// rule.
	DeleteAlertRule(ctx context.Context, id string) error
	// AddAlerts stores each alert with the agents it names, leaving out
	// the agents its rule already alerted of for its CVE, and an alert
	// left with no agent. It returns the alerts it stored (with agents
	// as build made them).
	AddAlerts(ctx context.Context, candidates []Candidate, build func(c Candidate, agents []Agent) (*Alert, error)) ([]*Alert, error)
	// FindAlerts returns alerts, newest first.
	FindAlerts(ctx context.Context, f Filter) ([]*Alert, error)
	// FindAlertByID returns an alert with its deliveries, or
	// errs.ErrNotFound.
	FindAlertByID(ctx context.Context, id string) (*Alert, error)
	// TakeDueAlerts returns up to limit pending alerts whose next attempt
	// is due at now, and moves their next attempt to lease later, so that
	// no other replica takes them meanwhile.
	TakeDueAlerts(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]*Alert, error)
	// RecordDelivery records an attempt and the alert's new state: next
	// is the next attempt of a pending alert.
	RecordDelivery(ctx context.Context, id string, d Delivery, state State, next *time.Time) error
}

// Candidate is a CVE that meets a rule on agents.
type Candidate struct {
	Rule   *Rule
	CVE    exposure.FleetVulnerability
	Due    string // KEV due date, "" when none
	Agents []Agent
}

// Filter selects alerts.
type Filter struct {
	RuleID string
	// Before resumes after this alert, newest first.
	Before *Cursor
	Limit  int // 0 means no limit
}

// Cursor is the position of an alert in list order.
type Cursor struct {
	CreatedAt time.Time
	ID        string
}

// NewRule returns a rule with a new id and secret.
func NewRule(name string, kind Kind, threshold float64, webhookURL, by string, now time.Time) *Rule {
	return &Rule{ID: device.NewID(IDPrefix), Name: strings.TrimSpace(name), Kind: kind, Threshold: threshold,
		WebhookURL: webhookURL, Secret: apikey.NewSecret(SecretPrefix), CreatedBy: by, CreatedAt: now}
}
