package console

import (
	"bytes"
	"encoding/base32"
	"encoding/base64"
	"errors"
	"html/template"
	"image/png"
	"net/http"
	"strings"
	"time"

	"github.com/pquerna/otp"
	"github.com/pquerna/otp/totp"

	"github.com/patchline/patchline/internal/admin"
	"github.com/patchline/patchline/internal/audit"
	"github.com/patchline/patchline/internal/errs"
)

type accountData struct {
	Email       string
	SignedInAt  time.Time
	TOTP        *admin.TOTP // nil when not enrolled
	Secret      string      // a new secret to enroll with
	URI         string      // its otpauth:// URI
	QR          template.URL
	Error       string
	ReauthUntil *time.Time
}

func (s *Server) accountPage(w http.ResponseWriter, r *http.Request, c *reqCtx) error {
	return s.renderAccount(w, r, c, http.StatusOK, "", "")
}

// renderAccount shows the account page; secret, when set, is the
// enrollment secret to keep showing (after a wrong code).
func (s *Server) renderAccount(w http.ResponseWriter, r *http.Request, c *reqCtx, status int, secret, errMsg string) error {
	d := accountData{Email: c.sess.AdminEmail, SignedInAt: c.sess.CreatedAt, Error: errMsg}
	if c.fresh() {
		until := c.sess.ReauthAt.Add(ReauthWindow)
		d.ReauthUntil = &until
	}
	t, err := s.cfg.TOTP.FindTOTP(r.Context(), c.sess.AdminID)
	switch {
	case err == nil:
		d.TOTP = t
	case errors.Is(err, errs.ErrNotFound):
		key, err := totpKey(c.sess.AdminEmail, secret)
		if err != nil {
			return err
		}
		d.Secret, d.URI = key.Secret(), key.URL()
		img, err := key.Image(200, 200)
		if err != nil {
			return err
		}
		var buf bytes.Buffer
		if err := png.Encode(&buf, img); err != nil {
			return err
		}
		// A data: URL of a PNG we made ourselves, allowed by img-src.
		d.QR = template.URL("data:image/png;base64," + base64.StdEncoding.EncodeToString(buf.Bytes()))
	default:
		return err
	}
	return s.render(w, c, status, "account", page{Title: "Your account", Section: "account", Data: d})
}

// totpKey returns a new TOTP key for an administrator, or the key of the
// given base32 secret.
func totpKey(email, secret string) (*otp.Key, error) {
	opts := totp.GenerateOpts{Issuer: "Patchline", AccountName: email, Period: totpPeriod, Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1}
	if secret != "" {
		raw, err := base32.StdEncoding.WithPadding(base32.NoPadding).DecodeString(secret)
		if err != nil {
			return nil, errs.Invalidf("the secret is not base32")
		}
		opts.Secret = raw
	}
	return totp.Generate(opts)
}

// validTOTPSecret reports whether s is a secret the console made: 20
// bytes in unpadded base32.
func validTOTPSecret(s string) bool {
	raw, err := base32.StdEncoding.WithPadding(base32.NoPadding).DecodeString(s)
	return err == nil && len(raw) == 20
}

func (s *Server) enableTOTP(w http.ResponseWriter, r *http.Request, c *reqCtx) error {
	secret := strings.TrimSpace(r.PostForm.Get("secret"))
	if !validTOTPSecret(secret) {
		return s.renderAccount(w, r, c, http.StatusUnprocessableEntity, "", "The enrollment expired. Scan the new code below and try again.")
	}
	if _, err := s.cfg.TOTP.FindTOTP(r.Context(), c.sess.AdminID); err == nil {
		return s.redirect(w, r, "/account", flash{Text: "Two-factor authentication is on already."})
	} else if !errors.Is(err, errs.ErrNotFound) {
		return err
	}
	step, ok := matchTOTP(secret, r.PostForm.Get("code"), c.now)
	if !ok {
		return s.renderAccount(w, r, c, http.StatusUnprocessableEntity, secret, "That code does not match. Check the clock of your device and enter the code your app shows now.")
	}
	if err := s.cfg.TOTP.SetTOTP(r.Context(), &admin.TOTP{AdminID: c.sess.AdminID, Secret: secret, EnabledAt: c.now.UTC(), LastStep: step}); err != nil {
		return err
	}
	if err := s.record(r, c, http.StatusSeeOther, audit.AdminTOTPEnabled{Email: c.sess.AdminEmail}); err != nil {
		return err
	}
	return s.redirect(w, r, "/account", flash{Text: "Two-factor authentication is on. Signing in and confirming privileged actions now need a code from your app."})
}

func (s *Server) removeTOTP(w http.ResponseWriter, r *http.Request, c *reqCtx) error {
	if err := s.cfg.TOTP.DeleteTOTP(r.Context(), c.sess.AdminID); err != nil {
		return err
	}
	if err := s.record(r, c, http.StatusSeeOther, audit.AdminTOTPDisabled{Email: c.sess.AdminEmail}); err != nil {
		return err
	}
	return s.redirect(w, r, "/account", flash{Text: "Two-factor authentication is off."})
}
