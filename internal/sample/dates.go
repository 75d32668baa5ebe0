package sample

import "time"

// Label starts the location of the sample's feeds in the log of ingest
// runs: "sample:kev".
const Label = "sample:"

// dates are the dates of the sample's data by feed, as each folder's
// SOURCE.md states them: the commit or snapshot the files were copied from,
// or, where SOURCE.md names none, the day they were retrieved.
var dates = map[string]string{
	"cvelist": "2025-01-24", // cisagov/vulnrichment commit
	"nvd":     "2026-08-21", // newest fixture commit
	"kev":     "2025-08-25", // catalogVersion 2025.08.25
	"epss":    "2026-08-16", // EPSS-data commit
	"osv":     "2026-11-21", // retrieved
	"debian":  "2026-08-21", // newest fixture commit
	"msrc":    "2026-07-06", // msrc-cvrf-watch snapshot
	"eol":     "2026-11-21", // retrieved
}

// Date returns the date of the sample's data of a feed (midnight UTC);
// ok is false for a feed the sample does not hold.
func Date(feed string) (time.Time, bool) {
	d, ok := dates[feed]
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(time.DateOnly, d)
	return t, err == nil
}
