package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"

	"github.com/patchline/patchline/internal/sqlitedb"
)

// Record bodies are the catalog's hottest read: every GET by id of a record
// not in the record cache, and every batch. They are read on connections
// of their own, each with its statement prepared once and run through the
// driver's own interfaces: database/sql would take a connection from the
// shared pool, build its Rows and copy each body once more (that copy
// alone was a tenth of the read's CPU time; bench/RESULTS.md, 2026-11-25).
const (
	// bodyReaders is the number of those connections: reads are short and
	// need no more than the cores that run them.
	bodyReaders = 4
	// bodyCacheKiB is the page cache of each: enough for the inner pages
	// of the records table; the pages of the bodies themselves are seldom
	// read twice.
	bodyCacheKiB = 1024
)

// bodyQuery reads the stored id and body of a record by key.
const bodyQuery = `SELECT cve_id, body FROM records WHERE key = ?`

// bodyPool lends body readers, one caller at a time each.
type bodyPool struct {
	db   *sql.DB
	free chan *bodyReader // a nil reader is a connection not opened yet
}

// bodyReader is a connection with bodyQuery prepared on it.
type bodyReader struct {
	conn  *sql.Conn
	stmt  driver.Stmt
	query driver.StmtQueryContext
	args  [1]driver.NamedValue
	dest  [2]driver.Value
}

func newBodyPool(db *sqlitedb.DB) (*bodyPool, error) {
	r, err := db.OpenReaders(bodyReaders, bodyCacheKiB)
	if err != nil {
		return nil, err
	}
	p := &bodyPool{db: r, free: make(chan *bodyReader, bodyReaders)}
	for range bodyReaders {
		p.free <- nil
	}
	return p, nil
}

// get takes a reader, opening its connection if needed.
func (p *bodyPool) get(ctx context.Context) (*bodyReader, error) {
	var r *bodyReader
	select {
	case r = <-p.free:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if r != nil {
		return r, nil
	}
	r, err := openBodyReader(ctx, p.db)
	if err != nil {
		p.free <- nil
		return nil, err
	}
	return r, nil
}

// put gives r back; a reader whose read failed (broken) is closed, and its
// connection opened again by the next get.
func (p *bodyPool) put(r *bodyReader, broken bool) {
	if broken {
		r.close()
		r = nil
	}
	p.free <- r
}

// close closes the readers once they are given back.
func (p *bodyPool) close() error {
	for range bodyReaders {
		if r := <-p.free; r != nil {
			r.close()
		}
	}
	return p.db.Close()
}

func openBodyReader(ctx context.Context, db *sql.DB) (*bodyReader, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	r := &bodyReader{conn: conn}
	err = conn.Raw(func(dc any) error {
		c, ok := dc.(driver.ConnPrepareContext)
		if !ok {
			return fmt.Errorf("driver connection %T cannot prepare", dc)
		}
		st, err := c.PrepareContext(ctx, bodyQuery)
		if err != nil {
			return err
		}
		if r.query, ok = st.(driver.StmtQueryContext); !ok {
			st.Close()
			return fmt.Errorf("driver statement %T cannot query", st)
		}
		r.stmt = st
		return nil
	})
	if err != nil {
		conn.Close()
		return nil, err
	}
	r.args[0].Ordinal = 1
	return r, nil
}

// read returns the stored id and body of key; found is false when the
// catalog has no record of key. The body is the reader's own copy.
func (r *bodyReader) read(ctx context.Context, key int64) (id string, body []byte, found bool, err error) {
	err = r.conn.Raw(func(any) error {
		r.args[0].Value = key
		rows, err := r.query.QueryContext(ctx, r.args[:])
		if err != nil {
			return err
		}
		err = rows.Next(r.dest[:])
		cerr := rows.Close()
		switch {
		case errors.Is(err, io.EOF):
			return cerr
		case err != nil:
			return err
		case cerr != nil:
			return cerr
		}
		var ok1, ok2 bool
		id, ok1 = r.dest[0].(string)
		body, ok2 = r.dest[1].([]byte)
		if !ok1 || !ok2 {
			return fmt.Errorf("record %d: stored as %T, %T", key, r.dest[0], r.dest[1])
		}
		found = true
		return nil
	})
	r.dest = [2]driver.Value{}
	return id, body, found, err
}

// readAll reads the records of keys, in one read transaction when there
// are several, and hands each found to fn.
func (r *bodyReader) readAll(ctx context.Context, keys []int64, fn func(key int64, id string, body []byte)) error {
	if len(keys) > 1 {
		if _, err := r.conn.ExecContext(ctx, `BEGIN`); err != nil {
			return err
		}
	}
	for _, key := range keys {
		id, body, found, err := r.read(ctx, key)
		if err != nil {
			return err // the caller closes the connection, and the transaction with it
		}
		if found {
			fn(key, id, body)
		}
	}
	if len(keys) > 1 {
		if _, err := r.conn.ExecContext(ctx, `COMMIT`); err != nil {
			return err
		}
	}
	return nil
}

func (r *bodyReader) close() {
	r.conn.Raw(func(any) error { return r.stmt.Close() })
	r.conn.Close()
}
