package catalog

import (
	"cmp"
	"database/sql"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode"

	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/errs"
)

// What both stores share of reading the catalog, whatever their driver:
// the checks of a list query, the words of a search, and the decoding of
// stored rows. Lists are the summary index's (summaries.go); each store
// makes its own full-text query of a search's words: SQLite's of an FTS5
// table, PostgreSQL's of a tsvector column.

// DefaultListLimit is the page size of a list without a limit.
const DefaultListLimit = 50

// MaxListLimit is the largest page size of a list.
const MaxListLimit = 1000

// MaxSearchTerms bounds the words of a search.
const MaxSearchTerms = 32

// listPlan is a list query checked and resolved: its sort column, page
// size and the engine's query of its search. The summary index
// (summarylist.go) answers it.
type listPlan struct {
	Col   string // sort column
	Desc  bool
	Limit int
	// Match is the engine's full-text query of the search, "" without one.
	Match string
	// Empty says that no record can match.
	Empty bool
}

// sortColumns maps a sort key to its column in records.
var sortColumns = map[string]string{
	cve.SortPublished: "published",
	cve.SortEPSS:      "epss",
	cve.SortCVSS:      "cvss",
	cve.SortFix:       "has_fix",
	cve.SortKEV:       "is_kev",
	cve.SortCVE:       "key",
}

// newListPlan returns the plan of q, its search made the engine's query by
// search (which returns "" when nothing can match). It returns
// errs.ErrInvalid for an unknown sort key, a limit out of bounds, an
// unknown severity, an epss_min that is not a number and a search of too
// many words.
func newListPlan(q cve.ListQuery, search func(text string) (string, error)) (*listPlan, error) {
	col, ok := sortColumns[cmp.Or(q.Sort, cve.SortPublished)]
	if !ok {
		return nil, errs.Invalidf("unknown sort key %q", q.Sort)
	}
	if q.Limit < 0 || q.Limit > MaxListLimit {
		return nil, errs.Invalidf("limit must be between 1 and %d, got %d", MaxListLimit, q.Limit)
	}
	for _, s := range q.Severities {
		switch s {
		case cve.SeverityCritical, cve.SeverityHigh, cve.SeverityMedium, cve.SeverityLow, cve.SeverityNone:
		default:
			return nil, errs.Invalidf("unknown severity %q", s)
		}
	}
	if q.EPSSMin != nil && math.IsNaN(*q.EPSSMin) {
		return nil, errs.Invalidf("epss_min is not a number")
	}
	p := &listPlan{Col: col, Desc: q.Desc, Limit: cmp.Or(q.Limit, DefaultListLimit)}
	if strings.TrimSpace(q.Q) != "" {
		var err error
		if p.Match, err = search(q.Q); err != nil {
			return nil, err
		}
		p.Empty = p.Match == ""
	}
	return p, nil
}

// yearKeys returns the range of CVE keys of the ids of year y, lo
// included and hi not: a key order can seek it.
func yearKeys(y int) (lo, hi int64) {
	lo, _ = cve.Key(fmt.Sprintf("CVE-%04d-0000", y))
	hi, _ = cve.Key(fmt.Sprintf("CVE-%04d-0000", y+1))
	return lo, hi
}

// SearchWords returns the words of a search that can match: those with a
// letter or a digit. It returns errs.ErrInvalid for more than
// MaxSearchTerms words.
func SearchWords(text string) ([]string, error) {
	words := strings.Fields(text)
	if len(words) > MaxSearchTerms {
		return nil, errs.Invalidf("q has more than %d words", MaxSearchTerms)
	}
	return slices.DeleteFunc(words, func(w string) bool { return !strings.ContainsFunc(w, IsTokenRune) }), nil
}

// IsTokenRune reports whether r belongs to a token of the search index: a
// letter or a digit.
func IsTokenRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsNumber(r) }

// RecordKey returns the key of the record of id, errs.ErrNotFound when id
// is not a CVE id.
func RecordKey(id string) (int64, error) {
	key, ok := cve.Key(id)
	if !ok {
		return 0, errs.NotFoundf("%s is not in the catalog", id)
	}
	return key, nil
}

// ScanKeyedBodies reads rows of a key and a body, ordered by key, into
// out[i] for the rows of keys[i]; keys are ascending, and rows of other
// keys are passed over.
func ScanKeyedBodies(rows *sql.Rows, keys []int64) ([][][]byte, error) {
	out := make([][][]byte, len(keys))
	i := 0
	for rows.Next() {
		var key int64
		var body []byte
		if err := rows.Scan(&key, &body); err != nil {
			return nil, err
		}
		for i < len(keys) && keys[i] < key {
			i++
		}
		if i < len(keys) && keys[i] == key {
			out[i] = append(out[i], body)
		}
	}
	return out, rows.Err()
}

// ScanSyncState reads a row of SyncColumns.
func ScanSyncState(row interface{ Scan(...any) error }) (SyncState, error) {
	var (
		s                          SyncState
		attempt, success, nextTime int64
		changed, failures          int64
	)
	err := row.Scan(&s.Source, &attempt, &success, &s.Cursor, &s.ETag, &s.LastModified,
		&changed, &s.Error, &failures, &nextTime)
	if err != nil {
		return s, err
	}
	s.RecordsChanged, s.Failures = int(changed), int(failures)
	s.LastAttempt, s.LastSuccess, s.NextAttempt = TimeOrZero(attempt), TimeOrZero(success), TimeOrZero(nextTime)
	return s, nil
}
