// Package sqlitedrivers compares the Go SQLite drivers on the catalog's hot
// read: a point lookup of a record body by its integer key, from parallel
// readers, on a WAL database. It is a module of its own so that the drivers
// it compares do not become dependencies of Patchline.
//
//	cd bench/sqlitedrivers && go test -bench . -benchmem
package sqlitedrivers

import (
	"database/sql"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/mattn/go-sqlite3" // "sqlite3", cgo
	_ "modernc.org/sqlite"          // "sqlite", pure Go
)

const rows = 50_000

// body is the size of a typical served record.
var body = []byte(`{"cveId":"CVE-2021-44228","description":"` + strings.Repeat("x", 4000) + `"}`)

func setup(b *testing.B, driver, dsn string) *sql.DB {
	b.Helper()
	db, err := sql.Open(driver, dsn)
	if err != nil {
		b.Fatal(err)
	}
	db.SetMaxOpenConns(8)
	for _, q := range []string{`PRAGMA journal_mode=WAL`, `CREATE TABLE records (key INTEGER PRIMARY KEY, body BLOB NOT NULL)`} {
		if _, err := db.Exec(q); err != nil {
			b.Fatal(err)
		}
	}
	tx, _ := db.Begin()
	st, _ := tx.Prepare(`INSERT INTO records (key, body) VALUES (?, ?)`)
	for i := 0; i < rows; i++ {
		if _, err := st.Exec(i, body); err != nil {
			b.Fatal(err)
		}
	}
	st.Close()
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
	return db
}

func BenchmarkPointRead(b *testing.B) {
	for _, d := range []struct{ name, driver, dsn string }{
		{"modernc", "sqlite", "file:%s?_pragma=busy_timeout(5000)"},
		{"mattn-cgo", "sqlite3", "file:%s?_busy_timeout=5000"},
	} {
		b.Run(d.name, func(b *testing.B) {
			db := setup(b, d.driver, fmt.Sprintf(d.dsn, filepath.Join(b.TempDir(), "c.db")))
			defer db.Close()
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				var out []byte
				for pb.Next() {
					if err := db.QueryRow(`SELECT body FROM records WHERE key = ?`, rand.IntN(rows)).Scan(&out); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
