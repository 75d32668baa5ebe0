package catalog

import (
	"time"

	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/errs"
)

// SummaryColumns are the columns of the records table that ScanSummary
// reads, in order. Both backends store them alike: missing numbers as -1,
// times as Unix seconds.
const SummaryColumns = `key, cve_id, severity, cvss, cvss_version, epss, is_kev, has_fix, published, modified`

// ScanSummary scans a row of SummaryColumns (a *sql.Row, *sql.Rows or a
// pgx row) into a summary and its key.
func ScanSummary(row interface{ Scan(...any) error }) (cve.Summary, int64, error) {
	var (
		s                  cve.Summary
		key                int64
		cvss, epss         float64
		published, modTime int64
	)
	if err := row.Scan(&key, &s.CVEID, &s.Severity, &cvss, &s.CVSSVersion, &epss, &s.IsKEV, &s.HasRemediation, &published, &modTime); err != nil {
		return s, 0, err
	}
	if cvss >= 0 {
		s.CVSS = &cvss
	}
	if epss >= 0 {
		s.EPSS = &epss
	}
	if published >= 0 {
		t := time.Unix(published, 0).UTC()
		s.PublishedAt = &t
	}
	m := time.Unix(modTime, 0).UTC()
	s.ModifiedAt = &m
	return s, key, nil
}

// WalkStart returns the key a walk starts after: -1 for an empty after (the
// whole catalog), the key of a CVE id otherwise, or an errs.ErrInvalid
// error.
func WalkStart(after string) (int64, error) {
	if after == "" {
		return -1, nil
	}
	k, ok := cve.Key(after)
	if !ok {
		return 0, errs.Invalidf("after: %q is not a CVE id", after)
	}
	return k, nil
}
