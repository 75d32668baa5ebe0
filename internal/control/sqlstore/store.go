// Package sqlstore implements the control store once, over database/sql,
// for SQLite (modernc.org/sqlite, one database file beside one serve
// process) and PostgreSQL (pgx through its database/sql adapter, one
// database shared by any number of serve replicas): agents, commands,
// rings, rollouts, policies, enrollment secrets, API keys, administrators,
// console sessions, the audit log and the exposure of the fleet.
//
// Both engines keep the same tables and columns (times in Unix
// milliseconds, JSON as text written byte for byte, text ordered bytewise),
// so one set of queries serves both, and a copy between them is exact. The
// queries are written with ? placeholders; on PostgreSQL each query text is
// rewritten to $1, $2 … once, and the rewrite kept. What truly differs
// between the engines is one dialect value, in sqlite.go and postgres.go:
//
//   - Concurrency. SQLite has a single writer: writes go through one
//     connection whose transactions begin IMMEDIATE, so writers queue on
//     the database lock, and reads use a pool of read-only connections.
//     PostgreSQL serves several replicas at once: writes that read before
//     they write lock the rows they read (FOR NO KEY UPDATE), queued
//     commands are taken FOR UPDATE SKIP LOCKED, audit appends and the
//     first administrator take advisory locks, and a transaction the server
//     ends for a deadlock or a serialization failure is run again, so each
//     write function sets its results anew on every run. On SQLite the
//     locking clauses are empty and the locks are the write lock itself.
//   - Small differences of SQL: JSON functions, the queue order of commands
//     (SQLite's rowid, PostgreSQL's seq), a random token, greatest/max.
//   - Text: PostgreSQL's text holds valid UTF-8 without NUL, so string
//     arguments are made storable there (invalid bytes become U+FFFD).
//   - Speed, where a profile showed it pays: on SQLite the statements of
//     check-ins, audit appends and exposure updates are prepared once at
//     Open, check-ins that arrive together commit together
//     (sqlite_checkin.go), and the usual check-in leaves the indexed
//     columns alone (sqlCheckInSame); on PostgreSQL rows of bulk inserts
//     go in multi-row statements, a round trip each, and an audit append
//     takes its lock and reads the head of the chain in one.
//
// One implementation was chosen over generating two from one SQL source:
// the queries are built from filters at run time, and the few differences
// read best as the dialect's named fields at the places they apply. It is
// one package rather than sqlite and postgres packages over a shared one:
// what is engine-specific is small (sqlite.go and postgres.go, which open
// the database and define the dialect, and sqlite_checkin.go), and callers
// pick the engine with OpenSQLite or OpenPostgres.
//
// Schema migrations are one numbered history per engine, embedded
// (migrations/sqlite, migrations/postgres), applied at Open, each in its
// own transaction; schema_test.go checks that both histories create the
// same tables, columns, keys and indexes.
package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/patchline/patchline/internal/admin"
	"github.com/patchline/patchline/internal/apikey"
	"github.com/patchline/patchline/internal/audit"
	"github.com/patchline/patchline/internal/control"
	"github.com/patchline/patchline/internal/device"
	"github.com/patchline/patchline/internal/exposure"
)

// Store is the control store on one SQLite or PostgreSQL database.
type Store struct {
	d   *dialect
	db  *sql.DB // reads
	wdb *sql.DB // writes: on SQLite one connection, on PostgreSQL db

	// prepared are statements prepared at Open by their query text: on
	// wdb for writes and on db for reads (SQLite only).
	prepared, preparedRead map[string]*sql.Stmt

	// checkIns, when not nil, hands check-ins to the loop that commits
	// them in groups (SQLite).
	checkIns  chan *checkInRequest
	quit      chan struct{} // closed by Close
	loops     sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
	// closers close db and wdb, and what they stand on.
	closers []func() error

	// source is the path or DSN the store was opened on.
	source string

	// Now returns the current time; tests replace it.
	Now func() time.Time
}

var (
	_ device.AgentStore        = (*Store)(nil)
	_ device.CommandStore      = (*Store)(nil)
	_ device.RingStore         = (*Store)(nil)
	_ device.RolloutStore      = (*Store)(nil)
	_ device.PolicyStore       = (*Store)(nil)
	_ device.EnrollSecretStore = (*Store)(nil)
	_ apikey.KeyStore          = (*Store)(nil)
	_ admin.Store              = (*Store)(nil)
	_ admin.SessionStore       = (*Store)(nil)
	_ admin.TOTPStore          = (*Store)(nil)
	_ admin.FirstAdminCreator  = (*Store)(nil)
	_ audit.Log                = (*Store)(nil)
	_ exposure.Store           = (*Store)(nil)
	_ control.Store            = (*Store)(nil)
)

// dialect is what differs between the engines.
type dialect struct {
	// rebind turns the ? placeholders of a query into the engine's.
	rebind func(query string) string
	// arg makes an argument storable.
	arg func(v any) any
	// text makes a string storable, as arg does.
	text func(s string) string

	// lockRow ends a SELECT of rows the transaction will update.
	lockRow string
	// skipLocked ends the SELECT of the queued commands a check-in takes.
	skipLocked string
	// ilike matches without regard to ASCII case.
	ilike string
	// queueOrder orders commands as they were queued.
	queueOrder string
	// token is an expression of a random token.
	token string
	// greatest is the function of the larger of its arguments.
	greatest string
	// jsonField returns the expression of the text of key of the JSON
	// object in col, jsonLength the length of the JSON array in col.
	jsonField  func(col, key string) string
	jsonLength func(col string) string

	// auditHead selects the id and hash of the last entry of the audit
	// log, once the transaction holds the lock of appends.
	auditHead string
	// lock takes the transaction-scoped advisory lock key (and sub when not
	// ""); nil where the write lock serializes every writer.
	lock func(ctx context.Context, q querier, key int64, sub string) error
	// readOpts are the options of a read transaction.
	readOpts *sql.TxOptions
	// isUnique reports whether err violates a UNIQUE or PRIMARY KEY
	// constraint, and returns words that name it.
	isUnique func(err error) (string, bool)
	// retryable reports whether a transaction ended by err may succeed if
	// run again.
	retryable func(err error) bool
	// unwatched runs statements of a few microseconds without watching
	// their context, which costs more than they do.
	unwatched bool
	// queuedCommands is sqlQueuedCommands of the dialect.
	queuedCommands string
	// multiRow inserts rows of bulk inserts in statements of several
	// rows, rather than one prepared statement per row.
	multiRow bool
	// checkInSame tries sqlCheckInSame before sqlCheckIn.
	checkInSame bool
}

// lockOf is lockRow for the rows of one table of a join.
func (d *dialect) lockOf(table string) string {
	if d.lockRow == "" {
		return ""
	}
	return d.lockRow + " OF " + table
}

// Close closes the database; calls after the first return its error.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		close(s.quit)
		s.loops.Wait()
		var errList []error
		for _, st := range s.prepared {
			errList = append(errList, st.Close())
		}
		for _, st := range s.preparedRead {
			errList = append(errList, st.Close())
		}
		for _, c := range s.closers {
			errList = append(errList, c())
		}
		s.closeErr = errors.Join(errList...)
	})
	return s.closeErr
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	return s.db.PingContext(ctx)
}

// prepare prepares queries on db by their text.
func prepare(ctx context.Context, db *sql.DB, d *dialect, queries ...string) (map[string]*sql.Stmt, error) {
	out := make(map[string]*sql.Stmt, len(queries))
	for _, q := range queries {
		q = d.rebind(q)
		st, err := db.PrepareContext(ctx, q)
		if err != nil {
			for _, st := range out {
				st.Close()
			}
			return nil, err
		}
		out[q] = st
	}
	return out, nil
}

// maxAttempts bounds the runs of a write transaction that the server ended
// for a deadlock or a serialization failure.
const maxAttempts = 4

// write runs fn in a write transaction and commits it when fn returns nil.
// A transaction the server aborts to break a deadlock is run again: fn must
// set its results anew on every run.
func (s *Store) write(ctx context.Context, fn func(tx querier) error) error {
	for attempt := 1; ; attempt++ {
		err := s.writeOnce(ctx, fn)
		if attempt < maxAttempts && s.d.retryable(err) && ctx.Err() == nil {
			time.Sleep(time.Duration(attempt) * 5 * time.Millisecond)
			continue
		}
		return err
	}
}

func (s *Store) writeOnce(ctx context.Context, fn func(tx querier) error) error {
	tx, err := s.wdb.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := fn(&runner{raw: tx, tx: tx, d: s.d, stmts: s.prepared}); err != nil {
		return err
	}
	return tx.Commit()
}

// read runs fn in a read-only transaction that sees one snapshot.
func (s *Store) read(ctx context.Context, fn func(tx querier) error) error {
	tx, err := s.db.BeginTx(ctx, s.d.readOpts)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	return fn(&runner{raw: tx, tx: tx, d: s.d, stmts: s.preparedRead})
}

// writeResult is write of a transaction with a result, readResult read of
// one: the result of fn's last run, the zero value with an error.
func writeResult[T any](ctx context.Context, s *Store, fn func(tx querier) (T, error)) (T, error) {
	return result(ctx, s.write, fn)
}

func readResult[T any](ctx context.Context, s *Store, fn func(tx querier) (T, error)) (T, error) {
	return result(ctx, s.read, fn)
}

func result[T any](ctx context.Context, run func(context.Context, func(querier) error) error, fn func(tx querier) (T, error)) (T, error) {
	var out T
	err := run(ctx, func(tx querier) (err error) {
		out, err = fn(tx)
		return err
	})
	if err != nil {
		var zero T
		return zero, err
	}
	return out, nil
}

// rq returns the querier of single reads and writes outside a transaction:
// a write in one statement needs no transaction of its own.
func (s *Store) rq() querier {
	return &runner{raw: s.db, d: s.d, stmts: s.preparedRead}
}

// wq returns the querier of a write of one statement.
func (s *Store) wq() querier {
	return &runner{raw: s.wdb, d: s.d, stmts: s.prepared}
}

// querier runs queries written with ? placeholders, in a transaction or
// not.
type querier interface {
	Exec(ctx context.Context, query string, args ...any) (sql.Result, error)
	Query(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRow(ctx context.Context, query string, args ...any) *sql.Row
}

// scanner is what *sql.Row and *sql.Rows have in common.
type scanner = interface {
	Scan(dest ...any) error
}

// execer is what *sql.DB and *sql.Tx have in common.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// runner is the querier of the store: it rebinds each query for the
// engine, makes its arguments storable, and runs the statements prepared
// at Open as such.
type runner struct {
	raw   execer
	tx    *sql.Tx // of raw, nil outside a transaction
	d     *dialect
	stmts map[string]*sql.Stmt
	inTx  map[string]*sql.Stmt // of stmts, bound to tx
}

// prepare returns the query for the engine, its arguments, and its
// prepared statement when there is one.
func (r *runner) prepare(ctx context.Context, query string, args []any) (string, []any, *sql.Stmt) {
	query = r.d.rebind(query)
	if r.d.arg != nil {
		for i, a := range args {
			args[i] = r.d.arg(a)
		}
	}
	st, ok := r.stmts[query]
	if !ok {
		return query, args, nil
	}
	if r.tx == nil {
		return query, args, st
	}
	if bound, ok := r.inTx[query]; ok {
		return query, args, bound
	}
	if r.inTx == nil {
		r.inTx = map[string]*sql.Stmt{}
	}
	st = r.tx.StmtContext(ctx, st)
	r.inTx[query] = st
	return query, args, st
}

// Exec implements querier.
func (r *runner) Exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	query, args, st := r.prepare(ctx, query, args)
	if st != nil {
		return st.ExecContext(ctx, args...)
	}
	return r.raw.ExecContext(ctx, query, args...)
}

// Query implements querier.
func (r *runner) Query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	query, args, st := r.prepare(ctx, query, args)
	if st != nil {
		return st.QueryContext(ctx, args...)
	}
	return r.raw.QueryContext(ctx, query, args...)
}

// QueryRow implements querier.
func (r *runner) QueryRow(ctx context.Context, query string, args ...any) *sql.Row {
	query, args, st := r.prepare(ctx, query, args)
	if st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return r.raw.QueryRowContext(ctx, query, args...)
}

// lock takes an advisory lock where the engine has them.
func (s *Store) lock(ctx context.Context, q querier, key int64, sub string) error {
	if s.d.lock == nil {
		return nil
	}
	return s.d.lock(ctx, q, key, sub)
}

// Advisory lock keys of the control store, per database. Their high bytes
// spell "patchln" like the catalog's, whose keys end in 01 and 02.
const (
	// migrationLock is held by the transaction that applies a migration.
	migrationLock int64 = 0x70617463686c6e11
	// auditLock is held by an audit append from reading the head of the
	// chain to its commit (migrations/postgres/004_audit_head.sql).
	auditLock int64 = 0x70617463686c6e12
	// firstAdminLock is held by the creation of the first administrator.
	firstAdminLock int64 = 0x70617463686c6e13
	// exposureLock, with the agent's id, is the lock of one agent's
	// exposure, held by PutExposure.
	exposureLock int64 = 0x70636c12
)

// doNothing is the conflict clause of inserts that keep the stored row.
const doNothing = `ON CONFLICT DO NOTHING`

// insertOne returns the statement that inserts one row of n columns cols
// into table, ending in the conflict clause.
func insertOne(table, cols string, n int, conflict string) string {
	return `INSERT INTO ` + table + ` (` + cols + `) VALUES (` + placeholders(n) + `) ` + conflict
}

// insertRows inserts rows into table (columns cols), their conflicts with
// stored rows resolved by the conflict clause: in one statement per row
// (prepared at Open on SQLite, see exposureQueries), or in statements of
// many rows where the dialect says so. Rows must not conflict among
// themselves.
func (s *Store) insertRows(ctx context.Context, q querier, table, cols, conflict string, rows [][]any) error {
	if len(rows) == 0 {
		return nil
	}
	n := len(rows[0])
	if !s.d.multiRow {
		query := insertOne(table, cols, n, conflict)
		for _, r := range rows {
			if _, err := q.Exec(ctx, query, r...); err != nil {
				return err
			}
		}
		return nil
	}
	per := max(1, 1000/n)
	for len(rows) > 0 {
		k := min(len(rows), per)
		args := make([]any, 0, k*n)
		for _, r := range rows[:k] {
			args = append(args, r...)
		}
		one := `(` + placeholders(n) + `)`
		query := `INSERT INTO ` + table + ` (` + cols + `) VALUES ` + strings.TrimSuffix(strings.Repeat(one+`, `, k), `, `) + ` ` + conflict
		if _, err := q.Exec(ctx, query, args...); err != nil {
			return err
		}
		rows = rows[k:]
	}
	return nil
}

// eachRow runs query and calls fn with each of its rows; an error of fn
// ends the rows and is returned.
func eachRow(ctx context.Context, q querier, fn func(scanner) error, query string, args ...any) error {
	rows, err := q.Query(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// queryAll runs query and returns its rows as scan reads them.
func queryAll[T any](ctx context.Context, q querier, scan func(scanner) (T, error), query string, args ...any) ([]T, error) {
	var out []T
	err := eachRow(ctx, q, func(row scanner) error {
		v, err := scan(row)
		if err != nil {
			return err
		}
		out = append(out, v)
		return nil
	}, query, args...)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// findOne returns the row of query (whose one argument is id) that scan
// reads, and an error naming what when there is none.
func findOne[T any](ctx context.Context, q querier, scan func(scanner) (T, error), what, id, query string) (T, error) {
	v, err := scan(q.QueryRow(ctx, query, id))
	if errors.Is(err, sql.ErrNoRows) {
		return v, notFound(what, id)
	}
	return v, err
}

// scanString reads a row of one text column.
func scanString(row scanner) (string, error) {
	var v string
	err := row.Scan(&v)
	return v, err
}

// rowsAffected returns the rows a statement changed.
func rowsAffected(res sql.Result) int64 {
	n, _ := res.RowsAffected()
	return n
}

// args collects the arguments of a query built from a filter.
type args []any

// add appends v and returns its placeholder. The placeholders of a query
// must be added in the order they appear in it.
func (a *args) add(v any) string {
	*a = append(*a, v)
	return "?"
}

// selectWhere returns sel, a SELECT … FROM …, with the conditions of where
// (ANDed), ORDER BY order and, when limit > 0, a LIMIT whose argument it
// adds: the last placeholder of the query.
func (a *args) selectWhere(sel string, where []string, order string, limit int) string {
	if len(where) > 0 {
		sel += ` WHERE ` + strings.Join(where, ` AND `)
	}
	sel += ` ORDER BY ` + order
	if limit > 0 {
		sel += ` LIMIT ` + a.add(limit)
	}
	return sel
}

// in appends vs and returns the list of their placeholders, in
// parentheses.
func in[T any](a *args, vs []T) string {
	for _, v := range vs {
		*a = append(*a, v)
	}
	return `(` + placeholders(len(vs)) + `)`
}

// placeholders returns "?, ?, ?" for n values.
func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

// ms converts a time to the stored Unix milliseconds.
func ms(t time.Time) int64 { return t.UnixMilli() }

// msPtr converts an optional time to a nullable column value.
func msPtr(t *time.Time) *int64 {
	if t == nil {
		return nil
	}
	v := t.UnixMilli()
	return &v
}

// fromMS converts stored Unix milliseconds to a UTC time.
func fromMS(v int64) time.Time { return time.UnixMilli(v).UTC() }

// fromNullMS converts a nullable column to an optional time.
func fromNullMS(v *int64) *time.Time {
	if v == nil {
		return nil
	}
	t := fromMS(*v)
	return &t
}

// nullString turns "" into NULL.
func nullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// nullJSON encodes v for a JSON column, nil as NULL.
func nullJSON[T any](v *T) (*string, error) {
	if v == nil {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return nullBytes(b), nil
}

// nullBytes turns an empty JSON value into NULL.
func nullBytes(b []byte) *string {
	if len(b) == 0 {
		return nil
	}
	v := string(b)
	return &v
}

// str returns the string of a nullable column, "" for NULL.
func str(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
