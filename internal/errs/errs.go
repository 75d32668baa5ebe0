// Package errs defines the small set of error kinds that both services map
// to HTTP statuses in one table (see StatusOf).
//
// Packages wrap these kinds with context:
//
//	return errs.Invalidf("limit must be between 1 and 100, got %d", n)
//	return fmt.Errorf("find agent %s: %w", id, errs.ErrNotFound)
//
// A function whose every error gets the same context says it once, at its
// top:
//
//	defer errs.Wrap(&err, "find agent %s", id)
//
// The message of an error built with Invalidf, Forbiddenf and so on is meant
// for the client; anything that is not one of these kinds is an internal
// error whose details go to the log only.
package errs

import (
	"errors"
	"fmt"
	"net/http"
)

// The error kinds.
var (
	ErrInvalid      = errors.New("invalid")
	ErrNotFound     = errors.New("not found")
	ErrUnauthorized = errors.New("unauthorized")
	ErrForbidden    = errors.New("forbidden")
	ErrConflict     = errors.New("conflict")
	ErrTooLarge     = errors.New("too large")
	ErrTooMany      = errors.New("too many requests")
)

// Error is an error of one kind with a message meant for the client.
type Error struct {
	Kind    error
	Message string
}

func (e *Error) Error() string { return e.Message }

// Unwrap makes errors.Is(err, errs.ErrInvalid) and friends work.
func (e *Error) Unwrap() error { return e.Kind }

func newf(kind error, format string, args ...any) error {
	return &Error{Kind: kind, Message: fmt.Sprintf(format, args...)}
}

// Invalidf returns an ErrInvalid error with a client-facing message.
func Invalidf(format string, args ...any) error { return newf(ErrInvalid, format, args...) }

// NotFoundf returns an ErrNotFound error with a client-facing message.
func NotFoundf(format string, args ...any) error { return newf(ErrNotFound, format, args...) }

// Unauthorizedf returns an ErrUnauthorized error with a client-facing message.
func Unauthorizedf(format string, args ...any) error {
	return newf(ErrUnauthorized, format, args...)
}

// Forbiddenf returns an ErrForbidden error with a client-facing message.
func Forbiddenf(format string, args ...any) error { return newf(ErrForbidden, format, args...) }

// Conflictf returns an ErrConflict error with a client-facing message.
func Conflictf(format string, args ...any) error { return newf(ErrConflict, format, args...) }

// TooLargef returns an ErrTooLarge error with a client-facing message.
func TooLargef(format string, args ...any) error { return newf(ErrTooLarge, format, args...) }

var statuses = []struct {
	kind   error
	status int
}{
	{ErrInvalid, http.StatusBadRequest},
	{ErrUnauthorized, http.StatusUnauthorized},
	{ErrForbidden, http.StatusForbidden},
	{ErrNotFound, http.StatusNotFound},
	{ErrConflict, http.StatusConflict},
	{ErrTooLarge, http.StatusRequestEntityTooLarge},
	{ErrTooMany, http.StatusTooManyRequests},
}

// StatusOf maps an error to its HTTP status: the status of its kind, or 500
// for anything else.
func StatusOf(err error) int {
	for _, s := range statuses {
		if errors.Is(err, s.kind) {
			return s.status
		}
	}
	return http.StatusInternalServerError
}

// Wrapf returns err with the context of format and args, as
// fmt.Errorf("<context>: %w", err) does, and nil when err is nil:
//
//	_, err := db.ExecContext(ctx, `DELETE FROM admin_totp WHERE admin_id = ?`, id)
//	return errs.Wrapf(err, "delete totp of %s", id)
func Wrapf(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), err)
}

// Wrap is Wrapf of *errp, deferred by a function with a named error
// result whose every error gets the same context.
//
// The arguments of both are boxed on every call, error or not: a path that
// runs on every request wraps its error with fmt.Errorf once it has one.
func Wrap(errp *error, format string, args ...any) {
	*errp = Wrapf(*errp, format, args...)
}

// Message returns the client-facing message of err, or "" when err carries
// none (an internal error, whose text must not reach the client).
func Message(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return ""
}
