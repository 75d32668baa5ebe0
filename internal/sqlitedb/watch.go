package sqlitedb

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"sync/atomic"
)

// versionWatch asks PRAGMA data_version on a read connection of its own.
// Callers that arrive while it asks wait for the next answer rather than
// each asking in turn: an answer taken after a caller arrived tells it of
// every commit before it arrived, which is what it needs.
type versionWatch struct {
	db *sql.DB // one connection

	mu       sync.Mutex
	answered sync.Cond
	conn     *sql.Conn
	epoch    int64 // of conn
	asking   bool
	next     int64 // the number the next question gets
	done     int64 // the number of the last question answered
	version  int64 // its answer
	err      error
}

// watchEpochs numbers the data version connections of the process.
var watchEpochs atomic.Int64

func newVersionWatch(db *sql.DB) *versionWatch {
	w := &versionWatch{db: db, next: 1}
	w.answered.L = &w.mu
	return w
}

// get returns the data version as it stands after get was called.
func (w *versionWatch) get(ctx context.Context) (int64, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	need := w.next // the first question asked after this call
	for w.done < need {
		if w.asking {
			w.answered.Wait()
			continue
		}
		w.asking = true
		n := w.next
		w.next++
		w.mu.Unlock()
		// The answer is shared: a caller that gives up must not fail it
		// for the others.
		v, err := w.ask(context.WithoutCancel(ctx))
		w.mu.Lock()
		w.asking = false
		w.done, w.version, w.err = n, v, err
		w.answered.Broadcast()
	}
	return w.version, w.err
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
		w.conn = conn
		w.epoch = watchEpochs.Add(1)
	}
	var v int64
	if err := w.conn.QueryRowContext(ctx, `PRAGMA data_version`).Scan(&v); err != nil {
		w.conn.Close()
		w.conn = nil
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
		w.conn.Close()
		w.conn = nil
	}
	return w.db.Close()
}
