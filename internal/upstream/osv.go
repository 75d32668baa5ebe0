package upstream

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"
)

// osvEcosystem is the cursor of one OSV ecosystem: the modification time of
// the newest record ingested, and the validators of its modified_id.csv.
type osvEcosystem struct {
	Modified     string `json:"modified,omitempty"`
	ETag         string `json:"etag,omitempty"`
	LastModified string `json:"lastModified,omitempty"`
}

// syncOSV syncs each configured ecosystem of the OSV bucket: a conditional
// request for its modified_id.csv (lines "<modified>,<id>", newest first),
// read only down to the cursor; then the records modified since, one file
// each, or the ecosystem's all.zip on the first sync and when more than
// OSVMaxChanged records changed. The cursor is a JSON object of
// osvEcosystem by ecosystem name.
func syncOSV(ctx context.Context, j *job) error {
	cfg := &j.s.cfg
	cur := map[string]osvEcosystem{}
	if j.prev.Cursor != "" {
		if err := json.Unmarshal([]byte(j.prev.Cursor), &cur); err != nil {
			return fmt.Errorf("osv cursor: %w", err)
		}
	}
	next := make(map[string]osvEcosystem, len(cur))
	for k, v := range cur {
		next[k] = v
	}
	fetched := 0
	for i, eco := range cfg.OSVEcosystems {
		st := cur[eco]
		// A cursor can be the zero time: Go's records were published with
		// modified 0001-01-01.
		hasCursor := st.Modified != ""
		var since time.Time
		if hasCursor {
			t, err := time.Parse(time.RFC3339Nano, st.Modified)
			if err != nil {
				return fmt.Errorf("osv cursor of %s: %w", eco, err)
			}
			since = t
		}
		base := strings.TrimRight(j.src.URL, "/") + "/" + url.PathEscape(eco)
		var (
			listed bool // the list has at least one record
			newest time.Time
			ids    []string
		)
		list := request{url: base + "/modified_id.csv", accept: "text/csv", etag: st.ETag, lastModified: st.LastModified}
		resp, err := j.get(ctx, list, func(body io.Reader) error {
			listed, newest, ids = false, time.Time{}, nil
			sc := bufio.NewScanner(body)
			for sc.Scan() {
				ts, id, ok := strings.Cut(strings.TrimSpace(sc.Text()), ",")
				t, err := time.Parse(time.RFC3339Nano, ts)
				if !ok || err != nil || id == "" {
					continue // a header or a line of another form
				}
				if !listed {
					listed, newest = true, t
				}
				if !hasCursor || !t.After(since) || len(ids) > cfg.OSVMaxChanged {
					return nil // the rest is older, or all.zip will do
				}
				ids = append(ids, id)
			}
			return sc.Err()
		})
		switch {
		case isNotFound(err):
			j.note("%s: no such ecosystem", eco)
			j.log.Warn("osv ecosystem not found", "ecosystem", eco, "url", list.url)
			continue
		case err != nil:
			return fmt.Errorf("osv %s: %w", eco, err)
		case resp.notModified:
			continue
		}
		dir := fmt.Sprintf("%02d-%s", i, safeName(eco))
		switch {
		case !listed:
			// An empty list: nothing to fetch.
		case !hasCursor || len(ids) > cfg.OSVMaxChanged:
			file, err := j.path("osv", dir, "all.zip")
			if err != nil {
				return err
			}
			if _, err := j.download(ctx, request{url: base + "/all.zip"}, file); err != nil {
				return fmt.Errorf("osv %s: %w", eco, err)
			}
			j.note("%s: all.zip", eco)
			fetched++
		default:
			got := 0
			for _, id := range ids {
				file, err := j.path("osv", dir, safeName(id)+".json")
				if err != nil {
					return err
				}
				_, err = j.download(ctx, request{url: base + "/" + url.PathEscape(id) + ".json", accept: "application/json"}, file)
				if isNotFound(err) {
					continue // withdrawn from the bucket since it was listed
				}
				if err != nil {
					return fmt.Errorf("osv %s: %w", eco, err)
				}
				got++
			}
			if got > 0 {
				j.note("%s: %d records", eco, got)
				fetched += got
			}
		}
		st.ETag, st.LastModified = resp.etag, resp.lastModified
		if listed {
			st.Modified = newest.UTC().Format(time.RFC3339Nano)
		}
		next[eco] = st
	}
	b, err := json.Marshal(next)
	if err != nil {
		return err
	}
	j.next.Cursor = string(b)
	if fetched == 0 {
		j.note("no ecosystem changed")
		return nil
	}
	j.ingestDir(j.parser(), "osv")
	return nil
}

// safeName makes a file name of an ecosystem or record id: letters, digits,
// dot, dash and underscore are kept, anything else becomes an underscore.
func safeName(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-', r == '_':
			return r
		}
		return '_'
	}, s)
}
