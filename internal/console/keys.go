package console

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/patchline/patchline/internal/apikey"
	"github.com/patchline/patchline/internal/audit"
	"github.com/patchline/patchline/internal/errs"
)

// choice is an option of a select.
type choice struct{ Value, Label string }

// Expiry choices of keys. A privileged key must expire within
// apikey.MaxPrivilegedLifetime.
var (
	keyExpiries  = []choice{{"", "No expiry"}, {"1d", "1 day"}, {"7d", "7 days"}, {"30d", "30 days"}, {"90d", "90 days"}, {"365d", "1 year"}}
	privExpiries = []choice{{"1d", "1 day"}, {"7d", "7 days"}, {"30d", "30 days"}, {"90d", "90 days"}}
)

// expiryDuration returns the lifetime of an expiry choice, 0 for none.
func expiryDuration(v string, choices []choice) (time.Duration, bool) {
	for _, c := range choices {
		if c.Value != v {
			continue
		}
		if v == "" {
			return 0, true
		}
		var days int
		for _, r := range strings.TrimSuffix(v, "d") {
			days = days*10 + int(r-'0')
		}
		return time.Duration(days) * 24 * time.Hour, true
	}
	return 0, false
}

type keyRow struct {
	*apikey.Key
	State string
}

type keyForm struct {
	Name       string
	Privileged bool
	Expiry     string
}

type keysData struct {
	Keys         []keyRow
	Form         keyForm
	Errors       map[string]string
	Expiries     []choice
	MaxPrivilege string
}

func (s *Server) keysPage(w http.ResponseWriter, r *http.Request, c *reqCtx) error {
	return s.renderKeys(w, r, c, http.StatusOK, keyForm{Expiry: "90d"}, nil)
}

func (s *Server) renderKeys(w http.ResponseWriter, r *http.Request, c *reqCtx, status int, form keyForm, errors map[string]string) error {
	keys, err := s.cfg.Keys.FindKeys(r.Context(), apikey.KeyFilter{})
	if err != nil {
		return err
	}
	d := keysData{Form: form, Errors: errors, Expiries: keyExpiries, MaxPrivilege: apikey.FormatLifetime(apikey.MaxPrivilegedLifetime)}
	for _, k := range keys {
		d.Keys = append(d.Keys, keyRow{Key: k, State: string(k.State(c.now))})
	}
	return s.render(w, c, status, "keys", page{Title: "API keys", Section: "keys", Data: d})
}

type keyCreatedData struct {
	Key  *apikey.Key
	Full string
}

// createKey generates a key and shows it once. A privileged key needs a
// fresh re-authentication first, as enabling privileged access later
// does.
func (s *Server) createKey(w http.ResponseWriter, r *http.Request, c *reqCtx) error {
	f := r.PostForm
	form := keyForm{Name: strings.TrimSpace(f.Get("name")), Privileged: f.Get("privileged") == "on", Expiry: f.Get("expiry")}
	fieldErrs := map[string]string{}
	lifetime, ok := expiryDuration(form.Expiry, keyExpiries)
	if !ok {
		fieldErrs["expiry"] = "Choose an expiry from the list."
	}
	p := apikey.Params{Name: form.Name, CreatedBy: c.sess.AdminEmail, Privileged: form.Privileged}
	if lifetime > 0 {
		t := c.now.Add(lifetime)
		p.ExpiresAt = &t
	}
	if ok {
		if _, _, err := apikey.New(p, c.now); errors.Is(err, errs.ErrInvalid) {
			field := "name"
			if strings.Contains(errs.Message(err), "expir") || strings.Contains(errs.Message(err), "live") {
				field = "expiry"
			}
			fieldErrs[field] = sentence(errs.Message(err))
		} else if err != nil {
			return err
		}
	}
	if len(fieldErrs) > 0 {
		return s.renderKeys(w, r, c, http.StatusUnprocessableEntity, form, fieldErrs)
	}
	if form.Privileged {
		if ok, err := s.confirmIdentity(w, r, c); err != nil || !ok {
			return err
		}
	}
	full, k, err := apikey.New(p, c.now)
	if err != nil {
		return err
	}
	if err := s.cfg.Keys.CreateKey(r.Context(), k); err != nil {
		return err
	}
	if err := s.record(r, c, http.StatusOK, audit.KeyCreated{KeyID: k.ID, Name: k.Name, Privileged: k.Privileged, ExpiresAt: k.ExpiresAt}); err != nil {
		return err
	}
	return s.render(w, c, http.StatusOK, "key-created", page{Title: "Your new API key", Section: "keys", Data: keyCreatedData{Key: k, Full: full}})
}

type keyData struct {
	Key      *apikey.Key
	State    string
	Expiries []choice
	Uses     []*audit.Entry
}

// findKey returns the key of the path.
func (s *Server) findKey(r *http.Request) (*apikey.Key, error) {
	id := r.PathValue("id")
	if !apikey.ValidID(id) {
		return nil, errs.NotFoundf("There is no API key %s.", id)
	}
	k, err := s.cfg.Keys.FindKeyByID(r.Context(), id)
	if errors.Is(err, errs.ErrNotFound) {
		return nil, errs.NotFoundf("There is no API key %s.", id)
	}
	return k, err
}

func (s *Server) keyPage(w http.ResponseWriter, r *http.Request, c *reqCtx) error {
	k, err := s.findKey(r)
	if err != nil {
		return err
	}
	uses, err := s.cfg.Audit.FindAuditEntries(r.Context(), audit.Filter{KeyID: k.ID, Limit: 10})
	if err != nil {
		return err
	}
	d := keyData{Key: k, State: string(k.State(c.now)), Expiries: privExpiries, Uses: uses}
	return s.render(w, c, http.StatusOK, "key", page{Title: "API key " + k.Name, Section: "keys", Data: d})
}

func (s *Server) enablePrivileged(w http.ResponseWriter, r *http.Request, c *reqCtx) error {
	k, err := s.findKey(r)
	if err != nil {
		return err
	}
	back := "/settings/api-keys/" + k.ID
	lifetime, ok := expiryDuration(r.PostForm.Get("expiry"), privExpiries)
	if !ok || lifetime == 0 {
		return s.redirect(w, r, back, flash{Error: true, Text: "Choose an expiry of at most " + apikey.FormatLifetime(apikey.MaxPrivilegedLifetime) + "."})
	}
	k, err = s.cfg.Keys.EnablePrivileged(r.Context(), k.ID, c.now.Add(lifetime), c.now)
	if errors.Is(err, errs.ErrConflict) || errors.Is(err, errs.ErrInvalid) {
		return s.redirect(w, r, back, flash{Error: true, Text: sentence(errs.Message(err))})
	}
	if err != nil {
		return err
	}
	if err := s.record(r, c, http.StatusSeeOther, audit.KeyPrivilegeEnabled{KeyID: k.ID, ExpiresAt: *k.ExpiresAt}); err != nil {
		return err
	}
	return s.redirect(w, r, back, flash{Text: "Key " + k.ID + " is now privileged, until " + formatWhen(*k.ExpiresAt) + "."})
}

func (s *Server) revokeKeyPage(w http.ResponseWriter, r *http.Request, c *reqCtx) error {
	k, err := s.findKey(r)
	if err != nil {
		return err
	}
	if k.RevokedAt != nil {
		return s.redirect(w, r, "/settings/api-keys/"+k.ID, flash{Text: "This key is revoked already."})
	}
	return s.render(w, c, http.StatusOK, "key-revoke", page{Title: "Revoke API key " + k.Name, Section: "keys", Data: k})
}

func (s *Server) revokeKey(w http.ResponseWriter, r *http.Request, c *reqCtx) error {
	k, err := s.findKey(r)
	if err != nil {
		return err
	}
	k, err = s.cfg.Keys.RevokeKey(r.Context(), k.ID, c.now)
	if errors.Is(err, errs.ErrConflict) {
		return s.redirect(w, r, "/settings/api-keys", flash{Text: "That key was revoked already."})
	}
	if err != nil {
		return err
	}
	if err := s.record(r, c, http.StatusSeeOther, audit.KeyRevoked{KeyID: k.ID}); err != nil {
		return err
	}
	return s.redirect(w, r, "/settings/api-keys", flash{Text: "Key " + k.ID + " (" + k.Name + ") is revoked: requests with it now get 401."})
}
