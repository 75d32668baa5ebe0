package postgres

import (
	"embed"
	"time"

	"github.com/patchline/patchline/internal/pgdb"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Advisory lock keys of the catalog, per database. Their high bytes spell
// "patchln", so that they stay clear of other applications' keys.
const (
	// migrationLock is held by the transaction that applies a migration.
	migrationLock int64 = 0x70617463686c6e01
	// ingestLock is held by an ingest transaction from Begin to its end.
	ingestLock int64 = 0x70617463686c6e02
)

// migrations are the catalog's, recorded in a table named after the store
// (so that the catalog and the control store may share a database) with
// Unix seconds.
var migrations = pgdb.Migrations{
	Files: migrationFiles, Dir: "migrations", Table: "catalog_migrations", Lock: migrationLock,
	Applied: func() int64 { return time.Now().Unix() },
}
