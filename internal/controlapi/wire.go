package controlapi

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/patchline/patchline/internal/apikey"
	"github.com/patchline/patchline/internal/audit"
	"github.com/patchline/patchline/internal/device"
	"github.com/patchline/patchline/internal/errs"
	"github.com/patchline/patchline/internal/httpx"
)

// Page size bounds of every list.
const (
	DefaultLimit = 50
	MaxLimit     = 100
)

// maxBody bounds JSON request bodies of the API.
const maxBody = 1 << 20

// timeFormat is RFC 3339 in UTC to the second; audit times keep
// milliseconds.
const (
	timeFormat      = "2006-01-02T15:04:05Z"
	auditTimeFormat = "2006-01-02T15:04:05.000Z"
)

func formatTime(t time.Time) string { return t.UTC().Format(timeFormat) }

func formatTimePtr(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := formatTime(*t)
	return &s
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// listJSON is the shape of every list: {"results": [...], "nextCursor": …}.
type listJSON[T any] struct {
	Results    []T     `json:"results"`
	NextCursor *string `json:"nextCursor"`
}

func newList[T any](results []T, next string) listJSON[T] {
	if results == nil {
		results = []T{}
	}
	return listJSON[T]{Results: results, NextCursor: strPtr(next)}
}

type agentJSON struct {
	ID              string                 `json:"id"`
	Hostname        string                 `json:"hostname"`
	OS              device.OS              `json:"os"`
	Arch            string                 `json:"arch"`
	AgentVersion    string                 `json:"agentVersion"`
	IPs             []string               `json:"ips"`
	Status          device.Status          `json:"status"`
	LastSeenAt      string                 `json:"lastSeenAt"`
	EnrolledAt      string                 `json:"enrolledAt"`
	Ring            *string                `json:"ring"`
	RingSource      string                 `json:"ringSource"`
	Inventory       inventoryJSON          `json:"inventory"`
	FeatureUpgrade  device.FeatureUpgrade  `json:"featureUpgrade"`
	AppliedPolicies []device.AppliedPolicy `json:"appliedPolicies"`
	RebootPending   bool                   `json:"rebootPending"`
}

func toAgentJSON(a *device.Agent, now time.Time) agentJSON {
	j := agentJSON{
		ID:              a.ID,
		Hostname:        a.Hostname,
		OS:              a.OS,
		Arch:            a.Arch,
		AgentVersion:    a.AgentVersion,
		IPs:             a.IPs,
		Status:          a.Status(now),
		LastSeenAt:      formatTime(a.LastSeenAt),
		EnrolledAt:      formatTime(a.EnrolledAt),
		Ring:            strPtr(a.Ring),
		RingSource:      a.RingSource,
		Inventory:       inventoryJSON(a.Inventory),
		FeatureUpgrade:  a.FeatureUpgrade,
		AppliedPolicies: a.AppliedPolicies,
		RebootPending:   a.RebootPending,
	}
	if j.IPs == nil {
		j.IPs = []string{}
	}
	if j.Inventory.Software == nil {
		j.Inventory.Software = []device.Software{}
	}
	if j.Inventory.PendingUpdates == nil {
		j.Inventory.PendingUpdates = []device.Update{}
	}
	if j.Inventory.InstalledUpdates == nil {
		j.Inventory.InstalledUpdates = []device.Update{}
	}
	if j.Inventory.Notes == nil {
		j.Inventory.Notes = []string{}
	}
	if j.AppliedPolicies == nil {
		j.AppliedPolicies = []device.AppliedPolicy{}
	}
	return j
}

// inventoryJSON is device.Inventory with every list present in answers.
type inventoryJSON struct {
	Software         []device.Software `json:"software"`
	PendingUpdates   []device.Update   `json:"pendingUpdates"`
	InstalledUpdates []device.Update   `json:"installedUpdates"`
	Notes            []string          `json:"notes"`
}

type commandJSON struct {
	ID          string          `json:"id"`
	AgentID     string          `json:"agentId"`
	Type        string          `json:"type"`
	State       string          `json:"state"`
	Params      json.RawMessage `json:"params"`
	Result      *device.Result  `json:"result"`
	CreatedBy   string          `json:"createdBy"`
	CreatedAt   string          `json:"createdAt"`
	UpdatedAt   string          `json:"updatedAt"`
	ExpiresAt   string          `json:"expiresAt"`
	RolloutID   *string         `json:"rolloutId"`
	RolloutRing *string         `json:"rolloutRing"`
}

func toCommandJSON(c *device.Command) commandJSON {
	params := c.Params
	if len(params) == 0 {
		params = json.RawMessage(`{}`)
	}
	return commandJSON{
		ID:          c.ID,
		AgentID:     c.AgentID,
		Type:        string(c.Type),
		State:       string(c.State),
		Params:      params,
		Result:      c.Result,
		CreatedBy:   c.CreatedBy,
		CreatedAt:   formatTime(c.CreatedAt),
		UpdatedAt:   formatTime(c.UpdatedAt),
		ExpiresAt:   formatTime(c.ExpiresAt),
		RolloutID:   strPtr(c.RolloutID),
		RolloutRing: strPtr(c.RolloutRing),
	}
}

func toCommandsJSON(cmds []*device.Command) []commandJSON {
	out := make([]commandJSON, 0, len(cmds))
	for _, c := range cmds {
		out = append(out, toCommandJSON(c))
	}
	return out
}

type ringJSON struct {
	Name        string           `json:"name"`
	Position    int              `json:"position"`
	Description string           `json:"description"`
	Rule        *device.RingRule `json:"rule"`
	CreatedAt   string           `json:"createdAt"`
}

func toRingJSON(r *device.Ring) ringJSON {
	return ringJSON{Name: r.Name, Position: r.Position, Description: r.Description, Rule: r.Rule, CreatedAt: formatTime(r.CreatedAt)}
}

type ringProgressJSON struct {
	Ring   string         `json:"ring"`
	States map[string]int `json:"states"`
}

type rolloutJSON struct {
	ID            string             `json:"id"`
	Name          string             `json:"name"`
	Kind          string             `json:"kind"`
	Params        json.RawMessage    `json:"params"`
	PolicyID      *string            `json:"policyId"`
	PolicyVersion *int               `json:"policyVersion"`
	Rings         []string           `json:"rings"`
	CurrentRing   *string            `json:"currentRing"`
	NextRing      *string            `json:"nextRing"`
	State         string             `json:"state"`
	Progress      []ringProgressJSON `json:"progress"`
	CreatedBy     string             `json:"createdBy"`
	CreatedAt     string             `json:"createdAt"`
	UpdatedAt     string             `json:"updatedAt"`
}

func toRolloutJSON(r *device.Rollout, progress []device.RingProgress) rolloutJSON {
	j := rolloutJSON{
		ID:          r.ID,
		Name:        r.Name,
		Kind:        string(r.Kind),
		Params:      r.Params,
		PolicyID:    strPtr(r.PolicyID),
		Rings:       r.Rings,
		CurrentRing: strPtr(r.CurrentRing()),
		NextRing:    strPtr(r.NextRing()),
		State:       string(r.State),
		Progress:    []ringProgressJSON{},
		CreatedBy:   r.CreatedBy,
		CreatedAt:   formatTime(r.CreatedAt),
		UpdatedAt:   formatTime(r.UpdatedAt),
	}
	if len(j.Params) == 0 {
		j.Params = json.RawMessage(`{}`)
	}
	if r.Kind == device.ApplyPolicy {
		v := r.PolicyVersion
		j.PolicyVersion = &v
	}
	for _, p := range progress {
		states := map[string]int{}
		for _, st := range device.CommandStates {
			states[string(st)] = p.States[st]
		}
		j.Progress = append(j.Progress, ringProgressJSON{Ring: p.Ring, States: states})
	}
	return j
}

type policyJSON struct {
	ID         string          `json:"id"`
	Name       string          `json:"name"`
	Version    int             `json:"version"`
	Settings   json.RawMessage `json:"settings"`
	Compliance complianceJSON  `json:"compliance"`
	CreatedBy  string          `json:"createdBy"`
	CreatedAt  string          `json:"createdAt"`
	UpdatedAt  string          `json:"updatedAt"`
}

type complianceJSON struct {
	Compliant    int `json:"compliant"`
	Noncompliant int `json:"noncompliant"`
	Unknown      int `json:"unknown"`
	Outdated     int `json:"outdated"`
	Pending      int `json:"pending"`
}

// toPolicyJSON converts p with its compliance counts (zero when nil).
func toPolicyJSON(p *device.Policy, c *device.Compliance) policyJSON {
	j := policyJSON{
		ID: p.ID, Name: p.Name, Version: p.Version, Settings: p.Settings,
		CreatedBy: p.CreatedBy, CreatedAt: formatTime(p.CreatedAt), UpdatedAt: formatTime(p.UpdatedAt),
	}
	if c != nil {
		j.Compliance = complianceJSON(*c)
	}
	return j
}

type policyAgentJSON struct {
	AgentID    string  `json:"agentId"`
	Hostname   string  `json:"hostname"`
	Version    int     `json:"version"`
	State      string  `json:"state"`
	Compliant  *bool   `json:"compliant"`
	Message    *string `json:"message"`
	LastSeenAt string  `json:"lastSeenAt"`
}

func toPolicyAgentJSON(pa *device.PolicyAgent) policyAgentJSON {
	return policyAgentJSON{
		AgentID: pa.AgentID, Hostname: pa.Hostname, Version: pa.Version, State: pa.State,
		Compliant: pa.Compliant, Message: strPtr(pa.Message), LastSeenAt: formatTime(pa.LastSeenAt),
	}
}

type auditEntryJSON struct {
	ID            int64           `json:"id"`
	Time          string          `json:"time"`
	Actor         string          `json:"actor"`
	KeyID         *string         `json:"keyId"`
	Action        string          `json:"action"`
	Method        *string         `json:"method"`
	Path          *string         `json:"path"`
	Status        *int            `json:"status"`
	ClientAddress *string         `json:"clientAddress"`
	Details       json.RawMessage `json:"details"`
	Hash          string          `json:"hash"`
	PrevHash      string          `json:"prevHash"`
}

func toAuditJSON(e *audit.Entry) auditEntryJSON {
	j := auditEntryJSON{
		ID:            e.ID,
		Time:          e.Time.UTC().Format(auditTimeFormat),
		Actor:         e.Actor,
		KeyID:         strPtr(e.KeyID),
		Action:        e.Action,
		Method:        strPtr(e.Method),
		Path:          strPtr(e.Path),
		ClientAddress: strPtr(e.ClientAddress),
		Details:       e.Details,
		Hash:          hex.EncodeToString(e.Hash),
		PrevHash:      hex.EncodeToString(e.PrevHash),
	}
	if e.Status != 0 {
		st := e.Status
		j.Status = &st
	}
	if len(j.Details) == 0 {
		j.Details = json.RawMessage(`null`)
	}
	return j
}

type keyJSON struct {
	KeyID      string  `json:"keyId"`
	Name       string  `json:"name"`
	Privileged bool    `json:"privileged"`
	CreatedBy  string  `json:"createdBy"`
	CreatedAt  string  `json:"createdAt"`
	LastUsedAt *string `json:"lastUsedAt"`
	ExpiresAt  *string `json:"expiresAt"`
}

func toKeyJSON(k *apikey.Key) keyJSON {
	return keyJSON{
		KeyID: k.ID, Name: k.Name, Privileged: k.Privileged, CreatedBy: k.CreatedBy,
		CreatedAt: formatTime(k.CreatedAt), LastUsedAt: formatTimePtr(k.LastUsedAt), ExpiresAt: formatTimePtr(k.ExpiresAt),
	}
}

// query reads the query string, refusing parameters the route does not
// know, so that a misspelt filter is an error instead of a silent no-op.
type query struct {
	values url.Values
}

func parseQuery(r *http.Request, known ...string) (query, error) {
	v, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return query{}, errs.Invalidf("malformed query string")
	}
	for name, vals := range v {
		ok := false
		for _, k := range known {
			ok = ok || k == name
		}
		if !ok {
			return query{}, errs.Invalidf("unknown query parameter %q (known: %s)", name, strings.Join(known, ", "))
		}
		if len(vals) > 1 {
			return query{}, errs.Invalidf("query parameter %q is given more than once", name)
		}
		if !utf8.ValidString(vals[0]) {
			return query{}, errs.Invalidf("query parameter %q is not valid UTF-8", name)
		}
	}
	return query{values: v}, nil
}

func (q query) get(name string) string { return q.values.Get(name) }

// limit returns the limit parameter, DefaultLimit when absent.
func (q query) limit() (int, error) {
	s := q.get("limit")
	if s == "" {
		return DefaultLimit, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > MaxLimit {
		return 0, errs.Invalidf("limit must be an integer from 1 to %d, got %q", MaxLimit, s)
	}
	return n, nil
}

// oneOf returns the parameter when it is empty or one of allowed.
func (q query) oneOf(name string, allowed ...string) (string, error) {
	s := q.get(name)
	if s == "" {
		return "", nil
	}
	for _, a := range allowed {
		if s == a {
			return s, nil
		}
	}
	return "", errs.Invalidf("%s must be one of %s, got %q", name, strings.Join(allowed, ", "), s)
}

// cursor is the decoded form of an opaque list cursor: the position of
// the last row of the previous page, and a fingerprint of the query it
// belongs to.
type cursor struct {
	Version int    `json:"v"`
	Query   string `json:"q"`
	Keys    []any  `json:"k"`
}

const cursorVersion = 1

// fingerprint identifies the filters of a list query.
func fingerprint(route string, filters ...string) string {
	h := sha256.New()
	io.WriteString(h, route)
	for _, f := range filters {
		io.WriteString(h, "\x00"+f)
	}
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:9])
}

func encodeCursor(fp string, keys ...any) string {
	b, _ := json.Marshal(cursor{Version: cursorVersion, Query: fp, Keys: keys})
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeCursor decodes the cursor parameter into dst, one pointer per
// key. It returns false when there is no cursor, and errs.ErrInvalid for a
// cursor that is not ours or belongs to another query.
func decodeCursor(q query, fp string, dst ...any) (bool, error) {
	s := q.get("cursor")
	if s == "" {
		return false, nil
	}
	bad := errs.Invalidf("cursor is not valid: pass nextCursor from the previous page unchanged")
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return false, bad
	}
	var c struct {
		Version int               `json:"v"`
		Query   string            `json:"q"`
		Keys    []json.RawMessage `json:"k"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil || c.Version != cursorVersion || len(c.Keys) != len(dst) {
		return false, bad
	}
	if c.Query != fp {
		return false, errs.Invalidf("cursor belongs to another query: keep the filters of the first page")
	}
	for i, k := range c.Keys {
		if err := json.Unmarshal(k, dst[i]); err != nil {
			return false, bad
		}
	}
	return true, nil
}

// decodeOptionalJSON decodes a JSON body into v; an empty body leaves v
// as it is.
func decodeOptionalJSON(w http.ResponseWriter, r *http.Request, v any) error {
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	b, err := io.ReadAll(r.Body)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return errs.TooLargef("request body is larger than %d bytes", maxBody)
		}
		return errs.Invalidf("reading the request body: %v", err)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	r.Body = io.NopCloser(bytes.NewReader(b))
	return httpx.DecodeJSON(w, r, maxBody, v)
}
