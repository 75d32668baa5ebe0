package pgdb

import "testing"

// TestIsDSN checks which DSNs name a PostgreSQL database.
func TestIsDSN(t *testing.T) {
	for dsn, want := range map[string]bool{
		"postgres://u@h/db":   true,
		"postgresql://u@h/db": true,
		"sqlite:catalog.db":   false,
		"catalog.db":          false,
		"/var/lib/postgres":   false,
	} {
		if got := IsDSN(dsn); got != want {
			t.Errorf("IsDSN(%q) = %v", dsn, got)
		}
	}
}

// TestText checks that NUL bytes and invalid UTF-8 become U+FFFD and
// that other strings are kept as they are. The stores' suites store such
// strings on PostgreSQL.
func TestText(t *testing.T) {
	for in, want := range map[string]string{
		"":                       "",
		"KB5034441 ✓":            "KB5034441 ✓",
		"HTTP 502: \x00\xff\xfe": "HTTP 502: \uFFFD\uFFFD", // a run of invalid bytes is one
		"a\x00b":                 "a\uFFFDb",
	} {
		if got := Text(in); got != want {
			t.Errorf("Text(%q) = %q, want %q", in, got, want)
		}
	}
}
