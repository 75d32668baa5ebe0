package console

import (
	"context"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/patchline/patchline/internal/apikey"
	"github.com/patchline/patchline/internal/audit"
	"github.com/patchline/patchline/internal/errs"
	"github.com/patchline/patchline/internal/httpx"
)

// The audit log page. The store filters by keyId and action (both
// indexed); the actor and the time range are filtered here while reading
// newest first. Entry ids follow the order of appends, and times follow
// ids to within the duration of a request, so the reading starts at the
// end of the time range (found by bisection over ids) and stops a little
// past its beginning. A page examines at most auditBudget entries, so
// that a rare actor in a long log costs a bounded amount per page.
const (
	auditPerPage = 50
	auditBatch   = 500
	auditBudget  = 20_000
	// auditSlack is how far times may run against ids: an entry's time
	// is when its request began, its id when the request ended, and the
	// control listener ends requests after 10 minutes at most.
	auditSlack = 15 * time.Minute
)

// keyLifecycle are the actions about a key that the key did not make:
// their keyId is in the details, not in the entry's keyId.
var keyLifecycle = []string{"key.created", "key.privileged_enabled", "key.revoked"}

// auditQuery is a filter of the audit log.
type auditQuery struct {
	KeyID, Actor, Action string
	Since, Until         *time.Time
}

// auditForm is the filter form as typed.
type auditForm struct {
	KeyID, Actor, Action, Since, Until string
}

// datetime-local formats, read as UTC.
var formTimeLayouts = []string{"2006-01-02T15:04", "2006-01-02T15:04:05", time.RFC3339}

func parseFormTime(s string) (*time.Time, error) {
	if s == "" {
		return nil, nil
	}
	for _, l := range formTimeLayouts {
		if t, err := time.ParseInLocation(l, s, time.UTC); err == nil {
			return &t, nil
		}
	}
	return nil, errs.Invalidf("%q is not a date and time such as 2026-11-21T09:30.", s)
}

func parseAuditQuery(v url.Values) (auditForm, auditQuery, error) {
	f := auditForm{KeyID: strings.TrimSpace(v.Get("keyId")), Actor: strings.TrimSpace(v.Get("actor")), Action: v.Get("action"), Since: v.Get("since"), Until: v.Get("until")}
	q := auditQuery{KeyID: f.KeyID, Actor: f.Actor, Action: f.Action}
	switch {
	case q.KeyID != "" && !apikey.ValidID(q.KeyID):
		return f, q, errs.Invalidf("%q is not a keyId: keyIds look like plk_7Qm2XbT9cR1sLw4Z.", q.KeyID)
	case utf8.RuneCountInString(q.Actor) > 200:
		return f, q, errs.Invalidf("The actor filter must have at most 200 characters.")
	}
	if _, ok := audit.LookupEvent(q.Action); q.Action != "" && !ok {
		return f, q, errs.Invalidf("%q is not an audit action.", q.Action)
	}
	var err error
	if q.Since, err = parseFormTime(f.Since); err != nil {
		return f, q, err
	}
	if q.Until, err = parseFormTime(f.Until); err != nil {
		return f, q, err
	}
	return f, q, nil
}

// values returns the filter as query parameters.
func (f auditForm) values() url.Values {
	v := url.Values{}
	for _, p := range []struct{ k, v string }{{"keyId", f.KeyID}, {"actor", f.Actor}, {"action", f.Action}, {"since", f.Since}, {"until", f.Until}} {
		if p.v != "" {
			v.Set(p.k, p.v)
		}
	}
	return v
}

// Active reports whether any filter is set.
func (f auditForm) Active() bool { return len(f.values()) > 0 }

// matches reports whether e passes the filters the store does not apply.
func (q auditQuery) matches(e *audit.Entry) bool {
	if q.Since != nil && e.Time.Before(*q.Since) {
		return false
	}
	if q.Until != nil && e.Time.After(*q.Until) {
		return false
	}
	if q.Actor != "" && !strings.Contains(strings.ToLower(e.Actor), strings.ToLower(q.Actor)) {
		return false
	}
	return true
}

// auditSource reads one store query newest first, in batches.
type auditSource struct {
	filter audit.Filter
	keep   func(*audit.Entry) bool // nil keeps all
	buf    []*audit.Entry
	done   bool
}

// auditScan merges sources by id, newest first, without duplicates.
type auditScan struct {
	log      audit.Log
	q        auditQuery
	sources  []*auditSource
	budget   int // entries to read at most; 0 for no bound
	examined int
	last     int64 // id of the last entry examined
	ended    bool  // nothing older can match
}

// errBudget ends a scan that read its budget.
var errBudget = errors.New("audit scan budget spent")

// newAuditScan returns a scan of the entries before id before (0: from
// the newest).
func (s *Server) newAuditScan(ctx context.Context, q auditQuery, before int64, budget int) (*auditScan, error) {
	if before == 0 && q.Until != nil {
		var err error
		if before, err = s.auditStart(ctx, q.Until.Add(auditSlack)); err != nil {
			return nil, err
		}
	}
	sc := &auditScan{log: s.cfg.Audit, q: q, budget: budget}
	sc.sources = append(sc.sources, &auditSource{filter: audit.Filter{KeyID: q.KeyID, Action: q.Action, Before: before}})
	if q.KeyID != "" {
		for _, action := range keyLifecycle {
			if q.Action != "" && q.Action != action {
				continue
			}
			keyID := q.KeyID
			sc.sources = append(sc.sources, &auditSource{
				filter: audit.Filter{Action: action, Before: before},
				keep: func(e *audit.Entry) bool {
					var d struct {
						KeyID string `json:"keyId"`
					}
					return json.Unmarshal(e.Details, &d) == nil && d.KeyID == keyID
				},
			})
		}
	}
	return sc, nil
}

// auditStart returns the id of the oldest entry whose time is after t,
// found by bisection, as the start (exclusive) of a newest-first reading;
// 0 when no entry is after t.
func (s *Server) auditStart(ctx context.Context, t time.Time) (int64, error) {
	at := func(id int64) (*audit.Entry, error) {
		es, err := s.cfg.Audit.FindAuditEntries(ctx, audit.Filter{Before: id + 1, Limit: 1})
		if err != nil || len(es) == 0 {
			return nil, err
		}
		return es[0], nil
	}
	newest, err := s.cfg.Audit.FindAuditEntries(ctx, audit.Filter{Limit: 1})
	if err != nil {
		return 0, err
	}
	if len(newest) == 0 || !newest[0].Time.After(t) {
		return 0, nil
	}
	lo, hi := int64(1), newest[0].ID // entry hi is after t
	for lo < hi {
		mid := lo + (hi-lo)/2
		e, err := at(mid)
		if err != nil {
			return 0, err
		}
		if e != nil && e.Time.After(t) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return hi, nil
}

// peek returns the newest entry src has not given yet, nil at its end.
func (sc *auditScan) peek(ctx context.Context, src *auditSource) (*audit.Entry, error) {
	for len(src.buf) == 0 && !src.done {
		if sc.budget > 0 && sc.examined >= sc.budget {
			return nil, errBudget
		}
		f := src.filter
		f.Limit = auditBatch
		es, err := sc.log.FindAuditEntries(ctx, f)
		if err != nil {
			return nil, err
		}
		sc.examined += len(es)
		if len(es) < auditBatch {
			src.done = true
		}
		if len(es) > 0 {
			src.filter.Before = es[len(es)-1].ID
		}
		for _, e := range es {
			if src.keep == nil || src.keep(e) {
				src.buf = append(src.buf, e)
			}
		}
	}
	if len(src.buf) == 0 {
		return nil, nil
	}
	return src.buf[0], nil
}

// next returns the next matching entry, nil at the end, or errBudget.
func (sc *auditScan) next(ctx context.Context) (*audit.Entry, error) {
	for !sc.ended {
		var best *audit.Entry
		for _, src := range sc.sources {
			e, err := sc.peek(ctx, src)
			if err != nil {
				return nil, err
			}
			if e != nil && (best == nil || e.ID > best.ID) {
				best = e
			}
		}
		if best == nil {
			sc.ended = true
			break
		}
		for _, src := range sc.sources {
			if len(src.buf) > 0 && src.buf[0].ID == best.ID {
				src.buf = src.buf[1:]
			}
		}
		sc.last = best.ID
		if sc.q.Since != nil && best.Time.Before(sc.q.Since.Add(-auditSlack)) {
			sc.ended = true
			break
		}
		if sc.q.matches(best) {
			return best, nil
		}
	}
	return nil, nil
}

type auditRow struct {
	*audit.Entry
	Details string
}

type auditData struct {
	Form      auditForm
	Actions   []audit.EventType
	Entries   []auditRow
	Next      string // older entries
	First     string
	Export    string
	Searched  int  // entries examined
	Exhausted bool // the budget ran out before a full page
}

func (s *Server) auditPage(w http.ResponseWriter, r *http.Request, c *reqCtx) error {
	form, q, err := parseAuditQuery(r.URL.Query())
	if err != nil {
		return err
	}
	var before int64
	if b := r.URL.Query().Get("before"); b != "" {
		if before, err = strconv.ParseInt(b, 10, 64); err != nil || before < 1 {
			return errs.Invalidf("The page link is not valid: start again from the newest entries.")
		}
	}
	sc, err := s.newAuditScan(r.Context(), q, before, auditBudget)
	if err != nil {
		return err
	}
	d := auditData{Form: form, Actions: audit.Events}
	for len(d.Entries) < auditPerPage {
		e, err := sc.next(r.Context())
		if errors.Is(err, errBudget) {
			d.Exhausted = true
			break
		}
		if err != nil {
			return err
		}
		if e == nil {
			break
		}
		d.Entries = append(d.Entries, auditRow{Entry: e, Details: string(e.Details)})
	}
	d.Searched = sc.examined
	v := form.values()
	if !sc.ended && sc.last > 1 {
		v.Set("before", strconv.FormatInt(sc.last, 10))
		d.Next = "/audit?" + v.Encode()
		v.Del("before")
	}
	if before > 0 {
		d.First = "/audit"
		if len(v) > 0 {
			d.First += "?" + v.Encode()
		}
	}
	d.Export = "/audit/export.csv"
	if len(v) > 0 {
		d.Export += "?" + v.Encode()
	}
	return s.render(w, c, http.StatusOK, "audit", page{Title: "System Audit log", Section: "audit", Data: d})
}

// auditExport writes every entry that matches the filter as CSV, newest
// first. The export is recorded before it starts.
func (s *Server) auditExport(w http.ResponseWriter, r *http.Request, c *reqCtx) error {
	_, q, err := parseAuditQuery(r.URL.Query())
	if err != nil {
		return err
	}
	if err := s.record(r, c, http.StatusOK, audit.AuditExported{KeyID: q.KeyID, Actor: q.Actor, Of: q.Action, Since: q.Since, Until: q.Until}); err != nil {
		return err
	}
	sc, err := s.newAuditScan(r.Context(), q, 0, 0)
	if err != nil {
		return err
	}
	h := w.Header()
	h.Set("Content-Type", "text/csv; charset=utf-8")
	h.Set("Content-Disposition", `attachment; filename="patchline-audit-`+c.now.UTC().Format("20060102T150405Z")+`.csv"`)
	h.Set("Cache-Control", "no-store")
	cw := csv.NewWriter(w)
	cw.Write([]string{"id", "time", "actor", "keyId", "action", "method", "path", "status", "clientAddress", "details", "hash", "prevHash"})
	for {
		e, err := sc.next(r.Context())
		if err != nil {
			// The header is out: all that can be done is to stop and log.
			s.log.ErrorContext(r.Context(), "export audit log", "err", err)
			break
		}
		if e == nil {
			break
		}
		status := ""
		if e.Status != 0 {
			status = strconv.Itoa(e.Status)
		}
		cw.Write([]string{
			strconv.FormatInt(e.ID, 10), e.Time.UTC().Format("2006-01-02T15:04:05.000Z"),
			httpx.CSVCell(e.Actor), httpx.CSVCell(e.KeyID), e.Action, e.Method, httpx.CSVCell(e.Path), status,
			httpx.CSVCell(e.ClientAddress), httpx.CSVCell(string(e.Details)), hex.EncodeToString(e.Hash), hex.EncodeToString(e.PrevHash),
		})
	}
	cw.Flush()
	return nil
}
