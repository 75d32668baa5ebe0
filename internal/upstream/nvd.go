package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"time"
)

// nvdMaxWindow is the longest lastModStartDate..lastModEndDate range the
// NVD API accepts.
const nvdMaxWindow = 120 * 24 * time.Hour

// nvdTimeLayout is how the NVD API documents the dates of a window:
// milliseconds and a numeric UTC offset (2021-08-04T13:00:00.000+01:00).
const nvdTimeLayout = "2006-01-02T15:04:05.000-07:00"

// nvdPage is the envelope of an NVD API 2.0 response; the records
// themselves are read by the nvd parser.
type nvdPage struct {
	ResultsPerPage  int        `json:"resultsPerPage"`
	StartIndex      int        `json:"startIndex"`
	TotalResults    int        `json:"totalResults"`
	Timestamp       string     `json:"timestamp"`
	Vulnerabilities []struct{} `json:"vulnerabilities"`
}

// window is a lastModified range; the zero window is the whole listing.
type window struct{ start, end time.Time }

// nvdWindows splits cursor..now into windows of at most nvdMaxWindow.
func nvdWindows(cursor, now time.Time) []window {
	var out []window
	for start := cursor; start.Before(now); {
		end := start.Add(nvdMaxWindow)
		if end.After(now) {
			end = now
		}
		out = append(out, window{start, end})
		start = end
	}
	return out
}

// syncNVD fetches the records modified since the cursor, window by window
// and page by page, each page kept as a file the nvd parser reads. The
// first sync (no cursor) pages through the whole listing. The new cursor
// is the NVD's own timestamp of the first answer, so that a record
// modified while the sync pages is fetched again next time, and the
// clocks of the two sides never need to agree.
func syncNVD(ctx context.Context, j *job) error {
	cfg := &j.s.cfg
	started := cfg.Now().UTC()
	windows := []window{{}}
	if j.prev.Cursor != "" {
		cursor, err := time.Parse(time.RFC3339Nano, j.prev.Cursor)
		if err != nil {
			return fmt.Errorf("nvd cursor %q: %w", j.prev.Cursor, err)
		}
		windows = nvdWindows(cursor, started)
	}
	header := map[string]string{}
	if cfg.NVDAPIKey != "" {
		header["apiKey"] = cfg.NVDAPIKey
	}
	var (
		serverTime time.Time
		pages      int
		records    int
	)
	for _, w := range windows {
		for startIndex := 0; ; {
			q := url.Values{}
			q.Set("resultsPerPage", strconv.Itoa(cfg.NVDPageSize))
			q.Set("startIndex", strconv.Itoa(startIndex))
			if !w.start.IsZero() {
				q.Set("lastModStartDate", w.start.UTC().Format(nvdTimeLayout))
				q.Set("lastModEndDate", w.end.UTC().Format(nvdTimeLayout))
			}
			file, err := j.path("nvd", fmt.Sprintf("page-%06d.json", pages))
			if err != nil {
				return err
			}
			r := request{url: j.src.URL + "?" + q.Encode(), accept: "application/json", header: header,
				limiter: cfg.NVDLimiter, retryForbidden: true}
			if _, err := j.download(ctx, r, file); err != nil {
				return err
			}
			page, err := readNVDPage(file)
			if err != nil {
				return err
			}
			if serverTime.IsZero() {
				serverTime = parseNVDTime(page.Timestamp)
			}
			n := len(page.Vulnerabilities)
			if n == 0 {
				os.Remove(file)
			} else {
				pages++
				records += n
			}
			startIndex += n
			if n == 0 || startIndex >= page.TotalResults {
				break
			}
		}
	}
	if serverTime.IsZero() || serverTime.After(started) {
		serverTime = started
	}
	j.next.Cursor = serverTime.Format(time.RFC3339Nano)
	if len(windows) == 1 && windows[0].start.IsZero() {
		j.note("whole listing: %d records in %d pages", records, pages)
	} else {
		j.note("%d windows since %s: %d records in %d pages", len(windows), j.prev.Cursor, records, pages)
	}
	if records > 0 {
		j.ingestDir(strict(j.parser()), "nvd")
	}
	return nil
}

func readNVDPage(file string) (nvdPage, error) {
	var p nvdPage
	b, err := os.ReadFile(file)
	if err != nil {
		return p, err
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return p, fmt.Errorf("nvd page: %w", err)
	}
	return p, nil
}

// parseNVDTime reads the NVD's timestamps, which carry no zone and are UTC;
// the zero time when s is not one.
func parseNVDTime(s string) time.Time {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC()
		}
	}
	return time.Time{}
}
