package ingest

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/patchline/patchline/internal/catalog"
	"github.com/patchline/patchline/internal/cve"
)

// Markers of the two members of a record's content encoding that its body
// fills in. The members around them are top-level ones: no member before
// them in a record has members of these names, and within a string a
// quote is escaped.
var (
	epssNull     = []byte(`"epss":null,"kev":`)
	modifiedNull = []byte(`"modifiedAt":null,"dataSources":`)
	// dataSourcesMember starts the last member of a record.
	dataSourcesMember = []byte(`"dataSources":`)
)

// fillBody returns the encoding of rec from the encoding of its content:
// with rec's EPSS score and modification time in place of their nulls, and
// its data sources with their sync times.
func fillBody(content []byte, rec *cve.Record) ([]byte, error) {
	i := bytes.Index(content, epssNull)
	j := bytes.Index(content, modifiedNull)
	if i < 0 || j < i {
		// Not the shape this expects: encode the body whole.
		c := *rec
		c.Links = nil
		return json.Marshal(&c)
	}
	epss, err := json.Marshal(rec.EPSS)
	if err != nil {
		return nil, err
	}
	mod, err := json.Marshal(rec.ModifiedAt)
	if err != nil {
		return nil, err
	}
	sources, err := json.Marshal(rec.DataSources)
	if err != nil {
		return nil, err
	}
	body := make([]byte, 0, len(content)+len(epss)+len(mod)+len(sources))
	body = append(body, content[:i+len(`"epss":`)]...)
	body = append(body, epss...)
	body = append(body, content[i+len(`"epss":null`):j+len(`"modifiedAt":`)]...)
	body = append(body, mod...)
	// dataSources is the last member of the content: Links is nil.
	body = append(body, content[j+len(`"modifiedAt":null`):j+len(modifiedNull)]...)
	body = append(body, sources...)
	body = append(body, '}')
	return body, nil
}

// stampSources sets the syncedAt of each data source of rec: the time of
// its feed's data in synced when the run changed it, else the time the
// stored record's dataSources old (or its body) give it, else the time of
// the newest run of its feed that lastRuns gives.
func stampSources(rec *cve.Record, synced map[string]time.Time, old []byte, lastRuns func() map[string]time.Time) {
	var prev []cve.DataSource
	if i := bytes.LastIndex(old, dataSourcesMember); i >= 0 {
		// dataSources is the last member of a stored record.
		old = bytes.TrimSuffix(bytes.TrimSpace(old[i+len(dataSourcesMember):]), []byte("}"))
	}
	_ = json.Unmarshal(old, &prev) // a record without them stamps none
	for i := range rec.DataSources {
		ds := &rec.DataSources[i]
		feed, _, _ := strings.Cut(ds.Name, ":")
		if t, ok := synced[feed]; ok {
			ds.SyncedAt = &t
			continue
		}
		for _, p := range prev {
			if p.Name == ds.Name && p.SyncedAt != nil {
				t := p.SyncedAt.UTC()
				ds.SyncedAt = &t
				break
			}
		}
		if ds.SyncedAt == nil {
			if t, ok := lastRuns()[feed]; ok {
				t = t.UTC()
				ds.SyncedAt = &t
			}
		}
	}
}

// Encode returns the stored row of rec. Its modifiedAt is kept from the
// stored record when the content hash is unchanged and set to now otherwise.
// The content hash leaves out the modification time, the EPSS score, which
// moves every day, and the sync times of the sources: a record's modifiedAt
// changes when what it says changes, not when its EPSS score does or a
// source's data is taken in again.
func Encode(key int64, rec *cve.Record, oldHash []byte, oldModified int64, exists bool, now time.Time) (*catalog.Row, error) {
	// One encoding serves both: the content (EPSS and modifiedAt null, as
	// the hash leaves them out), and the body, the content with the two
	// filled in.
	epss, sources := rec.EPSS, rec.DataSources
	rec.EPSS, rec.ModifiedAt, rec.Links, rec.DataSources = nil, nil, nil, unstamped(sources)
	content, err := json.Marshal(rec)
	rec.EPSS, rec.DataSources = epss, sources
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(content)
	hash := sum[:]
	modified := now
	if exists && string(hash) == string(oldHash) {
		modified = time.Unix(oldModified, 0).UTC()
	}
	rec.ModifiedAt = &modified
	body, err := fillBody(content, rec)
	if err != nil {
		return nil, err
	}
	row := &catalog.Row{
		Key:       key,
		ID:        rec.CVEID,
		Rejected:  rec.State == cve.StateRejected,
		Severity:  rec.Severity,
		CVSS:      -1,
		EPSS:      -1,
		IsKEV:     rec.KEV != nil,
		HasFix:    rec.Remediation.Available,
		Published: -1,
		Modified:  modified.Unix(),
		Hash:      hash,
		Body:      body,
	}
	if rec.CVSS != nil {
		row.CVSS = rec.CVSS.Score
		v := cve.SummaryVersion(rec.CVSS.Version)
		row.CVSSVersion = &v
	}
	if rec.EPSS != nil {
		row.EPSS = rec.EPSS.Score
	}
	if rec.PublishedAt != nil {
		row.Published = rec.PublishedAt.Unix()
	}
	if rec.Description != nil {
		row.Description = *rec.Description
	}
	return row, nil
}

// unstamped returns sources without their sync times (sources itself when
// none has one).
func unstamped(sources []cve.DataSource) []cve.DataSource {
	if !slices.ContainsFunc(sources, func(d cve.DataSource) bool { return d.SyncedAt != nil }) {
		return sources
	}
	out := slices.Clone(sources)
	for i := range out {
		out[i].SyncedAt = nil
	}
	return out
}
