package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/patchline/patchline/internal/catalog"
	"github.com/patchline/patchline/internal/catalog/segments"
)

// The body store is a copy of the record bodies beside the catalog file,
// in the directory of the file's name and bodyStoreSuffix, made for
// reading (package segments): one ReadAt a body instead of SQLite's B-tree
// descent and page reads, about a fifth of the CPU time
// (bench/RESULTS.md). It is derived data, and never more: every commit
// that changes a record gives the catalog a new random generation (the
// triggers of migration 005, in the same transaction), the store's
// manifest names the generation it holds, and reads use it only while the
// two are the same; otherwise they go to SQLite. Each commit of this
// package brings the store up to date after it: a delta segment of the
// records the transaction wrote, or a new base of every record when the
// store was not at the generation the transaction started from (missing,
// damaged, written for another catalog or passed by another program's
// commit) or the deltas would grow too large.
const bodyStoreSuffix = ".bodies"

// storeRetry is how long reads that found no store at the catalog's
// generation go to SQLite before looking for one again.
const storeRetry = 250 * time.Millisecond

// maxTouched bounds the keys a transaction remembers for a delta; a
// transaction that writes more records writes a new base.
const maxTouched = 1 << 20

// bodyFiles keeps the body store that holds the catalog's generation, if
// one does.
type bodyFiles struct {
	dir string
	// mu is held to look for a store; readers that find it held go to
	// SQLite meanwhile.
	mu  sync.Mutex
	cur atomic.Pointer[storeState]
}

// storeState is what bodyFiles knows at a data version of the catalog.
type storeState struct {
	version int64
	gen     int64           // the catalog's generation at version
	store   *segments.Store // holds gen, or nil
	looked  time.Time       // when a store was last looked for
	bad     *segments.Store // the last store a read found damaged
}

func newBodyFiles(path string) *bodyFiles {
	return &bodyFiles{dir: path + bodyStoreSuffix}
}

// at returns the body store that holds the catalog at version, or nil
// when reads are to go to SQLite.
func (b *bodyFiles) at(ctx context.Context, version int64, generation func(context.Context) (int64, error)) *segments.Store {
	if s := b.cur.Load(); s != nil && s.version == version && (s.store != nil || time.Since(s.looked) < storeRetry) {
		return s.store
	}
	if !b.mu.TryLock() {
		return nil
	}
	defer b.mu.Unlock()
	s := b.cur.Load()
	if s == nil {
		s = &storeState{}
	}
	next := &storeState{version: version, gen: s.gen, store: s.store, looked: s.looked, bad: s.bad}
	if s.version != version || s.looked.IsZero() {
		gen, err := generation(ctx)
		if err != nil {
			return nil
		}
		next.gen = gen
	}
	if next.store != nil && next.store.Generation() != next.gen {
		next.store = nil // its files close once no read holds them
	}
	if next.store == nil && (next.gen != s.gen || time.Since(s.looked) >= storeRetry || s.looked.IsZero()) {
		next.looked = time.Now()
		next.store = b.open(next.gen, next.bad)
	}
	b.cur.Store(next)
	return next.store
}

// open opens the store if it holds generation gen and is not bad's.
func (b *bodyFiles) open(gen int64, bad *segments.Store) *segments.Store {
	if g, err := segments.Generation(b.dir); err != nil || g != gen || (bad != nil && bad.Generation() == gen) {
		return nil
	}
	st, err := segments.Open(b.dir)
	if err != nil || st.Generation() != gen {
		return nil
	}
	return st
}

// damaged sets st aside after a read of it failed: reads go to SQLite
// until a store of another generation is written.
func (b *bodyFiles) damaged(st *segments.Store, err error) {
	slog.Warn("record body store damaged: bodies are read from the catalog until the next ingest rewrites it", "dir", b.dir, "err", err)
	b.mu.Lock()
	defer b.mu.Unlock()
	if s := b.cur.Load(); s != nil && s.store == st {
		b.cur.Store(&storeState{version: s.version, gen: s.gen, looked: time.Now(), bad: st})
	}
}

// close closes the store in use.
func (b *bodyFiles) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if s := b.cur.Load(); s != nil && s.store != nil {
		s.store.Close()
	}
	b.cur.Store(nil)
}

// readStore reads the bodies of keys from st.
func readStore(st *segments.Store, keys []int64, fn func(key int64, body []byte)) error {
	for _, k := range keys {
		body, ok, err := st.Read(k, nil)
		if err != nil {
			return err
		}
		if ok {
			fn(k, body)
		}
	}
	return nil
}

// writeBodies brings the body store up to a commit that took the catalog
// from generation from to generation to, writing the records of touched
// (all of them when full): a delta of those records, or a new base. The
// commit stands whatever happens here: a store not written is passed by
// (reads go to SQLite) and written whole by the next commit, and the
// failure is logged.
func (d *DB) writeBodies(ctx context.Context, from, to int64, touched []int64, full bool) {
	if !isFile(d.db.Path) {
		return
	}
	dir := d.db.Path + bodyStoreSuffix
	var err error
	switch {
	case !full && from == to:
		// No record changed: the store is up to date or missing.
		if g, gerr := segments.Generation(dir); gerr == nil && g == to {
			return
		}
		err = d.writeBase(ctx, dir)
	case !full && len(touched) > 0 && !segments.NeedsBase(dir, from, len(touched)):
		err = d.writeDelta(ctx, dir, from, to, touched)
		if errors.Is(err, segments.ErrStale) {
			err = d.writeBase(ctx, dir)
		}
	default:
		err = d.writeBase(ctx, dir)
	}
	if err != nil {
		slog.Warn("record body store not written: bodies are read from the catalog until the next ingest", "dir", dir, "err", err)
	}
}

// errMoved reports a catalog committed to again before the body store of
// the previous commit was written; that commit's writer writes it.
var errMoved = errors.New("the catalog changed again meanwhile")

// writeDelta writes the records of touched, as the commit that made
// generation to left them, as a delta of the store at generation from.
func (d *DB) writeDelta(ctx context.Context, dir string, from, to int64, touched []int64) error {
	keys := slices.Clone(touched)
	slices.Sort(keys)
	keys = slices.Compact(keys)
	return d.inSnapshot(ctx, func(tx *sql.Tx, gen int64) error {
		if gen != to {
			return errMoved
		}
		st, err := tx.PrepareContext(ctx, `SELECT body FROM records WHERE key = ?`)
		if err != nil {
			return err
		}
		defer st.Close()
		return segments.WriteDelta(dir, from, to, func(put segments.Put) error {
			for _, k := range keys {
				var body []byte
				err := st.QueryRowContext(ctx, k).Scan(&body)
				if errors.Is(err, sql.ErrNoRows) {
					body, err = nil, nil
				} else if body == nil {
					body = []byte{} // a stored empty body is no deletion
				}
				if err != nil {
					return err
				}
				if err := put(k, body); err != nil {
					return err
				}
			}
			return nil
		})
	})
}

// writeBase writes a store of every record of the catalog as it is now.
func (d *DB) writeBase(ctx context.Context, dir string) error {
	return d.inSnapshot(ctx, func(tx *sql.Tx, gen int64) error {
		return segments.WriteBase(dir, gen, func(put segments.Put) error {
			return catalog.EachRow(ctx, tx, `SELECT key, body FROM records ORDER BY key`, func(rows *sql.Rows) error {
				var k int64
				var body sql.RawBytes
				if err := rows.Scan(&k, &body); err != nil {
					return err
				}
				if body == nil {
					body = sql.RawBytes{}
				}
				return put(k, body)
			})
		})
	})
}

// inSnapshot calls fn in a read transaction of the catalog, with the
// generation it sees.
func (d *DB) inSnapshot(ctx context.Context, fn func(tx *sql.Tx, gen int64) error) error {
	tx, err := d.db.Read.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var gen int64
	if err := tx.QueryRowContext(ctx, `SELECT n FROM catalog_generation`).Scan(&gen); err != nil {
		return fmt.Errorf("catalog generation: %w", err)
	}
	return fn(tx, gen)
}
