package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The CVE List publishes its release assets on GitHub:
//
//	2026-11-21_all_CVEs_at_midnight.zip.zip   the baseline: every record at midnight UTC
//	2026-11-21_delta_CVEs_at_0100Z.zip        the records changed since midnight, hourly
//	2026-11-20_delta_CVEs_at_end_of_day.zip   the records changed during the whole day
var (
	baselineAsset = regexp.MustCompile(`^(\d{4}-\d{2}-\d{2})_all_CVEs_at_midnight\.zip(?:\.zip)?$`)
	deltaAsset    = regexp.MustCompile(`^(\d{4}-\d{2}-\d{2})_delta_CVEs_at_(\d{4}Z|end_of_day)\.zip$`)
)

// cvelistMaxPages bounds the pages of the releases list read in one sync.
const cvelistMaxPages = 10

// ghRelease is the part of a GitHub release that a sync reads.
type ghRelease struct {
	TagName string    `json:"tag_name"`
	Assets  []ghAsset `json:"assets"`
}

type ghAsset struct {
	Name string `json:"name"`
	URL  string `json:"browser_download_url"`
}

// cveAsset is a baseline or delta zip and the time up to which it holds
// the changes: midnight for a baseline, the hour of an hourly delta, the
// end of the day for an end-of-day delta.
type cveAsset struct {
	name     string
	url      string
	day      time.Time
	covers   time.Time
	baseline bool
}

func parseCVEAsset(a ghAsset) (cveAsset, bool) {
	if m := baselineAsset.FindStringSubmatch(a.Name); m != nil {
		day, err := time.Parse(time.DateOnly, m[1])
		if err != nil {
			return cveAsset{}, false
		}
		return cveAsset{name: a.Name, url: a.URL, day: day, covers: day, baseline: true}, true
	}
	m := deltaAsset.FindStringSubmatch(a.Name)
	if m == nil {
		return cveAsset{}, false
	}
	day, err := time.Parse(time.DateOnly, m[1])
	if err != nil {
		return cveAsset{}, false
	}
	covers := day.Add(24 * time.Hour)
	if m[2] != "end_of_day" {
		h, _ := strconv.Atoi(m[2][:2])
		mi, _ := strconv.Atoi(m[2][2:4])
		if h > 23 || mi > 59 {
			return cveAsset{}, false
		}
		covers = day.Add(time.Duration(h)*time.Hour + time.Duration(mi)*time.Minute)
	}
	return cveAsset{name: a.Name, url: a.URL, day: day, covers: covers}, true
}

// cvePlan is what a sync of the CVE List fetches, in order, and the cursor
// it leaves.
type cvePlan struct {
	assets []cveAsset
	cursor time.Time
	// baseline says why the baseline is fetched; empty when it is not.
	baseline string
}

// planCVEList chooses the assets to fetch. The deltas of a day are
// cumulative since midnight, so the newest delta of each day since the
// cursor is enough; a finished day needs its end-of-day delta, and until
// that is published the cursor stays within that day so that the next sync
// fetches it. The baseline (with its day's newest delta) is fetched when
// there is no cursor, when the cursor is older than maxAge, or when the
// listed deltas do not reach back to it.
func planCVEList(assets []cveAsset, cursor, now time.Time, maxAge time.Duration, reachedCursor bool) (cvePlan, error) {
	newest := map[time.Time]cveAsset{} // day → its newest delta
	var base *cveAsset
	for i, a := range assets {
		if a.baseline {
			if base == nil || a.day.After(base.day) {
				base = &assets[i]
			}
			continue
		}
		if cur, ok := newest[a.day]; !ok || a.covers.After(cur.covers) {
			newest[a.day] = a
		}
	}
	days := make([]time.Time, 0, len(newest))
	for d := range newest {
		days = append(days, d)
	}
	sort.Slice(days, func(i, k int) bool { return days[i].Before(days[k]) })

	reason := ""
	switch {
	case cursor.IsZero():
		reason = "first sync"
	case now.Sub(cursor) > maxAge:
		reason = "cursor older than " + maxAge.String()
	case !reachedCursor:
		reason = "the releases listed do not reach back to the cursor"
	default:
		// Every day from the cursor's to the newest listed needs a delta.
		first := cursor.Truncate(24 * time.Hour)
		if len(days) > 0 {
			for d := first; d.Before(days[len(days)-1]); d = d.Add(24 * time.Hour) {
				if _, ok := newest[d]; !ok && d.Add(24*time.Hour).After(cursor) {
					reason = "no delta listed for " + d.Format(time.DateOnly)
					break
				}
			}
		}
	}
	var plan cvePlan
	from := cursor
	if reason != "" {
		if base == nil {
			return plan, fmt.Errorf("cvelist: baseline needed (%s) but none is listed", reason)
		}
		plan.baseline = reason
		plan.assets = append(plan.assets, *base)
		from = base.covers
	}
	plan.cursor = from
	complete := true // every day applied so far was applied whole
	for i, d := range days {
		a := newest[d]
		if !a.covers.After(from) {
			continue
		}
		plan.assets = append(plan.assets, a)
		last := i == len(days)-1
		if complete {
			plan.cursor = a.covers
			if !last && a.covers.Before(d.Add(24*time.Hour)) {
				complete = false // come back for this day's end-of-day delta
			}
		}
	}
	return plan, nil
}

// syncCVEList reads the releases list of the CVE List (a conditional
// request for its first page), plans the assets to fetch and fetches them
// into files that the walk reads in order: the baseline first, then the
// deltas, oldest first.
func syncCVEList(ctx context.Context, j *job) error {
	cfg := &j.s.cfg
	var cursor time.Time
	if j.prev.Cursor != "" {
		t, err := time.Parse(time.RFC3339, j.prev.Cursor)
		if err != nil {
			return fmt.Errorf("cvelist cursor %q: %w", j.prev.Cursor, err)
		}
		cursor = t
	}
	ghHeader := map[string]string{"X-GitHub-Api-Version": "2022-11-28"}
	var (
		assets  []cveAsset
		reached bool
		seen    = map[string]bool{}
	)
	next := withQuery(j.src.URL, "per_page", "100")
	for page := 0; next != "" && page < cvelistMaxPages; page++ {
		r := request{url: next, accept: "application/vnd.github+json", header: ghHeader}
		if page == 0 && !cursor.IsZero() {
			r.etag = j.prev.ETag
		}
		var releases []ghRelease
		resp, err := j.get(ctx, r, func(body io.Reader) error {
			releases = nil
			return json.NewDecoder(body).Decode(&releases)
		})
		if err != nil {
			return fmt.Errorf("cvelist releases: %w", err)
		}
		if resp.notModified {
			j.note("releases not modified")
			return nil
		}
		if page == 0 {
			j.next.ETag = resp.etag
		}
		for _, rel := range releases {
			for _, a := range rel.Assets {
				ca, ok := parseCVEAsset(a)
				if !ok || seen[ca.name] {
					continue
				}
				seen[ca.name] = true
				assets = append(assets, ca)
				if !ca.baseline && !ca.covers.After(cursor) {
					reached = true
				}
			}
		}
		// The first sync needs only the newest baseline; later ones read on
		// until a delta the cursor already covers.
		if cursor.IsZero() || reached {
			break
		}
		next = nextLink(resp.header.Get("Link"))
	}
	plan, err := planCVEList(assets, cursor, cfg.Now(), cfg.CVEListMaxDeltaAge, reached)
	if err != nil {
		return err
	}
	if len(plan.assets) == 0 {
		j.note("no new delta")
		return nil
	}
	var names []string
	for i, a := range plan.assets {
		file, err := j.path("cvelist", fmt.Sprintf("%03d-%s", i, a.name))
		if err != nil {
			return err
		}
		if _, err := j.download(ctx, request{url: a.url, accept: "application/octet-stream"}, file); err != nil {
			return err
		}
		names = append(names, a.name)
	}
	if plan.baseline != "" {
		j.note("baseline (%s)", plan.baseline)
	}
	j.note("fetched %s", strings.Join(names, ", "))
	j.next.Cursor = plan.cursor.UTC().Format(time.RFC3339)
	j.ingestDir(j.parser(), "cvelist")
	return nil
}

// withQuery returns u with the query parameter k set to v.
func withQuery(u, k, v string) string {
	pu, err := url.Parse(u)
	if err != nil {
		return u
	}
	q := pu.Query()
	q.Set(k, v)
	pu.RawQuery = q.Encode()
	return pu.String()
}

// nextLink returns the rel="next" URL of a Link header, "" when none.
func nextLink(h string) string {
	for _, part := range strings.Split(h, ",") {
		segs := strings.Split(part, ";")
		if len(segs) < 2 {
			continue
		}
		target := strings.TrimSpace(segs[0])
		if !strings.HasPrefix(target, "<") || !strings.HasSuffix(target, ">") {
			continue
		}
		if slices.ContainsFunc(segs[1:], func(p string) bool {
			p = strings.ReplaceAll(strings.TrimSpace(p), " ", "")
			return p == `rel="next"` || p == "rel=next"
		}) {
			return target[1 : len(target)-1]
		}
	}
	return ""
}
