package catalog

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/patchline/patchline/internal/cve"
)

// SourceRecordsSQL builds the query of cve.SourceCatalog.SourceRecords
// from a store's expressions of a facts body's source name and license:
// the data source name is the feed's, but for the OSV databases and CSAF
// providers, whose facts each name theirs.
func SourceRecordsSQL(nameOfBody, licenseOfBody string) string {
	return `SELECT name, count(DISTINCT key), max(license) FROM (
		SELECT f.key,
			CASE WHEN f.feed IN ('osv', 'csaf') THEN coalesce(` + nameOfBody + `, f.feed) ELSE f.feed END AS name,
			CASE WHEN f.feed IN ('osv', 'csaf') THEN coalesce(` + licenseOfBody + `, '') ELSE '' END AS license
		FROM facts f WHERE EXISTS (SELECT 1 FROM records r WHERE r.key = f.key)
	) AS contributed GROUP BY name ORDER BY name`
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
