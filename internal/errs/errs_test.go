package errs

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
)

func TestStatusOf(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"invalid", Invalidf("bad %s", "limit"), http.StatusBadRequest},
		{"wrapped not found", fmt.Errorf("find agent: %w", ErrNotFound), http.StatusNotFound},
		{"forbidden", Forbiddenf("key is not privileged"), http.StatusForbidden},
		{"unauthorized", Unauthorizedf("no key"), http.StatusUnauthorized},
		{"conflict", Conflictf("exists"), http.StatusConflict},
		{"too large", TooLargef("body"), http.StatusRequestEntityTooLarge},
		{"internal", errors.New("disk on fire"), http.StatusInternalServerError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := StatusOf(tt.err); got != tt.want {
				t.Errorf("StatusOf(%v) = %d, want %d", tt.err, got, tt.want)
			}
		})
	}
}

func TestMessageHidesInternalErrors(t *testing.T) {
	if m := Message(errors.New("secret path /var/x")); m != "" {
		t.Errorf("Message of an internal error = %q, want empty", m)
	}
	if m := Message(fmt.Errorf("ctx: %w", Invalidf("limit must be 1 to 100"))); m != "limit must be 1 to 100" {
		t.Errorf("Message = %q", m)
	}
}

func TestWrap(t *testing.T) {
	found := func(id string) (err error) {
		defer Wrap(&err, "find agent %s", id)
		if id == "" {
			return NotFoundf("no such agent")
		}
		return nil
	}
	if err := found("a1"); err != nil {
		t.Fatalf("Wrap of no error = %v, want nil", err)
	}
	err := found("")
	if got, want := err.Error(), "find agent : no such agent"; got != want {
		t.Errorf("Wrap = %q, want %q", got, want)
	}
	if !errors.Is(err, ErrNotFound) || Message(err) != "no such agent" {
		t.Errorf("Wrap lost the kind or message of %v", err)
	}
}

func TestWrapf(t *testing.T) {
	if err := Wrapf(nil, "delete %s", "x"); err != nil {
		t.Errorf("Wrapf(nil) = %v, want nil", err)
	}
	err := Wrapf(ErrConflict, "delete %s", "x")
	if err.Error() != "delete x: conflict" || !errors.Is(err, ErrConflict) {
		t.Errorf("Wrapf = %v", err)
	}
}
