// Package pgtest gives tests a PostgreSQL database of their own on the
// server that PATCHLINE_TEST_POSTGRES names, and skips them when it is not
// set.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvVar is the environment variable that holds the URL of the test
// server, such as postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable.
const EnvVar = "PATCHLINE_TEST_POSTGRES"

// URL returns the URL of the test server, and skips tb when there is none.
func URL(tb testing.TB) string {
	tb.Helper()
	u := os.Getenv(EnvVar)
	if u == "" {
		tb.Skipf("%s is not set: skipping the tests against PostgreSQL (set it to a URL such as postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable)", EnvVar)
	}
	return u
}

// NewDatabase creates a database named patchline_test_<random> on the test
// server, drops it when tb ends, and returns the URL that connects to it.
// It skips tb when PATCHLINE_TEST_POSTGRES is not set.
func NewDatabase(tb testing.TB) string {
	tb.Helper()
	base := URL(tb)
	u, err := url.Parse(base)
	if err != nil {
		tb.Fatalf("%s: %v", EnvVar, err)
	}
	var b [6]byte
	rand.Read(b[:])
	name := "patchline_test_" + hex.EncodeToString(b[:])

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		tb.Fatalf("connect to %s: %v", EnvVar, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		tb.Fatalf("create test database: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			tb.Errorf("drop test database %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			tb.Errorf("drop test database %s: %v", name, err)
		}
	})
	u.Path = "/" + name
	return u.String()
}
