// Package catalog defines the write side of the CVE catalog that every
// storage backend implements, and the ingest transaction built on it: store
// the facts each source gives, then merge the facts of every CVE they touched
// into its served record.
package catalog

import (
	"context"

	"github.com/patchline/patchline/internal/cve"
)

// Store is a catalog backend: the read side the lookup API uses, and write
// transactions for ingest.
type Store interface {
	cve.Catalog
	// Begin starts a write transaction. Everything written through it
	// becomes visible at Commit, all at once, or not at all.
	Begin(ctx context.Context) (Tx, error)
	Close() error
}

// Change says what a write did.
type Change int

// The changes.
const (
	Unchanged Change = iota
	Added
	Changed
)

// Tx is a write transaction of a Store.
type Tx interface {
	// PutFacts stores f under (its CVE, feed, doc) and says whether that
	// added or changed anything.
	PutFacts(ctx context.Context, key int64, f *cve.Facts) (Change, error)
	// PutLifecycle stores the support window of a product release.
	PutLifecycle(ctx context.Context, l *cve.Lifecycle) (Change, error)
	// Facts returns every facts row stored for a CVE key.
	Facts(ctx context.Context, key int64) ([]cve.Facts, error)
	// Lifecycles returns every stored lifecycle.
	Lifecycles(ctx context.Context) ([]cve.Lifecycle, error)
	// RecordState returns the content hash and modification time of a
	// stored record; ok is false when there is none.
	RecordState(ctx context.Context, key int64) (hash []byte, modified int64, ok bool, err error)
	// PutRecord inserts or replaces a served record.
	PutRecord(ctx context.Context, r *Row) error
	// DeleteRecord removes a served record, if any.
	DeleteRecord(ctx context.Context, key int64) error
	// KeysWithAtoms returns the keys of the records that have remediation
	// atoms (whose eol annotations may change with the lifecycles).
	KeysWithAtoms(ctx context.Context) ([]int64, error)
	// LogRun records a finished ingest run.
	LogRun(ctx context.Context, run Run) error
	Commit() error
	Rollback() error
}

// Row is a served record as stored: its list columns and its encoding.
type Row struct {
	Key         int64
	ID          string
	Rejected    bool
	Severity    *string
	CVSS        float64 // -1 when none
	CVSSVersion *string
	EPSS        float64 // -1 when none
	IsKEV       bool
	HasFix      bool
	Published   int64 // Unix seconds, -1 when unknown
	Modified    int64 // Unix seconds
	Hash        []byte
	Body        []byte // JSON of cve.Record without _links
	Description string // indexed for full-text search
}

// EncodedFacts are the facts of one CVE key, feed and doc, in the JSON
// encoding of cve.Facts that PutFacts stores.
type EncodedFacts struct {
	Key       int64
	Feed, Doc string
	Body      []byte
}

// RecordState is what a transaction holds of a stored record: its content
// hash and modification time, when it exists.
type RecordState struct {
	Hash     []byte
	Modified int64
	Exists   bool
}

// Run describes one ingest run.
type Run struct {
	Started, Finished int64 // Unix seconds
	Sources           []SourceCount
	Changed           int // records added or changed
}

// SourceCount counts what one source of a run read and did.
type SourceCount struct {
	Source    string  `json:"source"`
	Location  string  `json:"location"`
	Read      int     `json:"read"`
	Added     int     `json:"added"`
	Changed   int     `json:"changed"`
	Unchanged int     `json:"unchanged"`
	Rejected  int     `json:"rejected"`
	Seconds   float64 `json:"seconds"`
}
