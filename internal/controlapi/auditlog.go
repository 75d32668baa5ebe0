package controlapi

import (
	"net/http"

	"github.com/patchline/patchline/internal/apikey"
	"github.com/patchline/patchline/internal/audit"
	"github.com/patchline/patchline/internal/errs"
	"github.com/patchline/patchline/internal/httpx"
)

func (s *Server) listAudit(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, "limit", "cursor", "keyId", "action")
	if err != nil {
		return err
	}
	limit, err := q.limit()
	if err != nil {
		return err
	}
	f := audit.Filter{KeyID: q.get("keyId"), Action: q.get("action"), Limit: limit + 1}
	if f.KeyID != "" && !apikey.ValidID(f.KeyID) {
		return errs.Invalidf("keyId %q is not a keyId", f.KeyID)
	}
	if _, ok := audit.LookupEvent(f.Action); f.Action != "" && !ok {
		return errs.Invalidf("action %q is not an audit action", f.Action)
	}
	fp := fingerprint("audit-log", f.KeyID, f.Action)
	if _, err := decodeCursor(q, fp, &f.Before); err != nil {
		return err
	}
	entries, err := s.cfg.Audit.FindAuditEntries(r.Context(), f)
	if err != nil {
		return err
	}
	next := ""
	if len(entries) > limit {
		entries = entries[:limit]
		next = encodeCursor(fp, entries[limit-1].ID)
	}
	out := make([]auditEntryJSON, 0, len(entries))
	for _, e := range entries {
		out = append(out, toAuditJSON(e))
	}
	return httpx.WriteJSON(w, http.StatusOK, newList(out, next))
}

// getKey describes the key of the request, so that a script can check
// what it holds.
func (s *Server) getKey(w http.ResponseWriter, r *http.Request) error {
	return httpx.WriteJSON(w, http.StatusOK, toKeyJSON(requestInfoFrom(r.Context()).key))
}
