package catalog

import (
	"time"

	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/errs"
)

// SummaryColumns are the columns of the records table that ScanSummary
// reads, in order. Both backends store them alike: missing numbers as -1,
// times as Unix seconds.
const SummaryColumns = `key, cve_id, severity, cvss, cvss_version, epss, is_kev, has_fix, published, modified, rejected`

// ScanSummary scans a row of SummaryColumns (a *sql.Row, *sql.Rows or a
// pgx row) into a summary and its key.
func ScanSummary(row interface{ Scan(...any) error }) (cve.Summary, int64, error) {
	var (
		key                int64
		id                 string
		severity, version  *string
		cvss, epss         float64
		kev, fix, rejected bool
		published, modTime int64
	)
	if err := row.Scan(&key, &id, &severity, &cvss, &version, &epss, &kev, &fix, &published, &modTime, &rejected); err != nil {
		return cve.Summary{}, 0, err
	}
	return SummaryOf(id, severity, cvss, version, epss, kev, fix, published, modTime, rejected), key, nil
}

// SummaryOf returns the summary of the columns of a stored record: missing
// numbers as -1, times as Unix seconds.
func SummaryOf(id string, severity *string, cvss float64, cvssVersion *string, epss float64, kev, fix bool, published, modified int64, rejected bool) cve.Summary {
	s := cve.Summary{CVEID: id, Severity: severity, CVSSVersion: cvssVersion, IsKEV: kev, HasRemediation: fix, Rejected: rejected}
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
	m := time.Unix(modified, 0).UTC()
	s.ModifiedAt = &m
	return s
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

// SortColumns maps a sort key to its column in records. Both stores index
// each on (column, key), so that a page starts with index seeks to the
// position it follows.
var SortColumns = map[string]string{
	cve.SortPublished: "published",
	cve.SortEPSS:      "epss",
	cve.SortCVSS:      "cvss",
	cve.SortFix:       "has_fix",
	cve.SortKEV:       "is_kev",
	cve.SortCVE:       "key",
}

// SortValue is the Position value of a row under a sort key: numbers as
// they are, times as Unix seconds, booleans as 0 or 1, missing values as -1.
func SortValue(sortKey string, s cve.Summary, key int64) float64 {
	switch sortKey {
	case cve.SortEPSS:
		if s.EPSS != nil {
			return *s.EPSS
		}
	case cve.SortCVSS:
		if s.CVSS != nil {
			return *s.CVSS
		}
	case cve.SortFix:
		return boolValue(s.HasRemediation)
	case cve.SortKEV:
		return boolValue(s.IsKEV)
	case cve.SortCVE:
		return float64(key)
	default:
		if s.PublishedAt != nil {
			return float64(s.PublishedAt.Unix())
		}
	}
	return -1
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
