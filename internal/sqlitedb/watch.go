package sqlitedb

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// versionWatch asks PRAGMA data_version on a read connection of its own,
// at most once per versionWindow: a caller takes the last answer if its
// question was asked less than versionWindow before the caller came, and
// otherwise waits for the next one. Asking costs a few microseconds; a
// server answering tens of thousands of requests a second would spend a
// core asking it for each.
type versionWatch struct {
	db *sql.DB // one connection

	mu       sync.Mutex
	answered sync.Cond
	conn     *sql.Conn
	stmt     *sql.Stmt // PRAGMA data_version, prepared on conn
	epoch    int64     // of conn
	asking   bool
	asked    time.Time // when the question of the last answer was asked
	version  int64     // the last answer
	err      error
	// last is the last answer too, for the callers that take it without
	// the lock; nil when forgotten.
	last atomic.Pointer[answer]
}

// answer is an answer of PRAGMA data_version and when it was asked.
type answer struct {
	asked   time.Time
	version int64
	err     error
}

// versionWindow is how long an answer of DataVersion serves the callers
// that come after its question was asked: a commit is seen by the
// callers that come a millisecond after it. Tests change it.
var versionWindow = time.Millisecond

// watchEpochs numbers the data version connections of the process.
var watchEpochs atomic.Int64

func newVersionWatch(db *sql.DB) *versionWatch {
	w := &versionWatch{db: db}
	w.answered.L = &w.mu
	return w
}

// get returns the data version as it stood at most versionWindow before
// get was called.
func (w *versionWatch) get(ctx context.Context) (int64, error) {
	came := time.Now()
	// Most callers take the last answer without the lock, which tens of
	// thousands of requests a second would otherwise queue on.
	if a := w.last.Load(); a != nil && a.asked.After(came.Add(-versionWindow)) {
		return a.version, a.err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for !w.asked.After(came.Add(-versionWindow)) {
		if w.asking {
			w.answered.Wait()
			continue
		}
		w.asking = true
		asked := time.Now()
		w.mu.Unlock()
		// The answer is shared: a caller that gives up must not fail it
		// for the others.
		v, err := w.ask(context.WithoutCancel(ctx))
		w.mu.Lock()
		w.asking = false
		w.asked, w.version, w.err = asked, v, err
		w.last.Store(&answer{asked: asked, version: v, err: err})
		w.answered.Broadcast()
	}
	return w.version, w.err
}

// forget makes the next caller ask again.
func (w *versionWatch) forget() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.asked = time.Time{}
	w.last.Store(nil)
}

// ask runs PRAGMA data_version; only one caller at a time.
func (w *versionWatch) ask(ctx context.Context) (int64, error) {
	if w.conn == nil {
		// A new connection counts from its own start: the epoch, new for
		// every connection of the process, keeps their numbers apart.
		conn, err := w.db.Conn(ctx)
		if err != nil {
			return 0, fmt.Errorf("data version: %w", err)
		}
		stmt, err := conn.PrepareContext(ctx, `PRAGMA data_version`)
		if err != nil {
			conn.Close()
			return 0, fmt.Errorf("data version: %w", err)
		}
		w.conn, w.stmt = conn, stmt
		w.epoch = watchEpochs.Add(1)
	}
	var v int64
	if err := w.stmt.QueryRowContext(ctx).Scan(&v); err != nil {
		w.stmt.Close()
		w.conn.Close()
		w.conn, w.stmt = nil, nil
		return 0, fmt.Errorf("data version: %w", err)
	}
	return w.epoch<<40 | v, nil
}

// close closes the connection.
func (w *versionWatch) close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.asking {
		w.answered.Wait()
	}
	if w.conn != nil {
		w.stmt.Close()
		w.conn.Close()
		w.conn, w.stmt = nil, nil
	}
	return w.db.Close()
}
