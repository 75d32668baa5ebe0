package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"
)

// msrcUpdate is one entry of the MSRC update index.
type msrcUpdate struct {
	ID                 string `json:"ID"`
	CurrentReleaseDate string `json:"CurrentReleaseDate"`
}

// syncMSRC reads the MSRC update index (<base>/updates, conditional) and
// fetches, as CVRF XML, every monthly document (<base>/cvrf/<ID>) whose
// CurrentReleaseDate is newer than the cursor, the newest such date.
func syncMSRC(ctx context.Context, j *job) error {
	var cursor time.Time
	if j.prev.Cursor != "" {
		t, err := time.Parse(time.RFC3339, j.prev.Cursor)
		if err != nil {
			return fmt.Errorf("msrc cursor %q: %w", j.prev.Cursor, err)
		}
		cursor = t
	}
	base := strings.TrimRight(j.src.URL, "/")
	var index struct {
		Value []msrcUpdate `json:"value"`
	}
	r := request{url: base + "/updates", accept: "application/json", etag: j.prev.ETag, lastModified: j.prev.LastModified}
	resp, err := j.get(ctx, r, func(body io.Reader) error {
		index.Value = nil
		return json.NewDecoder(body).Decode(&index)
	})
	if err != nil {
		return fmt.Errorf("msrc updates: %w", err)
	}
	if resp.notModified {
		j.note("index not modified")
		return nil
	}
	j.next.ETag, j.next.LastModified = resp.etag, resp.lastModified
	newest := cursor
	var months []string
	for _, u := range index.Value {
		t, err := time.Parse(time.RFC3339, u.CurrentReleaseDate)
		if err != nil || u.ID == "" {
			j.log.Warn("msrc index entry passed over", "id", u.ID, "currentReleaseDate", u.CurrentReleaseDate)
			continue
		}
		if !t.After(cursor) {
			continue
		}
		file, err := j.path("msrc", safeName(u.ID)+".xml")
		if err != nil {
			return err
		}
		doc := request{url: base + "/cvrf/" + url.PathEscape(u.ID), accept: "application/xml"}
		if _, err := j.download(ctx, doc, file); err != nil {
			return fmt.Errorf("msrc %s: %w", u.ID, err)
		}
		months = append(months, u.ID)
		if t.After(newest) {
			newest = t
		}
	}
	if !newest.IsZero() {
		j.next.Cursor = newest.UTC().Format(time.RFC3339)
	}
	if len(months) == 0 {
		j.note("no month updated")
		return nil
	}
	j.note("%d months: %s", len(months), strings.Join(months, ", "))
	j.ingestDir(strict(j.parser()), "msrc")
	return nil
}
