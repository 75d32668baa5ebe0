// Package debian reads the Debian security tracker's JSON export
// (https://security-tracker.debian.org/tracker/data/json):
//
//	{"<source package>": {"<CVE>": {"description": "...", "scope": "...",
//	  "releases": {"<codename>": {"status": "resolved",
//	    "repositories": {...}, "fixed_version": "...", "urgency": "..."}}}}}
//
// One Facts is emitted per (CVE, source package), with one atom per
// release of Debian in which the tracker says the package is fixed. An
// entry with neither a description nor a fixed release (the tracker's
// "releases": [] for a package it only names) says nothing and gives no
// facts.
package debian

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/feed"
	"github.com/patchline/patchline/internal/version"
)

// The tracker as a record's dataSources and atoms name it.
const (
	sourceName  = "debian"
	atomSource  = "Debian Security Tracker"
	license     = "Debian security tracker data (free to use)"
	trackerURL  = "https://security-tracker.debian.org/tracker/"
	notAffected = "0"
)

// Parser reads the security tracker JSON.
var Parser = feed.Parser{
	Name:  "debian",
	Exts:  []string{".json"},
	Parse: parse,
}

// releases lists the numbered Debian releases, oldest first, with their
// versions as endoflife.date's Debian cycles spell them, so that an atom's
// ecosystem (Debian:12, OSV's form) finds its lifecycle. sid (unstable) has
// no version and so no atoms.
var releases = []struct{ codename, version string }{
	{"buzz", "1.1"}, {"rex", "1.2"}, {"bo", "1.3"}, {"hamm", "2.0"},
	{"slink", "2.1"}, {"potato", "2.2"}, {"woody", "3.0"}, {"sarge", "3.1"},
	{"etch", "4"}, {"lenny", "5"}, {"squeeze", "6"}, {"wheezy", "7"},
	{"jessie", "8"}, {"stretch", "9"}, {"buster", "10"}, {"bullseye", "11"},
	{"bookworm", "12"}, {"trixie", "13"}, {"forky", "14"},
}

// versions maps a codename to its version, order to its rank in releases.
var versions, order = func() (map[string]string, map[string]int) {
	v := make(map[string]string, len(releases))
	o := make(map[string]int, len(releases))
	for i, r := range releases {
		v[r.codename], o[r.codename] = r.version, i
	}
	return v, o
}()

// entry is what the tracker says about one CVE in one source package.
type entry struct {
	Description string             `json:"description"`
	Releases    map[string]release `json:"releases"`
}

// quirkyEntry is an entry whose releases may be an empty list: the
// tracker's serializer writes an empty map as [].
type quirkyEntry struct {
	Description string          `json:"description"`
	Releases    json.RawMessage `json:"releases"`
}

type release struct {
	Status       string `json:"status"`
	FixedVersion string `json:"fixed_version"`
}

// parse streams the file one source package at a time: the real export is
// some 80 MB, and its largest package (linux) a small part of that.
func parse(ctx context.Context, name string, r io.Reader, sink feed.Sink) error {
	dec := json.NewDecoder(r)
	err := members(dec, func(pkg string) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return err
		}
		if strings.TrimSpace(pkg) == "" {
			// A fix needs the package it is for.
			sink.Reject(name+"#(no package name)", fmt.Errorf("source package without a name"))
			return nil
		}
		return parsePackage(name, pkg, raw, sink)
	})
	if err != nil {
		var se sinkError
		if errors.As(err, &se) {
			return se.err
		}
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return err
		}
		return fmt.Errorf("debian %s: %w", name, err)
	}
	return nil
}

// sinkError carries an error of the sink out of the walk unwrapped.
type sinkError struct{ err error }

func (e sinkError) Error() string { return e.err.Error() }

// parsePackage reads the CVEs of one source package, in CVE id order. A
// package or a CVE whose JSON has the wrong shape is rejected as
// file#package or file#package/CVE.
func parsePackage(name, pkg string, raw json.RawMessage, sink feed.Sink) error {
	if isEmptyList(raw) {
		return nil
	}
	// Most packages decode in one go; one with an odd record is decoded
	// again record by record, so that only the odd one is rejected.
	var entries map[string]entry
	if err := json.Unmarshal(raw, &entries); err == nil {
		for _, key := range sortedKeys(entries) {
			if err := emit(name, pkg, key, func() (*cve.Facts, error) { return facts(pkg, key, entries[key]) }, sink); err != nil {
				return err
			}
		}
		return nil
	}
	var raws map[string]json.RawMessage
	if err := json.Unmarshal(raw, &raws); err != nil {
		sink.Reject(name+"#"+pkg, fmt.Errorf("package %s: %w", pkg, err))
		return nil
	}
	for _, key := range sortedKeys(raws) {
		if err := emit(name, pkg, key, func() (*cve.Facts, error) { return quirkyFacts(pkg, key, raws[key]) }, sink); err != nil {
			return err
		}
	}
	return nil
}

// emit hands the facts that build makes to the sink, or rejects the record.
// Keys that are the tracker's placeholders for issues without a CVE id yet
// (TEMP-0000000-1A2B3C) are passed over: they are not CVEs.
func emit(name, pkg, key string, build func() (*cve.Facts, error), sink feed.Sink) error {
	if strings.HasPrefix(key, "TEMP-") {
		return nil
	}
	f, err := build()
	if err != nil {
		sink.Reject(name+"#"+pkg+"/"+key, err)
		return nil
	}
	if f.Description == "" && len(f.Atoms) == 0 {
		return nil
	}
	if err := sink.Facts(f); err != nil {
		return sinkError{err}
	}
	return nil
}

// quirkyFacts is facts for an entry that does not decode as an entry.
func quirkyFacts(pkg, key string, raw json.RawMessage) (*cve.Facts, error) {
	id, err := cve.ParseID(key)
	if err != nil {
		return nil, err
	}
	var q quirkyEntry
	if err := json.Unmarshal(raw, &q); err != nil {
		return nil, fmt.Errorf("%s: %w", id, err)
	}
	e := entry{Description: q.Description}
	if !isEmptyList(q.Releases) {
		if err := json.Unmarshal(q.Releases, &e.Releases); err != nil {
			return nil, fmt.Errorf("%s releases: %w", id, err)
		}
	}
	return facts(pkg, id, e)
}

// facts builds the facts of one CVE in one source package.
func facts(pkg, key string, e entry) (*cve.Facts, error) {
	id, err := cve.ParseID(key)
	if err != nil {
		return nil, err
	}
	url := trackerURL + id
	f := &cve.Facts{
		CVEID:       id,
		Feed:        sourceName,
		Doc:         pkg,
		Source:      cve.DataSource{Name: sourceName, License: license, URL: &url},
		Description: strings.TrimSpace(e.Description),
	}
	for codename, rel := range e.Releases {
		codename = strings.ToLower(codename)
		number, ok := versions[codename]
		if !ok || rel.Status != "resolved" || rel.FixedVersion == "" || rel.FixedVersion == notAffected {
			continue
		}
		fixed := rel.FixedVersion
		f.Atoms = append(f.Atoms, cve.ProductAtom{
			Ecosystem: "Debian:" + number,
			Product:   pkg,
			Release:   codename,
			Atom: cve.Atom{
				FixedVersion:  fixed,
				AffectedRange: ptr("< " + fixed),
				SourceURL:     ptr(url),
				Source:        atomSource,
				License:       license,
				Unparsed:      !version.Valid("Debian", fixed),
			},
		})
	}
	sort.Slice(f.Atoms, func(i, j int) bool { return order[f.Atoms[i].Release] < order[f.Atoms[j].Release] })
	return f, nil
}

// sortedKeys returns the keys of m in CVE id order, keys that are not
// canonical ids last in string order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		ki, iok := cve.Key(keys[i])
		kj, jok := cve.Key(keys[j])
		if iok != jok {
			return iok
		}
		if iok && ki != kj {
			return ki < kj
		}
		return keys[i] < keys[j]
	})
	return keys
}

func ptr(s string) *string { return &s }

// members calls fn with the key of each member of the object that dec is
// at; fn must consume the member's value.
func members(dec *json.Decoder, fn func(key string) error) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return fmt.Errorf("want an object, got %v", tok)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		if err := fn(key); err != nil {
			return err
		}
	}
	_, err = dec.Token()
	return err
}

// isEmptyList reports whether raw is [] (or absent, or null).
func isEmptyList(raw json.RawMessage) bool {
	s := bytes.TrimSpace(raw)
	if len(s) == 0 || string(s) == "null" {
		return true
	}
	return len(s) >= 2 && s[0] == '[' && s[len(s)-1] == ']' && len(bytes.TrimSpace(s[1:len(s)-1])) == 0
}
