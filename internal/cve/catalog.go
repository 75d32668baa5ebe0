package cve

import (
	"context"
	"time"
)

// Catalog is the read side of the CVE catalog, used by the lookup API.
type Catalog interface {
	// Record returns the record of a canonical id, without _links.
	// It returns errs.ErrNotFound for an id the catalog does not hold.
	Record(ctx context.Context, id string) (*Record, error)

	// RecordJSON returns the stored JSON encoding of a record, without
	// _links (a JSON object, so the caller can append fields before the
	// closing brace). It returns errs.ErrNotFound like Record. The bytes
	// may be shared with other callers: they are read, never changed.
	RecordJSON(ctx context.Context, id string) ([]byte, error)

	// RecordsJSON returns RecordJSON of every id the catalog holds, keyed by
	// id; unknown ids are absent from the map.
	RecordsJSON(ctx context.Context, ids []string) (map[string][]byte, error)

	// List returns one page of summaries matching q, in q's order. It
	// returns errs.ErrInvalid for a query it cannot answer.
	List(ctx context.Context, q ListQuery) (Page, error)

	// Walk calls fn for every record whose id sorts after `after` (all when
	// after is empty), in CVE id order, rejected ones included, until fn
	// returns an error. It holds no more than one row in memory at a time.
	Walk(ctx context.Context, after string, fn func(Summary) error) error

	// Stats returns counts that describe the catalog.
	Stats(ctx context.Context) (Stats, error)
}

// Sort keys of the list endpoint.
const (
	SortPublished = "published"
	SortEPSS      = "epss"
	SortCVSS      = "cvss"
	SortCVE       = "cve"
	SortFix       = "fix"
	SortKEV       = "kev"
)

// ListQuery selects and orders summaries. Zero values mean "no filter".
type ListQuery struct {
	Q          string   // full-text search over id and description
	Severities []string // CRITICAL, HIGH, MEDIUM, LOW
	KEV        *bool
	Fix        *bool
	EPSSMin    *float64
	Years      []int
	Sort       string // one of the Sort constants; "" means SortPublished
	Desc       bool
	Limit      int
	// After, when set, resumes after the row at this position.
	After *Position
}

// Position is where a row stands in a list order: the value of its sort key
// (numbers as they are; times as Unix seconds; booleans as 0 or 1; missing
// values as -1) and its CVE key as the tie-breaker.
type Position struct {
	Value float64
	Key   int64
}

// Page is one page of a list.
type Page struct {
	Rows []Summary
	// Next is the position of the last row when more rows may follow, nil at
	// the end of the list.
	Next *Position
}

// Stats describes the catalog.
type Stats struct {
	Records  int       // served records, rejected ones included
	Rejected int       // records in state REJECTED
	Facts    int       // stored facts rows
	Updated  time.Time // time of the last change, zero for an empty catalog
}
