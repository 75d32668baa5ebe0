package console

import (
	"context"
	"crypto/subtle"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/pquerna/otp"
	"github.com/pquerna/otp/totp"

	"github.com/patchline/patchline/internal/admin"
	"github.com/patchline/patchline/internal/audit"
	"github.com/patchline/patchline/internal/errs"
)

// The message of every failed sign-in: it does not say which part was
// wrong, so it does not reveal whether an account exists.
const signInFailed = "The email address, password or authentication code is not right."

// maxEmailLen bounds the email field before any work is done with it.
const maxEmailLen = 254

// dummyHash is verified against when the account does not exist, so that
// a failed sign-in takes as long whether or not it does.
var dummyHash = sync.OnceValue(func() string { return admin.HashPassword("patchline timing equaliser") })

// verifySlots bounds the argon2id verifications that run at once: each
// takes 64 MiB.
var verifySlots = make(chan struct{}, 4)

// verifyPassword runs admin.VerifyPassword within verifySlots.
func verifyPassword(ctx context.Context, hash, password string) (bool, error) {
	select {
	case verifySlots <- struct{}{}:
	case <-ctx.Done():
		return false, ctx.Err()
	}
	defer func() { <-verifySlots }()
	return admin.VerifyPassword(hash, password), nil
}

// checkCredentials verifies the password of an administrator and, when
// enrolled, a TOTP code (which is then spent). It returns the
// administrator, or nil and the reason for the audit log.
func (s *Server) checkCredentials(ctx context.Context, email, password, code string, now time.Time) (*admin.Admin, string, error) {
	if email == "" || len(email) > maxEmailLen || password == "" || len(password) > admin.MaxPasswordBytes {
		return nil, "unknown account", nil
	}
	a, err := s.cfg.Admins.FindAdminByEmail(ctx, email)
	if errors.Is(err, errs.ErrNotFound) {
		if _, err := verifyPassword(ctx, dummyHash(), password); err != nil {
			return nil, "", err
		}
		return nil, "unknown account", nil
	}
	if err != nil {
		return nil, "", err
	}
	ok, err := verifyPassword(ctx, a.PasswordHash, password)
	if err != nil {
		return nil, "", err
	}
	if !ok {
		return nil, "wrong password", nil
	}
	t, err := s.cfg.TOTP.FindTOTP(ctx, a.ID)
	if errors.Is(err, errs.ErrNotFound) {
		return a, "", nil
	}
	if err != nil {
		return nil, "", err
	}
	step, ok := matchTOTP(t.Secret, code, now)
	if !ok {
		return nil, "wrong code", nil
	}
	err = s.cfg.TOTP.UseTOTPStep(ctx, a.ID, step)
	if errors.Is(err, errs.ErrConflict) {
		return nil, "reused code", nil
	}
	if err != nil {
		return nil, "", err
	}
	return a, "", nil
}

// TOTP parameters: those of RFC 6238 that every authenticator app takes.
const totpPeriod = 30

var totpOpts = totp.ValidateOpts{Period: totpPeriod, Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1}

// matchTOTP returns the time step whose code is code, from one step
// before now to one after (clocks drift), comparing in constant time.
func matchTOTP(secret, code string, now time.Time) (int64, bool) {
	code = strings.Join(strings.Fields(code), "")
	if len(code) != 6 {
		return 0, false
	}
	found, step := false, int64(0)
	for _, d := range []int64{-1, 0, 1} {
		st := now.Unix()/totpPeriod + d
		want, err := totp.GenerateCodeCustom(secret, time.Unix(st*totpPeriod, 0), totpOpts)
		if err != nil {
			return 0, false
		}
		if subtle.ConstantTimeCompare([]byte(want), []byte(code)) == 1 {
			found, step = true, st
		}
	}
	return step, found
}

// home sends the signed-in administrator to the agents.
func (s *Server) home(w http.ResponseWriter, r *http.Request, c *reqCtx) error {
	http.Redirect(w, r, "/agents", http.StatusSeeOther)
	return nil
}

// hasAdmins reports whether an administrator exists.
func (s *Server) hasAdmins(ctx context.Context) (bool, error) {
	admins, err := s.cfg.Admins.FindAdmins(ctx)
	if err != nil {
		return false, err
	}
	return len(admins) > 0, nil
}

type setupData struct {
	Email  string
	Errors map[string]string
}

func (s *Server) setupPage(w http.ResponseWriter, r *http.Request, c *reqCtx) error {
	exists, err := s.hasAdmins(r.Context())
	if err != nil {
		return err
	}
	if exists {
		return s.redirect(w, r, "/sign-in", flash{})
	}
	return s.render(w, c, http.StatusOK, "setup", page{Title: "Set up Patchline", CSRF: s.presession(w, r, c), Data: setupData{}})
}

func (s *Server) setup(w http.ResponseWriter, r *http.Request, c *reqCtx) error {
	exists, err := s.hasAdmins(r.Context())
	if err != nil {
		return err
	}
	if exists {
		return s.redirect(w, r, "/sign-in", flash{Text: "An administrator exists already: sign in."})
	}
	f := r.PostForm
	email := strings.TrimSpace(f.Get("email"))
	d := setupData{Email: email, Errors: map[string]string{}}
	csrf := s.presession(w, r, c)
	if wait := s.throttle.wait(c.now, c.addr, ""); wait > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(wait.Seconds()+1)))
		d.Errors["form"] = tooMany(wait)
		return s.render(w, c, http.StatusTooManyRequests, "setup", page{Title: "Set up Patchline", CSRF: csrf, Data: d})
	}
	code := strings.ToUpper(strings.Join(strings.FieldsFunc(f.Get("setup_code"), func(r rune) bool { return r == '-' || r == ' ' }), ""))
	want := strings.ReplaceAll(s.setupCode, "-", "")
	if subtle.ConstantTimeCompare([]byte(code), []byte(want)) != 1 {
		s.throttle.fail(c.now, c.addr, "")
		if err := s.record(r, c, http.StatusUnprocessableEntity, audit.AdminLoginFailed{Email: truncate(email, maxEmailLen), Reason: "wrong setup code"}); err != nil {
			return err
		}
		d.Errors["setup_code"] = "This is not the setup code. Find it in the server log, on the line that says “no administrator yet”."
		return s.render(w, c, http.StatusUnprocessableEntity, "setup", page{Title: "Set up Patchline", CSRF: csrf, Data: d})
	}
	if e, err := admin.CheckEmail(email); err != nil {
		d.Errors["email"] = "Enter an email address, such as ops@example.com."
	} else {
		email, d.Email = e, e
	}
	password := f.Get("password")
	if err := admin.CheckPassword(password); err != nil {
		d.Errors["password"] = sentence(errs.Message(err))
	} else if password != f.Get("password_confirm") {
		d.Errors["password_confirm"] = "The two passwords are not the same."
	}
	if len(d.Errors) > 0 {
		return s.render(w, c, http.StatusUnprocessableEntity, "setup", page{Title: "Set up Patchline", CSRF: csrf, Data: d})
	}
	a := &admin.Admin{ID: admin.NewID(), Email: email, PasswordHash: admin.HashPassword(password), CreatedAt: c.now.UTC()}
	err = s.cfg.FirstAdmin.CreateFirstAdmin(r.Context(), a)
	if errors.Is(err, errs.ErrConflict) {
		return s.redirect(w, r, "/sign-in", flash{Text: "An administrator exists already: sign in."})
	}
	if err != nil {
		return err
	}
	if err := s.record(r, c, http.StatusSeeOther, audit.AdminCreated{Email: a.Email}); err != nil {
		return err
	}
	s.log.InfoContext(r.Context(), "first administrator created", "email", a.Email, "clientAddress", c.addr)
	return s.redirect(w, r, "/sign-in", flash{Text: "Administrator " + a.Email + " created. Sign in to continue."})
}

type signInData struct {
	Email, Next string
	Error       string
}

func (s *Server) signInPage(w http.ResponseWriter, r *http.Request, c *reqCtx) error {
	next := safeNext(r.URL.Query().Get("next"))
	if c.sess != nil {
		if next == "" {
			next = "/agents"
		}
		http.Redirect(w, r, next, http.StatusSeeOther)
		return nil
	}
	exists, err := s.hasAdmins(r.Context())
	if err != nil {
		return err
	}
	if !exists {
		http.Redirect(w, r, "/setup", http.StatusSeeOther)
		return nil
	}
	return s.render(w, c, http.StatusOK, "sign-in", page{Title: "Sign in", CSRF: s.presession(w, r, c), Data: signInData{Next: next}})
}

func (s *Server) signIn(w http.ResponseWriter, r *http.Request, c *reqCtx) error {
	f := r.PostForm
	email := strings.TrimSpace(f.Get("email"))
	next := safeNext(f.Get("next"))
	d := signInData{Email: truncate(email, maxEmailLen), Next: next}
	csrf := s.presession(w, r, c)
	if wait := s.throttle.wait(c.now, c.addr, email); wait > 0 {
		if err := s.record(r, c, http.StatusTooManyRequests, audit.AdminLoginFailed{Email: d.Email, Reason: "throttled"}); err != nil {
			return err
		}
		w.Header().Set("Retry-After", strconv.Itoa(int(wait.Seconds()+1)))
		d.Error = tooMany(wait)
		return s.render(w, c, http.StatusTooManyRequests, "sign-in", page{Title: "Sign in", CSRF: csrf, Data: d})
	}
	a, reason, err := s.checkCredentials(r.Context(), email, f.Get("password"), f.Get("code"), c.now)
	if err != nil {
		return err
	}
	if a == nil {
		s.throttle.fail(c.now, c.addr, email)
		if err := s.record(r, c, http.StatusUnprocessableEntity, audit.AdminLoginFailed{Email: d.Email, Reason: reason}); err != nil {
			return err
		}
		d.Error = signInFailed
		return s.render(w, c, http.StatusUnprocessableEntity, "sign-in", page{Title: "Sign in", CSRF: csrf, Data: d})
	}
	s.throttle.succeed(email)

	// A new session with a new token: a session cookie planted before
	// sign-in is worth nothing after it.
	if c.sess != nil {
		if err := s.cfg.Sessions.DeleteSession(r.Context(), c.sess.IDHash); err != nil {
			return err
		}
	}
	token := admin.NewSessionToken()
	now := c.now.UTC()
	sess := &admin.Session{
		IDHash: admin.HashSessionToken(token), AdminID: a.ID, AdminEmail: a.Email,
		CreatedAt: now, LastSeenAt: now, ExpiresAt: now.Add(SessionLifetime),
		ClientAddress: c.addr, UserAgent: truncate(r.UserAgent(), 300),
	}
	c.sess = sess
	if err := s.record(r, c, http.StatusSeeOther, audit.AdminLogin{Email: a.Email}); err != nil {
		return err
	}
	if err := s.cfg.Sessions.CreateSession(r.Context(), sess); err != nil {
		return err
	}
	if err := s.cfg.Admins.RecordAdminLogin(r.Context(), a.ID, now); err != nil {
		s.log.WarnContext(r.Context(), "record admin sign-in", "email", a.Email, "err", err)
	}
	if n, err := s.cfg.Sessions.DeleteExpiredSessions(r.Context(), now, now.Add(-IdleTimeout)); err != nil {
		s.log.WarnContext(r.Context(), "delete expired sessions", "err", err)
	} else if n > 0 {
		s.log.DebugContext(r.Context(), "deleted expired sessions", "count", n)
	}
	s.setCookie(w, r, sessionCookie, token, 0)
	s.clearCookie(w, r, presessionCookie)
	if next == "" {
		next = "/agents"
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
	return nil
}

func (s *Server) signOut(w http.ResponseWriter, r *http.Request, c *reqCtx) error {
	if err := s.cfg.Sessions.DeleteSession(r.Context(), c.sess.IDHash); err != nil {
		return err
	}
	s.clearCookie(w, r, sessionCookie)
	if err := s.record(r, c, http.StatusSeeOther, audit.AdminLogout{Email: c.sess.AdminEmail}); err != nil {
		return err
	}
	c.sess = nil
	return s.redirect(w, r, "/sign-in", flash{Text: "You are signed out."})
}

// hidden is a form field carried through the re-authentication step.
type hidden struct{ Name, Value string }

type confirmData struct {
	What      string // the action that waits
	Action    string // where the form posts
	Cancel    string // where Cancel goes
	Fields    []hidden
	NeedsCode bool
	Error     string
}

// confirmIdentity is the re-authentication step of a privileged action.
// Within ReauthWindow of the last re-authentication it lets the request
// go on. Otherwise it answers with a page that asks for the password (and
// the TOTP code when enrolled) and posts the original form again with
// them; when they hold, it records the re-authentication and lets that
// request go on. It returns false when it answered.
func (s *Server) confirmIdentity(w http.ResponseWriter, r *http.Request, c *reqCtx) (bool, error) {
	if c.fresh() {
		return true, nil
	}
	email := c.sess.AdminEmail
	needsCode := false
	if _, err := s.cfg.TOTP.FindTOTP(r.Context(), c.sess.AdminID); err == nil {
		needsCode = true
	} else if !errors.Is(err, errs.ErrNotFound) {
		return false, err
	}
	what, cancel := describeAction(r)
	d := confirmData{What: what, Action: r.URL.Path, Cancel: cancel, NeedsCode: needsCode}
	for name, values := range r.PostForm {
		if name == "csrf" || strings.HasPrefix(name, "reauth_") {
			continue
		}
		for _, v := range values {
			d.Fields = append(d.Fields, hidden{name, v})
		}
	}
	sortHidden(d.Fields)
	if !r.PostForm.Has("reauth_password") {
		return false, s.render(w, c, http.StatusOK, "confirm", page{Title: "Confirm it’s you", Data: d})
	}
	if wait := s.throttle.wait(c.now, c.addr, email); wait > 0 {
		if err := s.record(r, c, http.StatusTooManyRequests, audit.AdminLoginFailed{Email: email, Reason: "re-authentication: throttled"}); err != nil {
			return false, err
		}
		w.Header().Set("Retry-After", strconv.Itoa(int(wait.Seconds()+1)))
		d.Error = tooMany(wait)
		return false, s.render(w, c, http.StatusTooManyRequests, "confirm", page{Title: "Confirm it’s you", Data: d})
	}
	a, reason, err := s.checkCredentials(r.Context(), email, r.PostForm.Get("reauth_password"), r.PostForm.Get("reauth_code"), c.now)
	if err != nil {
		return false, err
	}
	if a == nil || a.ID != c.sess.AdminID {
		s.throttle.fail(c.now, c.addr, email)
		if err := s.record(r, c, http.StatusUnprocessableEntity, audit.AdminLoginFailed{Email: email, Reason: "re-authentication: " + reason}); err != nil {
			return false, err
		}
		d.Error = "The password or authentication code is not right."
		if !needsCode {
			d.Error = "The password is not right."
		}
		return false, s.render(w, c, http.StatusUnprocessableEntity, "confirm", page{Title: "Confirm it’s you", Data: d})
	}
	s.throttle.succeed(email)
	if err := s.cfg.Sessions.RecordReauth(r.Context(), c.sess.IDHash, c.now); err != nil {
		return false, err
	}
	at := c.now
	c.sess.ReauthAt = &at
	if err := s.record(r, c, 0, audit.AdminReauthenticated{Email: email, For: r.URL.Path}); err != nil {
		return false, err
	}
	for _, name := range []string{"reauth_password", "reauth_code"} {
		r.PostForm.Del(name)
		r.Form.Del(name)
	}
	return true, nil
}

// describeAction says what a privileged request is about to do, and
// where to go instead.
func describeAction(r *http.Request) (what, cancel string) {
	id := r.PathValue("id")
	switch r.Pattern {
	case "POST /settings/api-keys":
		return "Generate the privileged API key “" + truncate(r.PostForm.Get("name"), 100) + "”.", "/settings/api-keys"
	case "POST /settings/api-keys/{id}/privileged":
		return "Enable privileged access for API key " + id + ".", "/settings/api-keys/" + id
	case "POST /agents/{id}/install-updates":
		return "Install updates on agent " + id + ".", "/agents/" + id
	case "POST /agents/{id}/reboot":
		return "Reboot agent " + id + ".", "/agents/" + id
	case "POST /agents/{id}/finish-feature-upgrade":
		return "Finish the feature upgrade of agent " + id + ".", "/agents/" + id
	case "POST /agents/{id}/remove":
		return "Remove agent " + id + " and uninstall its agent.", "/agents/" + id
	case "POST /agents/finish-feature-upgrades":
		return "Finish the feature upgrades of the matching agents that are ready.", "/agents"
	case "POST /rollouts/{id}/advance":
		return "Start the next ring of rollout " + id + ".", "/rollouts/" + id
	case "POST /vulnerabilities/{cveId}/install-fix":
		id := r.PathValue("cveId")
		return "Install the fix of " + id + " on the agents it affects.", "/vulnerabilities/" + id
	case "POST /policies/{id}/deploy":
		return "Deploy policy " + id + " to agents.", "/policies/" + id
	case "POST /account/totp":
		return "Turn on two-factor authentication for your account.", "/account"
	case "POST /account/totp/remove":
		return "Turn off two-factor authentication for your account.", "/account"
	}
	return "Carry out a privileged action.", "/"
}

// tooMany is the message of a throttled attempt.
func tooMany(wait time.Duration) string {
	secs := int(wait.Seconds() + 1)
	if secs >= 120 {
		return "Too many failed attempts. Wait " + strconv.Itoa((secs+59)/60) + " minutes, then try again."
	}
	return "Too many failed attempts. Wait " + strconv.Itoa(secs) + " seconds, then try again."
}

// truncate cuts s to at most n runes.
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n])
}

// sentence capitalises a message and ends it with a full stop.
func sentence(s string) string {
	if s == "" {
		return s
	}
	r, size := utf8.DecodeRuneInString(s)
	s = strings.ToUpper(string(r)) + s[size:]
	if !strings.HasSuffix(s, ".") {
		s += "."
	}
	return s
}

// sortHidden orders fields by name, keeping the order of values.
func sortHidden(fs []hidden) {
	for i := 1; i < len(fs); i++ {
		for j := i; j > 0 && fs[j].Name < fs[j-1].Name; j-- {
			fs[j], fs[j-1] = fs[j-1], fs[j]
		}
	}
}
