package catalog

import (
	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/errs"
)

// walkStart returns the key a walk starts after: -1 for an empty after (the
// whole catalog), the key of a CVE id otherwise, or an errs.ErrInvalid
// error.
func walkStart(after string) (int64, error) {
	if after == "" {
		return -1, nil
	}
	k, ok := cve.Key(after)
	if !ok {
		return 0, errs.Invalidf("after: %q is not a CVE id", after)
	}
	return k, nil
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
