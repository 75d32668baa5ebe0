package main

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The OSV records: templates read from the test data with their
// identities and package names marked, and the zips of copies.

var (
	yamlIDRe   = regexp.MustCompile(`(?m)^id: *(\S+)`)
	yamlModRe  = regexp.MustCompile(`(?m)^modified: *(\S+)`)
	yamlNameRe = regexp.MustCompile(`(?m)^- package:\n(?:\s+\w+: *\S+\n)*?\s+name: *(\S+)$`)
)

// markPackage puts famMarker after the package name in b, where it
// follows the pattern before and precedes after, and where a purl names
// it (pkg:TYPE/NAME). Each name is marked once: the caller passes
// distinct names.
func markPackage(b []byte, before, name, after string) []byte {
	q := regexp.QuoteMeta(name)
	b = regexp.MustCompile(`(?m)(`+before+q+`)(`+after+`)`).ReplaceAll(b, []byte("${1}"+famMarker+"${2}"))
	return regexp.MustCompile(`(pkg:[a-z]+/`+q+`)(["@\n])`).ReplaceAll(b, []byte("${1}"+famMarker+"${2}"))
}

func loadOSV(dir string) ([]template, error) {
	files, err := readDir(dir, ".json", ".yaml")
	if err != nil {
		return nil, err
	}
	var out []template
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var id string
		if strings.HasSuffix(f, ".yaml") {
			m := yamlIDRe.FindSubmatch(b)
			if m == nil {
				continue
			}
			id = string(m[1])
			b = bytes.ReplaceAll(b, m[1], []byte("@@ADV@@"))
			if m := yamlModRe.FindSubmatch(b); m != nil {
				b = bytes.ReplaceAll(b, m[1], []byte("@@UPD@@"))
			}
			var names []string
			for _, m := range yamlNameRe.FindAllSubmatch(b, -1) {
				names = append(names, string(m[1]))
			}
			slices.Sort(names)
			for _, name := range slices.Compact(names) {
				b = markPackage(b, `^\s+name:\s*`, name, `$`)
			}
		} else {
			var rec struct {
				ID        string `json:"id"`
				Published string `json:"published"`
				Modified  string `json:"modified"`
				Affected  []struct {
					Package struct{ Name string } `json:"package"`
				} `json:"affected"`
			}
			if json.Unmarshal(b, &rec) != nil || rec.ID == "" {
				continue
			}
			id = rec.ID
			b = markValue(b, rec.Modified, "@@UPD@@")
			b = markValue(b, rec.Published, "@@PUB@@")
			b = bytes.ReplaceAll(b, []byte(id), []byte("@@ADV@@"))
			var names []string
			for _, a := range rec.Affected {
				names = append(names, a.Package.Name)
			}
			slices.Sort(names)
			for _, name := range slices.Compact(names) {
				b = markPackage(b, `"name":\s*"`, name, `"`)
			}
		}
		b, n := markCVEs(b, nil)
		if n == 0 {
			continue
		}
		prefix, _, _ := strings.Cut(id, "-")
		out = append(out, template{body: b, cves: n, ext: filepath.Ext(f), prefix: prefix})
	}
	return out, nil
}

// osvShare is the share of each database among the OSV records, after the
// real osv.dev export: GitHub advisories first, then the distributions and
// the language databases. A package of a language ecosystem has about two
// records, so the records of a language database name half as many
// families of packages; a distribution's advisories name a bounded set of
// source packages, about a thousand (the kernel, openssl and the like
// have many advisories each), so its records share families.
var osvShare = []struct {
	db       string
	share    float64
	families func(records int) int
}{
	{"ghsa", 0.45, perTwo},
	{"almalinux", 0.25, func(int) int { return 1000 }},
	{"pypa", 0.12, perTwo},
	{"go", 0.12, perTwo},
	{"rustsec", 0.06, perTwo},
}

func perTwo(records int) int { return max(1, records/2) }

// writeOSV writes one zip per database (as osv.dev's all.zip), each
// record about CVEs of the list.
func (g *generator) writeOSV(dir string, n int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var buf []byte
	for _, s := range osvShare {
		ts := g.osv[s.db]
		if len(ts) == 0 {
			continue
		}
		f, zw, err := newZip(filepath.Join(dir, s.db+".zip"))
		if err != nil {
			return err
		}
		k := int(float64(n) * s.share)
		families := s.families(k)
		for i := range k {
			t := ts[g.rng.IntN(len(ts))]
			cves := make([]string, t.cves)
			var pub time.Time
			for j := range cves {
				c := g.cves[g.rng.IntN(len(g.cves))]
				cves[j] = c.id
				if j == 0 {
					pub = c.published
				}
			}
			adv := g.advisoryID(t.prefix, pub.Year(), i)
			w, err := zw.CreateHeader(&zip.FileHeader{Name: adv + t.ext, Method: zip.Deflate, Modified: epoch})
			if err != nil {
				return err
			}
			ts := pub.Format(time.RFC3339)
			fam := "-" + strconv.Itoa(g.rng.IntN(families))
			buf = fill(buf[:0], t, cves, adv, fam, ts, pub.Add(30*24*time.Hour).Format(time.RFC3339))
			if _, err := w.Write(buf); err != nil {
				return err
			}
		}
		if err := closeZip(f, zw); err != nil {
			return err
		}
	}
	return nil
}

func (g *generator) advisoryID(prefix string, year, i int) string {
	if prefix == "GHSA" {
		const alphabet = "23456789cfghjmpqrvwx"
		b := []byte("GHSA-xxxx-xxxx-xxxx")
		for j := range b {
			if b[j] == 'x' {
				b[j] = alphabet[g.rng.IntN(len(alphabet))]
			}
		}
		return string(b)
	}
	if prefix == "ALSA" {
		return fmt.Sprintf("ALSA-%d:%d", year, 10000+i)
	}
	return fmt.Sprintf("%s-%d-%d", prefix, year, 10000+i)
}
