package catalog

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/patchline/patchline/internal/cve"
)

// The queries of cve.SourceCatalog.SourceRecords, which neither reads a
// facts body: the records of each feed whose facts all name the feed
// itself, and the documents of the feeds whose facts name a database or
// provider of their own (OSV, CSAF), which CountSourceRecords groups by
// the letters their ids start with (GHSA, PYSEC, RHSA …), reading the data
// source of one facts row of each group.
const (
	FeedRecordsSQL = `SELECT f.feed, count(DISTINCT f.key) FROM facts f
		WHERE f.feed NOT IN ('osv', 'csaf') AND EXISTS (SELECT 1 FROM records r WHERE r.key = f.key)
		GROUP BY f.feed`
	SourceDocsSQL = `SELECT f.key, f.feed, f.doc FROM facts f
		WHERE f.feed IN ('osv', 'csaf') AND EXISTS (SELECT 1 FROM records r WHERE r.key = f.key)`
)

// SourceDocs gathers the rows of SourceDocsSQL and counts the records of
// each data source they name.
type SourceDocs struct {
	// keys holds the records of each group of documents, and first one
	// facts row of it.
	keys  map[docGroup]map[int64]struct{}
	first map[docGroup]FactsRow
}

// FactsRow names one facts row.
type FactsRow struct {
	Key       int64
	Feed, Doc string
}

type docGroup struct{ feed, prefix string }

// Add adds one row of SourceDocsSQL.
func (s *SourceDocs) Add(row FactsRow) {
	if s.keys == nil {
		s.keys, s.first = map[docGroup]map[int64]struct{}{}, map[docGroup]FactsRow{}
	}
	letters := row.Doc[:len(row.Doc)-len(strings.TrimLeftFunc(row.Doc, isLetter))]
	g := docGroup{row.Feed, letters}
	if s.keys[g] == nil {
		s.keys[g] = map[int64]struct{}{}
		s.first[g] = row
	}
	s.keys[g][row.Key] = struct{}{}
}

func isLetter(r rune) bool { return ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') }

// Count returns the records of every data source: feeds gives those of the
// feeds that FeedRecordsSQL counts, sourceOf the data source that one
// facts row names.
func (s *SourceDocs) Count(feeds map[string]int, sourceOf func(FactsRow) (cve.DataSource, error)) ([]cve.SourceRecords, error) {
	var out []cve.SourceRecords
	for f, n := range feeds {
		out = append(out, cve.SourceRecords{Name: f, Records: n})
	}
	byName := map[string]map[int64]struct{}{}
	licenses := map[string]string{}
	for g, keys := range s.keys {
		src, err := sourceOf(s.first[g])
		if err != nil {
			return nil, err
		}
		name := cmp.Or(src.Name, g.feed)
		if byName[name] == nil {
			byName[name] = map[int64]struct{}{}
		}
		for k := range keys {
			byName[name][k] = struct{}{}
		}
		licenses[name] = max(licenses[name], src.License)
	}
	for name, keys := range byName {
		out = append(out, cve.SourceRecords{Name: name, License: licenses[name], Records: len(keys)})
	}
	slices.SortFunc(out, func(a, b cve.SourceRecords) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// SourceOfFacts reads the data source a facts body names.
func SourceOfFacts(body []byte) (cve.DataSource, error) {
	var f struct {
		Source cve.DataSource `json:"source"`
	}
	err := json.Unmarshal(body, &f)
	return f.Source, err
}

// SyncLabel starts the location of the ingest runs of a sync in the log of
// runs: "sync:https://services.nvd.nist.gov/rest/json/cves/2.0". The sync
// state of the source, not the run, tells when its data was fetched.
const SyncLabel = "sync:"

// IngestLogSQL reads the log of ingest runs, newest first, for LastIngests.
const IngestLogSQL = `SELECT started, finished, sources FROM ingest_runs ORDER BY id DESC`

// LastIngests collects the newest run of each source from the log of
// ingest runs read newest first.
type LastIngests struct {
	bySource map[string]cve.SourceIngest
}

// Add adds one run of the log: its times (Unix seconds) and its sources
// (the JSON of []SourceCount).
func (l *LastIngests) Add(started, finished int64, sources string) error {
	var counts []SourceCount
	if err := json.Unmarshal([]byte(sources), &counts); err != nil {
		return fmt.Errorf("ingest run of %d: %w", started, err)
	}
	if l.bySource == nil {
		l.bySource = map[string]cve.SourceIngest{}
	}
	for _, c := range counts {
		if _, seen := l.bySource[c.Source]; seen {
			continue
		}
		l.bySource[c.Source] = cve.SourceIngest{
			Source: c.Source, Location: c.Location,
			Started: TimeOrZero(started), Finished: TimeOrZero(finished),
			Read: c.Read, Added: c.Added, Changed: c.Changed, Rejected: c.Rejected,
		}
	}
	return nil
}

// Result returns the newest run of each source, by source name.
func (l *LastIngests) Result() []cve.SourceIngest {
	out := make([]cve.SourceIngest, 0, len(l.bySource))
	for _, s := range l.bySource {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b cve.SourceIngest) int { return strings.Compare(a.Source, b.Source) })
	return out
}
