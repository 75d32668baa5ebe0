package console

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/patchline/patchline/internal/admin"
	"github.com/patchline/patchline/internal/audit"
	"github.com/patchline/patchline/internal/errs"
)

// Cookies of the console. None of them is readable by scripts.
const (
	sessionCookie    = "patchline_session"
	presessionCookie = "patchline_presession" // binds the CSRF token of the sign-in and setup forms
	flashCookie      = "patchline_flash"      // a message for the next page, after a redirect
)

// maxForm bounds the body of a console form: a policy's settings are the
// largest field.
const maxForm = 256 << 10

// handlerFunc is a console handler: it writes a page, or returns an error
// that the chain renders as an error page.
type handlerFunc func(w http.ResponseWriter, r *http.Request, c *reqCtx) error

// reqCtx is what the chain learned about a request.
type reqCtx struct {
	now    time.Time
	addr   string         // client address
	secure bool           // cookies get the Secure attribute
	sess   *admin.Session // nil when signed out
	csrf   string         // the CSRF token forms must carry
	flash  flash          // the message left by the previous request, cleared once a page shows it
}

// actor returns the audit actor of the request.
func (c *reqCtx) actor() string {
	if c.sess == nil {
		return "anonymous"
	}
	return "admin:" + c.sess.AdminEmail
}

// fresh reports whether the session re-authenticated within ReauthWindow.
func (c *reqCtx) fresh() bool {
	return c.sess != nil && c.sess.ReauthAt != nil && c.now.Sub(*c.sess.ReauthAt) < ReauthWindow && !c.sess.ReauthAt.After(c.now.Add(time.Minute))
}

// statusError is an error page with a given status and message.
type statusError struct {
	status int
	msg    string
	allow  string // the Allow header of a 405
}

func (e *statusError) Error() string { return e.msg }

// errCSRF answers a POST whose CSRF token does not match.
var errCSRF = &statusError{status: http.StatusForbidden,
	msg: "This form has expired or was not sent from the console. Go back, reload the page and try again; if you were signed out, sign in again."}

// wrap adapts a handler to the chain and renders its error.
func (s *Server) wrap(access Access, h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := s.newReqCtx(r)
		if err := s.authorize(access, h)(w, r, c); err != nil {
			s.writeError(w, r, c, err)
		}
	})
}

// newReqCtx starts the context of a request.
func (s *Server) newReqCtx(r *http.Request) *reqCtx {
	return &reqCtx{now: s.now(), addr: s.clientAddress(r), secure: s.overTLS(r)}
}

// notFound answers a request that no route matches. It changes nothing,
// so it needs no CSRF token; it reads the session so that the page shows
// who is signed in.
func (s *Server) notFound() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := s.newReqCtx(r)
		if err := s.loadSession(w, r, c); err != nil {
			s.writeError(w, r, c, err)
			return
		}
		s.writeError(w, r, c, s.noRoute(r))
	})
}

// authorize reads the session, checks the CSRF token of a POST and the
// access the route requires, before h runs.
func (s *Server) authorize(access Access, h handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, c *reqCtx) error {
		if access == Asset {
			return h(w, r, c)
		}
		if err := s.loadSession(w, r, c); err != nil {
			return err
		}
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			c.flash = readFlash(r)
		} else {
			r.Body = http.MaxBytesReader(w, r.Body, maxForm)
			if err := r.ParseForm(); err != nil {
				return &statusError{status: http.StatusBadRequest, msg: "The form could not be read."}
			}
			if !s.checkCSRF(r, c, access) {
				return errCSRF
			}
		}
		switch access {
		case Public:
		case Session, Fresh:
			if c.sess == nil {
				if r.Method == http.MethodGet || r.Method == http.MethodHead {
					http.Redirect(w, r, "/sign-in?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
					return nil
				}
				return errCSRF // no session, so no token could match
			}
			if access == Fresh {
				ok, err := s.confirmIdentity(w, r, c)
				if err != nil || !ok {
					return err
				}
			}
		default:
			return errs.Forbiddenf("route has no access level")
		}
		return h(w, r, c)
	}
}

// loadSession sets c.sess from the session cookie when it names a live
// session, and ends an expired one.
func (s *Server) loadSession(w http.ResponseWriter, r *http.Request, c *reqCtx) error {
	ck, err := r.Cookie(sessionCookie)
	if err != nil || ck.Value == "" {
		return nil
	}
	if !admin.ValidSessionToken(ck.Value) {
		s.clearCookie(w, r, sessionCookie)
		return nil
	}
	hash := admin.HashSessionToken(ck.Value)
	sess, err := s.cfg.Sessions.FindSession(r.Context(), hash)
	if errors.Is(err, errs.ErrNotFound) {
		s.clearCookie(w, r, sessionCookie)
		return nil
	}
	if err != nil {
		return err
	}
	if !c.now.Before(sess.ExpiresAt) || c.now.Sub(sess.LastSeenAt) >= IdleTimeout {
		if err := s.cfg.Sessions.DeleteSession(r.Context(), hash); err != nil {
			s.log.WarnContext(r.Context(), "delete expired session", "err", err)
		}
		s.clearCookie(w, r, sessionCookie)
		return nil
	}
	if c.now.Sub(sess.LastSeenAt) >= touchInterval {
		if err := s.cfg.Sessions.TouchSession(r.Context(), hash, c.now); err != nil {
			s.log.WarnContext(r.Context(), "record session activity", "err", err)
		}
	}
	c.sess = sess
	c.csrf = csrfToken(ck.Value)
	return nil
}

// csrfToken derives the CSRF token of forms from a session or pre-session
// token: knowing it reveals nothing about the cookie.
func csrfToken(token string) string {
	sum := sha256.Sum256([]byte("patchline console csrf\n" + token))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// checkCSRF compares the csrf field of a form with the token of the
// session, or for public forms with that of the pre-session cookie.
func (s *Server) checkCSRF(r *http.Request, c *reqCtx, access Access) bool {
	got := r.PostForm.Get("csrf")
	if got == "" {
		return false
	}
	var want []string
	if c.sess != nil {
		want = append(want, c.csrf)
	}
	if access == Public {
		if ck, err := r.Cookie(presessionCookie); err == nil && admin.ValidSessionToken(ck.Value) {
			want = append(want, csrfToken(ck.Value))
		}
	}
	for _, w := range want {
		if subtle.ConstantTimeCompare([]byte(got), []byte(w)) == 1 {
			return true
		}
	}
	return false
}

// presession returns the CSRF token for a public form, setting the
// pre-session cookie when there is none.
func (s *Server) presession(w http.ResponseWriter, r *http.Request, c *reqCtx) string {
	if c.sess != nil {
		return c.csrf
	}
	if ck, err := r.Cookie(presessionCookie); err == nil && admin.ValidSessionToken(ck.Value) {
		return csrfToken(ck.Value)
	}
	token := admin.NewSessionToken()
	s.setCookie(w, r, presessionCookie, token, time.Hour)
	return csrfToken(token)
}

// setCookie sets an HttpOnly, SameSite=Lax cookie on the whole console,
// Secure when the request came over TLS (or SecureCookies says so);
// maxAge 0 makes it last as long as the browser session.
func (s *Server) setCookie(w http.ResponseWriter, r *http.Request, name, value string, maxAge time.Duration) {
	http.SetCookie(w, &http.Cookie{
		Name:     name,
		Value:    value,
		Path:     "/",
		MaxAge:   int(maxAge / time.Second),
		HttpOnly: true,
		Secure:   s.overTLS(r),
		SameSite: http.SameSiteLaxMode,
	})
}

// clearCookie deletes a cookie.
func (s *Server) clearCookie(w http.ResponseWriter, r *http.Request, name string) {
	clearCookie(w, name, s.overTLS(r))
}

func clearCookie(w http.ResponseWriter, name string, secure bool) {
	http.SetCookie(w, &http.Cookie{
		Name: name, Value: "", Path: "/", MaxAge: -1, HttpOnly: true,
		Secure: secure, SameSite: http.SameSiteLaxMode,
	})
}

// flash is a message shown once, on the page after a redirect.
type flash struct {
	Error bool
	Text  string
}

// redirect leaves a message for the next page and redirects there with
// 303 See Other.
func (s *Server) redirect(w http.ResponseWriter, r *http.Request, to string, f flash) error {
	if f.Text != "" {
		kind := "i"
		if f.Error {
			kind = "e"
		}
		s.setCookie(w, r, flashCookie, url.QueryEscape(kind+f.Text), time.Minute)
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
	return nil
}

// readFlash reads the message of the previous request; the page that
// shows it clears it (see render), so that a redirect on the way does
// not lose it.
func readFlash(r *http.Request) flash {
	ck, err := r.Cookie(flashCookie)
	if err != nil {
		return flash{}
	}
	v, err := url.QueryUnescape(ck.Value)
	if err != nil || len(v) < 2 || len(v) > 1000 {
		return flash{}
	}
	return flash{Error: v[0] == 'e', Text: v[1:]}
}

// clientAddress returns the address of the client, through trusted
// proxies.
// overTLS reports whether the browser reached the console over TLS: the
// request came over TLS, or through one of the trusted proxies that says
// so in X-Forwarded-Proto, or SecureCookies says the console is only ever
// reached that way.
func (s *Server) overTLS(r *http.Request) bool {
	if r.TLS != nil || s.cfg.SecureCookies {
		return true
	}
	peer, err := netip.ParseAddrPort(r.RemoteAddr)
	return err == nil && s.cfg.TrustedProxies.Contains(peer.Addr().Unmap()) &&
		strings.EqualFold(strings.TrimSpace(r.Header.Get("X-Forwarded-Proto")), "https")
}

func (s *Server) clientAddress(r *http.Request) string {
	if a := s.cfg.TrustedProxies.ClientAddr(r); a.IsValid() {
		return a.String()
	}
	return r.RemoteAddr
}

// record appends an audit entry for an action of the request, answered
// with status. The work is done by then: the entry must not be lost
// because the client went away.
func (s *Server) record(r *http.Request, c *reqCtx, status int, ev audit.Event) error {
	e := &audit.Entry{
		Time:          c.now,
		Actor:         c.actor(),
		Method:        r.Method,
		Path:          r.URL.Path,
		Status:        status,
		ClientAddress: c.addr,
	}
	if err := e.SetEvent(ev); err != nil {
		return err
	}
	if err := s.cfg.Audit.AppendAudit(context.WithoutCancel(r.Context()), e); err != nil {
		return fmt.Errorf("audit %s %s: %w", r.Method, r.URL.Path, err)
	}
	return nil
}

// safeNext returns next when it is a path of this console, "" otherwise,
// so that a sign-in link cannot send anyone to another site.
func safeNext(next string) string {
	if next == "" || !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.HasPrefix(next, "/\\") {
		return ""
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || strings.ContainsAny(next, "\r\n\t") {
		return ""
	}
	if strings.HasPrefix(u.Path, "/sign-in") || strings.HasPrefix(u.Path, "/setup") || strings.HasPrefix(u.Path, "/static/") {
		return ""
	}
	return next
}
