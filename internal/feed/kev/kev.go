// Package kev reads the CISA Known Exploited Vulnerabilities catalog
// (known_exploited_vulnerabilities.json): one Facts with a KEV entry per
// vulnerability of the catalog.
package kev

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/feed"
)

// The catalog as a record's dataSources names it.
const (
	sourceName    = "kev"
	sourceLicense = "CC0-1.0"
	sourceURL     = "https://www.cisa.gov/known-exploited-vulnerabilities-catalog"
)

// Parser reads the KEV catalog JSON.
var Parser = feed.Parser{
	Name:  "kev",
	Exts:  []string{".json"},
	Parse: parse,
}

// entry is one element of the catalog's vulnerabilities array.
type entry struct {
	CVEID                      string   `json:"cveID"`
	VendorProject              string   `json:"vendorProject"`
	Product                    string   `json:"product"`
	VulnerabilityName          string   `json:"vulnerabilityName"`
	DateAdded                  string   `json:"dateAdded"`
	ShortDescription           string   `json:"shortDescription"`
	RequiredAction             string   `json:"requiredAction"`
	DueDate                    string   `json:"dueDate"`
	KnownRansomwareCampaignUse string   `json:"knownRansomwareCampaignUse"`
	Notes                      string   `json:"notes"`
	CWEs                       []string `json:"cwes"`
}

// parse streams the catalog: the top-level object is read member by
// member, and the vulnerabilities array element by element, so that only
// one entry is held in memory at a time.
func parse(ctx context.Context, name string, r io.Reader, sink feed.Sink) error {
	dec := json.NewDecoder(r)
	if err := feed.ExpectDelim(dec, '{'); err != nil {
		return fmt.Errorf("kev %s: %w", name, err)
	}
	seen := false
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("kev %s: %w", name, err)
		}
		if key, _ := tok.(string); key != "vulnerabilities" {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return fmt.Errorf("kev %s: %w", name, err)
			}
			continue
		}
		seen = true
		if err := vulnerabilities(ctx, dec, name, sink); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil {
		return fmt.Errorf("kev %s: %w", name, err)
	}
	if !seen {
		return fmt.Errorf("kev %s: no vulnerabilities array", name)
	}
	return nil
}

// vulnerabilities reads the array of entries. An element that is valid JSON
// but not a well-formed entry is rejected as name#index (0-based); invalid
// JSON fails the file.
func vulnerabilities(ctx context.Context, dec *json.Decoder, name string, sink feed.Sink) error {
	if err := feed.ExpectDelim(dec, '['); err != nil {
		return fmt.Errorf("kev %s: vulnerabilities: %w", name, err)
	}
	for i := 0; dec.More(); i++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return fmt.Errorf("kev %s: vulnerabilities[%d]: %w", name, i, err)
		}
		f, err := facts(raw)
		if err != nil {
			sink.Reject(name+"#"+strconv.Itoa(i), err)
			continue
		}
		if err := sink.Facts(f); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil {
		return fmt.Errorf("kev %s: vulnerabilities: %w", name, err)
	}
	return nil
}

// facts converts one catalog entry. The catalog's shortDescription is kept
// in the KEV object only: the CNA's description is the better one for the
// record.
func facts(raw json.RawMessage) (*cve.Facts, error) {
	var e entry
	if err := json.Unmarshal(raw, &e); err != nil {
		return nil, fmt.Errorf("decode entry: %w", err)
	}
	id, err := cve.ParseID(e.CVEID)
	if err != nil {
		return nil, fmt.Errorf("cveID: %w", err)
	}
	if err := checkDate(e.DateAdded); err != nil {
		return nil, fmt.Errorf("%s dateAdded: %w", id, err)
	}
	if e.DueDate != "" {
		if err := checkDate(e.DueDate); err != nil {
			return nil, fmt.Errorf("%s dueDate: %w", id, err)
		}
	}
	var cwes []string
	for _, c := range e.CWEs {
		if c != "" {
			cwes = append(cwes, c)
		}
	}
	url := sourceURL
	return &cve.Facts{
		CVEID:  id,
		Feed:   "kev",
		Source: cve.DataSource{Name: sourceName, License: sourceLicense, URL: &url},
		CWEs:   cwes,
		KEV: &cve.KEV{
			DateAdded:                  e.DateAdded,
			DueDate:                    e.DueDate,
			RequiredAction:             e.RequiredAction,
			KnownRansomwareCampaignUse: e.KnownRansomwareCampaignUse,
			VendorProject:              e.VendorProject,
			Product:                    e.Product,
			VulnerabilityName:          e.VulnerabilityName,
			ShortDescription:           e.ShortDescription,
			Notes:                      e.Notes,
			CWEs:                       append([]string(nil), cwes...),
		},
	}, nil
}

var errNotDate = errors.New("want a date YYYY-MM-DD")

func checkDate(s string) error {
	if _, err := time.Parse(time.DateOnly, s); err != nil {
		return fmt.Errorf("%q: %w", s, errNotDate)
	}
	return nil
}
