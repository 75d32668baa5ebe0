// TestRemediationFromEverySource reads the shared data of every source
// with readers of its own, written apart from the feed parsers, and checks
// that the ingest keeps each fix the files claim. This file is over 600
// lines because it holds a reader per source (CVE List, NVD, KEV, EPSS,
// OSV, Debian, MSRC, CSAF) beside the one test that uses them.

package ingest

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"io/fs"
	"net/url"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/patchline/patchline/internal/cve"
)

// The tests of this file read the upstream files again, with decoding of
// their own that shares nothing with the feed parsers, and check that the
// catalog ingested from the same files says what the files say: every
// fixed version of every OSV, Debian, MSRC and CSAF file is an atom of its
// CVE with a source and a license, and each record credits exactly the
// sources that know its CVE. Where a parser passes something over on
// purpose, the reader below passes over the same, and says why.

// claim is one fix that an upstream file names for a CVE.
type claim struct {
	file string
	// ecosystem and product locate the atom; with loose set, product is
	// the vendor's name of the product, which the atom's product names
	// or is named in (MSRC's "cbl2 curl 8.8.0-1 on CBL Mariner 2.0" is the
	// product curl of Azure Linux:2).
	ecosystem, product string
	loose              bool
	// fixed is the fixed version; with candidates set instead, the atom's
	// fixed version is one of them or a part of one (a CSAF product
	// version "telnet-1:0.17-65.el7_6.x86_64" names the fix 1:0.17-65.el7_6).
	fixed      string
	candidates []string
	kb         string
	// alias is a second name of the product, when the fix's own text
	// names it (MSRC's Azure Linux releases name the package there).
	alias string
}

// byCVE is a set of names for each CVE id.
type byCVE map[string]map[string]bool

func (b byCVE) add(id, name string) {
	if b[id] == nil {
		b[id] = map[string]bool{}
	}
	b[id][name] = true
}

// upstream is what the files say.
type upstream struct {
	// sources are the data source names each CVE's files credit.
	sources byCVE
	// optional are sources whose files know a CVE but may add nothing to
	// its record: a description is taken from the first source in the
	// merge's order that has one, a publication date likewise.
	optional byCVE
	// rejecters are the sources that say a CVE is rejected.
	rejecters byCVE
	// annotations are the sources whose facts alone make no record.
	annotations byCVE
	claims      map[string][]claim
}

// readUpstream reads every folder of fsys named after an ingest source.
func readUpstream(t *testing.T, fsys fs.FS) *upstream {
	t.Helper()
	u := &upstream{
		sources:     byCVE{},
		optional:    byCVE{},
		rejecters:   byCVE{},
		annotations: byCVE{},
		claims:      map[string][]claim{},
	}
	readers := map[string]func(t *testing.T, u *upstream, name string, data []byte){
		"cvelist": readCVEList, "nvd": readNVD, "kev": readKEV, "epss": readEPSS,
		"osv": readOSV, "debian": readDebian, "msrc": readMSRC, "csaf": readCSAF,
	}
	for feed, read := range readers {
		err := fs.WalkDir(fsys, feed, func(name string, d fs.DirEntry, err error) error {
			if errors.Is(err, fs.ErrNotExist) && name == feed {
				return fs.SkipDir
			}
			if err != nil || d.IsDir() || strings.HasSuffix(name, ".md") {
				return err
			}
			data, err := fs.ReadFile(fsys, name)
			if err != nil {
				return err
			}
			if strings.HasSuffix(name, ".gz") {
				zr, err := gzip.NewReader(bytes.NewReader(data))
				if err != nil {
					return err
				}
				if data, err = io.ReadAll(zr); err != nil {
					return err
				}
				name = strings.TrimSuffix(name, ".gz")
			}
			read(t, u, name, data)
			return nil
		})
		if err != nil {
			t.Fatalf("read %s: %v", feed, err)
		}
	}
	return u
}

// canonical returns the canonical form of a CVE id, and false for what is
// not one (MSRC's suffixed ids such as CVE-2022-2601-M, advisories such as
// ADV240001), which no parser makes a record of.
func canonical(s string) (string, bool) {
	id, err := cve.ParseID(strings.TrimSpace(s))
	return id, err == nil
}

func readCVEList(t *testing.T, u *upstream, name string, data []byte) {
	// The delta files of a cvelistV5 checkout list changed records; they
	// are not records.
	if b := path.Base(name); b == "delta.json" || b == "deltaLog.json" || path.Ext(name) != ".json" {
		return
	}
	var r struct {
		Metadata struct {
			ID    string `json:"cveId"`
			State string `json:"state"`
		} `json:"cveMetadata"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		t.Errorf("%s: %v", name, err)
		return
	}
	id, ok := canonical(r.Metadata.ID)
	if !ok {
		t.Errorf("%s: cve id %q", name, r.Metadata.ID)
		return
	}
	u.sources.add(id, "cvelist")
	if strings.EqualFold(r.Metadata.State, cve.StateRejected) {
		u.rejecters.add(id, "cvelist")
	}
}

func readNVD(t *testing.T, u *upstream, name string, data []byte) {
	if path.Ext(name) != ".json" {
		return
	}
	type item struct {
		ID         string `json:"id"`
		VulnStatus string `json:"vulnStatus"`
	}
	var page struct {
		Vulnerabilities []struct {
			CVE item `json:"cve"`
		} `json:"vulnerabilities"`
		CVE *item `json:"cve"`
		item
	}
	if err := json.Unmarshal(data, &page); err != nil {
		t.Errorf("%s: %v", name, err)
		return
	}
	items := []item{page.item}
	if page.CVE != nil {
		items = []item{*page.CVE}
	}
	for _, v := range page.Vulnerabilities {
		items = append(items, v.CVE)
	}
	for _, it := range items {
		id, ok := canonical(it.ID)
		if !ok {
			continue
		}
		u.sources.add(id, "nvd")
		if strings.EqualFold(it.VulnStatus, "Rejected") {
			u.rejecters.add(id, "nvd")
		}
	}
}

func readKEV(t *testing.T, u *upstream, name string, data []byte) {
	if path.Ext(name) != ".json" {
		return
	}
	var c struct {
		Vulnerabilities []struct {
			CVEID string `json:"cveID"`
		} `json:"vulnerabilities"`
	}
	if err := json.Unmarshal(data, &c); err != nil {
		t.Errorf("%s: %v", name, err)
		return
	}
	for _, v := range c.Vulnerabilities {
		if id, ok := canonical(v.CVEID); ok {
			u.sources.add(id, "kev")
		}
	}
}

func readEPSS(t *testing.T, u *upstream, name string, data []byte) {
	if path.Ext(name) != ".csv" {
		return
	}
	// FIRST's own files separate fields by commas, a mirror's by
	// semicolons; the id is the first field either way.
	for line := range strings.SplitSeq(string(data), "\n") {
		first, _, _ := strings.Cut(line, ",")
		first, _, _ = strings.Cut(first, ";")
		if id, ok := canonical(first); ok {
			u.annotations.add(id, "epss")
		}
	}
}

// osvRecord is the part of an OSV record read here, in JSON or YAML.
type osvRecord struct {
	ID         string   `json:"id" yaml:"id"`
	Aliases    []string `json:"aliases" yaml:"aliases"`
	Related    []string `json:"related" yaml:"related"`
	Upstream   []string `json:"upstream" yaml:"upstream"`
	Withdrawn  string   `json:"withdrawn" yaml:"withdrawn"`
	References []struct {
		URL string `json:"url" yaml:"url"`
	} `json:"references" yaml:"references"`
	Affected []struct {
		Package struct {
			Ecosystem string `json:"ecosystem" yaml:"ecosystem"`
			Name      string `json:"name" yaml:"name"`
		} `json:"package" yaml:"package"`
		Ranges []struct {
			Type   string              `json:"type" yaml:"type"`
			Events []map[string]string `json:"events" yaml:"events"`
		} `json:"ranges" yaml:"ranges"`
	} `json:"affected" yaml:"affected"`
}

// osvDatabases name the OSV databases credited in dataSources, by the
// prefix of their records' ids.
var osvDatabases = map[string]string{
	"GHSA": "GHSA", "GO": "Go", "PYSEC": "PyPA", "RUSTSEC": "RustSec", "ALSA": "AlmaLinux",
	"ALBA": "AlmaLinux", "ALEA": "AlmaLinux", "OSV": "OSS-Fuzz",
}

var embeddedCVE = regexp.MustCompile(`^[A-Za-z]+-(CVE-[0-9]{4}-[0-9]+)$`)

func readOSV(t *testing.T, u *upstream, name string, data []byte) {
	var records []osvRecord
	switch path.Ext(name) {
	case ".yaml", ".yml":
		var r osvRecord
		if err := yaml.Unmarshal(data, &r); err != nil {
			t.Errorf("%s: %v", name, err)
			return
		}
		records = []osvRecord{r}
	case ".json":
		data = bytes.TrimSpace(data)
		var err error
		switch {
		case bytes.HasPrefix(data, []byte("[")):
			err = json.Unmarshal(data, &records)
		default:
			var r struct {
				osvRecord
				Vulns []osvRecord `json:"vulns"`
			}
			err = json.Unmarshal(data, &r)
			records = append(r.Vulns, r.osvRecord)
		}
		if err != nil {
			t.Errorf("%s: %v", name, err)
			return
		}
	default:
		return
	}
	for _, r := range records {
		if r.ID == "" || r.Withdrawn != "" {
			// A withdrawn record no longer says anything.
			continue
		}
		var ids []string
		add := func(s string) {
			if m := embeddedCVE.FindStringSubmatch(s); m != nil {
				s = m[1]
			}
			if id, ok := canonical(s); ok && !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
		add(r.ID)
		for _, a := range r.Aliases {
			add(a)
		}
		if len(ids) == 0 {
			// Related and upstream ids are read only when the record's
			// own ids name no CVE (AlmaLinux's errata): a related id is
			// not always the same vulnerability.
			for _, a := range append(slices.Clone(r.Related), r.Upstream...) {
				add(a)
			}
		}
		prefix, _, _ := strings.Cut(r.ID, "-")
		source := "osv:" + osvDatabases[prefix]
		for _, id := range ids {
			before := len(u.claims[id])
			for _, a := range r.Affected {
				eco, pkg := strings.TrimSpace(a.Package.Ecosystem), strings.TrimSpace(a.Package.Name)
				if eco == "" || pkg == "" {
					continue
				}
				for _, rg := range a.Ranges {
					if rg.Type == "GIT" {
						// GIT ranges name commits, not versions that a
						// package manager installs.
						continue
					}
					// Only fixed events name a fix: a range that ends in
					// last_affected has none, and limit does not bound one.
					for _, ev := range rg.Events {
						if fixed := strings.TrimSpace(ev["fixed"]); fixed != "" {
							u.claims[id] = append(u.claims[id], claim{file: name, ecosystem: eco, product: pkg, fixed: fixed})
						}
					}
				}
			}
			if len(u.claims[id]) > before || len(r.References) > 0 {
				u.sources.add(id, source)
			} else {
				u.optional.add(id, source)
			}
		}
	}
}

// debianReleases are the Debian releases by codename, with the version
// that OSV's ecosystem names use (Debian:12). The tracker's sid has no
// version and stands for no release one can be on.
var debianReleases = map[string]string{
	"jessie": "8", "stretch": "9", "buster": "10", "bullseye": "11",
	"bookworm": "12", "trixie": "13", "forky": "14",
}

func readDebian(t *testing.T, u *upstream, name string, data []byte) {
	if path.Ext(name) != ".json" {
		return
	}
	var packages map[string]json.RawMessage
	if err := json.Unmarshal(data, &packages); err != nil {
		t.Errorf("%s: %v", name, err)
		return
	}
	for pkg, raw := range packages {
		var entries map[string]struct {
			Description string          `json:"description"`
			Releases    json.RawMessage `json:"releases"`
		}
		if json.Unmarshal(raw, &entries) != nil {
			continue // the tracker writes an empty package as []
		}
		for key, e := range entries {
			id, ok := canonical(key)
			if !ok {
				continue // TEMP-… placeholders of issues without a CVE
			}
			var releases map[string]struct {
				Status       string `json:"status"`
				FixedVersion string `json:"fixed_version"`
			}
			// The tracker writes no releases as [].
			_ = json.Unmarshal(e.Releases, &releases)
			before := len(u.claims[id])
			for codename, r := range releases {
				number, ok := debianReleases[strings.ToLower(codename)]
				// A release still open has no fix yet; a fixed version
				// of 0 says the release was never affected.
				if !ok || r.Status != "resolved" || r.FixedVersion == "" || r.FixedVersion == "0" {
					continue
				}
				u.claims[id] = append(u.claims[id], claim{file: name, ecosystem: "Debian:" + number, product: pkg, fixed: r.FixedVersion})
			}
			switch {
			case len(u.claims[id]) > before:
				u.sources.add(id, "debian")
			case strings.TrimSpace(e.Description) != "":
				u.optional.add(id, "debian")
			}
			// An entry with neither says nothing.
		}
	}
}

// msrcText trims the zero-width characters that some of MSRC's builds
// carry, and white space.
func msrcText(s string) string {
	return strings.TrimSpace(strings.Map(func(r rune) rune {
		if strings.ContainsRune("\u200b\u200c\u200d\u2060\ufeff", r) {
			return -1
		}
		return r
	}, s))
}

var (
	msrcKB      = regexp.MustCompile(`^(?:KB)?([0-9]{6,8})$`)
	msrcListed  = regexp.MustCompile(`^[0-9][0-9A-Za-z.+~_:-]*$`)
	msrcRelease = regexp.MustCompile(`^(?:CBL Mariner|CBL-Mariner|Azure Linux) [0-9.]+ (?:x64|ARM)$`)
)

func readMSRC(t *testing.T, u *upstream, name string, data []byte) {
	if path.Ext(name) != ".xml" {
		// The API's index of monthly documents names documents, not
		// fixes; MSRC's CSAF documents are read as CSAF below.
		if path.Ext(name) == ".json" && bytes.Contains(data, []byte(`"csaf_version"`)) {
			readCSAF(t, u, name, data)
		}
		return
	}
	var doc struct {
		Products []struct {
			ID   string `xml:"ProductID,attr"`
			Name string `xml:",chardata"`
		} `xml:"ProductTree>FullProductName"`
		Branches []msrcBranch `xml:"ProductTree>Branch"`
		Vulns    []struct {
			CVE          string `xml:"CVE"`
			Remediations []struct {
				Type        string   `xml:"Type,attr"`
				Description string   `xml:"Description"`
				FixedBuild  string   `xml:"FixedBuild"`
				ProductIDs  []string `xml:"ProductID"`
			} `xml:"Remediations>Remediation"`
		} `xml:"Vulnerability"`
	}
	if err := xml.Unmarshal(data, &doc); err != nil {
		t.Errorf("%s: %v", name, err)
		return
	}
	// A product id named twice keeps its last name, in document order:
	// the tree's branches come before its list of products.
	products := map[string]string{}
	for _, b := range doc.Branches {
		b.names(products)
	}
	for _, p := range doc.Products {
		products[strings.TrimSpace(p.ID)] = strings.TrimSpace(p.Name)
	}
	for _, v := range doc.Vulns {
		id, ok := canonical(v.CVE)
		if !ok {
			continue
		}
		u.sources.add(id, "msrc")
		for _, r := range v.Remediations {
			if r.Type != "Vendor Fix" {
				continue // mitigations, workarounds and release notes fix nothing
			}
			build := msrcText(r.FixedBuild)
			if link, err := url.Parse(build); build == "-" || err == nil && link.Host != "" {
				// A dash or a link where the build should be names no build.
				build = ""
			}
			desc := msrcText(r.Description)
			kb := ""
			if m := msrcKB.FindStringSubmatch(desc); m != nil {
				kb = "KB" + m[1]
			}
			var fixes []string
			if build != "" {
				// A list of package versions is one fix each.
				parts := strings.FieldsFunc(build, func(r rune) bool { return r == ',' || r == ';' })
				for i := range parts {
					parts[i] = strings.TrimSpace(parts[i])
				}
				if len(parts) < 2 || slices.ContainsFunc(parts, func(p string) bool { return !msrcListed.MatchString(p) }) {
					parts = []string{build}
				}
				fixes = parts
			} else if kb != "" {
				fixes = []string{kb}
			}
			// A fix with neither a build nor a KB ("Click to Run",
			// "Release Notes") names nothing to install or compare.
			for _, pid := range r.ProductIDs {
				product := products[strings.TrimSpace(pid)]
				if product == "" {
					continue
				}
				for _, fixed := range fixes {
					c := claim{file: name, product: product, loose: true, fixed: fixed, kb: kb}
					if msrcRelease.MatchString(product) {
						c.alias = desc
					}
					u.claims[id] = append(u.claims[id], c)
				}
			}
		}
	}
}

// msrcBranch is a branch of a CVRF product tree, whose leaves may name
// products too.
type msrcBranch struct {
	Products []struct {
		ID   string `xml:"ProductID,attr"`
		Name string `xml:",chardata"`
	} `xml:"FullProductName"`
	Branches []msrcBranch `xml:"Branch"`
}

func (b msrcBranch) names(products map[string]string) {
	for _, p := range b.Products {
		products[strings.TrimSpace(p.ID)] = strings.TrimSpace(p.Name)
	}
	for _, c := range b.Branches {
		c.names(products)
	}
}

// csafBranch is a branch of a CSAF product tree.
type csafBranch struct {
	Category string `json:"category"`
	Name     string `json:"name"`
	Product  *struct {
		ID     string `json:"product_id"`
		Helper *struct {
			PURL string `json:"purl"`
		} `json:"product_identification_helper"`
	} `json:"product"`
	Branches []csafBranch `json:"branches"`
}

// versions records, for each product under b, the versions its branches
// and package URL name.
func (b csafBranch) versions(above []string, out map[string][]string) {
	if b.Category == "product_version" || b.Category == "product_version_range" {
		above = append(slices.Clip(above), b.Name)
	}
	if b.Product != nil {
		vs := slices.Clone(above)
		if h := b.Product.Helper; h != nil {
			if _, v, ok := strings.Cut(h.PURL, "@"); ok {
				v, _, _ = strings.Cut(v, "?")
				vs = append(vs, v)
			}
		}
		out[b.Product.ID] = vs
	}
	for _, c := range b.Branches {
		c.versions(above, out)
	}
}

func readCSAF(t *testing.T, u *upstream, name string, data []byte) {
	if path.Ext(name) != ".json" {
		return
	}
	var d struct {
		Document struct {
			CSAFVersion string `json:"csaf_version"`
			Publisher   struct {
				Name string `json:"name"`
			} `json:"publisher"`
		} `json:"document"`
		ProductTree struct {
			Branches      []csafBranch `json:"branches"`
			Relationships []struct {
				Product struct {
					ID string `json:"product_id"`
				} `json:"full_product_name"`
				Reference string `json:"product_reference"`
			} `json:"relationships"`
		} `json:"product_tree"`
		Vulnerabilities []struct {
			CVE           string `json:"cve"`
			ProductStatus struct {
				Fixed      []string `json:"fixed"`
				FirstFixed []string `json:"first_fixed"`
			} `json:"product_status"`
			Remediations []struct {
				Category   string   `json:"category"`
				ProductIDs []string `json:"product_ids"`
			} `json:"remediations"`
		} `json:"vulnerabilities"`
	}
	if err := json.Unmarshal(data, &d); err != nil || !strings.HasPrefix(d.Document.CSAFVersion, "2.") {
		t.Errorf("%s: not a csaf 2 document: %v", name, err)
		return
	}
	versions := map[string][]string{}
	for _, b := range d.ProductTree.Branches {
		b.versions(nil, versions)
	}
	for _, r := range d.ProductTree.Relationships {
		versions[r.Product.ID] = versions[r.Reference]
	}
	source := "csaf:" + strings.TrimSpace(d.Document.Publisher.Name)
	if strings.HasPrefix(name, "msrc/") {
		// MSRC's own CSAF documents are read by the msrc parser.
		source = "msrc"
	}
	for _, v := range d.Vulnerabilities {
		id, ok := canonical(v.CVE)
		if !ok {
			continue
		}
		u.sources.add(id, source)
		add := func(vs []string) {
			// A product named without any version (a product family) is
			// fixed by an advisory, not by a version this test can find
			// in the file.
			if len(vs) > 0 {
				u.claims[id] = append(u.claims[id], claim{file: name, candidates: vs})
			}
		}
		for _, pid := range append(slices.Clone(v.ProductStatus.Fixed), v.ProductStatus.FirstFixed...) {
			add(versions[pid])
		}
		for _, r := range v.Remediations {
			if r.Category != "vendor_fix" {
				continue
			}
			for _, pid := range r.ProductIDs {
				// The affected range of a vendor fix ends at the fix when
				// it is bounded by "<"; "<=" names the last affected
				// version, not a fix.
				var bounded []string
				for _, s := range versions[pid] {
					if strings.Contains(s, "<") && !strings.Contains(s, "<=") {
						bounded = append(bounded, s)
					}
				}
				add(bounded)
			}
		}
	}
}

// matches reports whether atom a of product p is the fix c names.
func (c claim) matches(p cve.Product, a cve.Atom) bool {
	switch {
	case c.candidates != nil:
		return a.FixedVersion != "" && slices.ContainsFunc(c.candidates, func(s string) bool { return strings.Contains(s, a.FixedVersion) })
	case c.loose:
		named := p.Product == c.product || c.alias != "" && p.Product == c.alias ||
			strings.Contains(c.product, " "+p.Product+" ") || strings.HasPrefix(c.product, p.Product+"-")
		return named && a.FixedVersion == c.fixed && a.KB == c.kb
	}
	return p.Ecosystem == c.ecosystem && p.Product == c.product && a.FixedVersion == c.fixed
}

func (c claim) String() string {
	switch {
	case c.candidates != nil:
		return c.file + ": a fix among " + strings.Join(c.candidates, " | ")
	case c.kb != "":
		return c.file + ": " + c.product + " " + c.fixed + " " + c.kb
	}
	return c.file + ": " + strings.TrimSpace(c.ecosystem+" "+c.product) + " " + c.fixed
}

func TestRemediationFromEverySource(t *testing.T) {
	if testing.Short() {
		t.Skip("reads every record of the bundled sample")
	}
	ctx := context.Background()
	db, fsys := dataCatalog(t)
	u := readUpstream(t, fsys)
	if len(u.claims) == 0 {
		t.Fatal("the files name no fixes")
	}

	ids := map[string]bool{}
	for id := range u.sources {
		ids[id] = true
	}
	for id := range u.optional {
		ids[id] = true
	}
	for id := range u.annotations {
		ids[id] = true
	}
	checked := 0
	for id := range ids {
		rec, err := db.Record(ctx, id)
		if u.sources[id] == nil && u.optional[id] == nil {
			// EPSS alone makes no record.
			if err == nil {
				t.Errorf("%s: a record from %v alone", id, keys(u.annotations[id]))
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", id, err)
			continue
		}
		checked++

		// Each atom carries its source and license.
		eol := false
		for _, p := range rec.Remediation.Products {
			for _, a := range p.Atoms {
				if a.Source == "" || a.License == "" {
					t.Errorf("%s %s %s %s: source %q license %q", id, p.Ecosystem, p.Product, a.FixedVersion, a.Source, a.License)
				}
				eol = eol || a.EOL != nil
			}
		}

		// dataSources names exactly the sources whose files know the CVE
		// (those that reject it, for a rejected record), the optional ones
		// when they add something.
		want, optional := u.sources[id], u.optional[id]
		if rec.State == cve.StateRejected {
			want, optional = u.rejecters[id], nil
		} else {
			want = union(want, u.annotations[id])
		}
		if eol {
			want = union(want, map[string]bool{"eol": true})
		}
		got := map[string]bool{}
		for _, d := range rec.DataSources {
			got[d.Name] = true
		}
		for name := range got {
			if !want[name] && !optional[name] {
				t.Errorf("%s: dataSources %v name %s, want %v", id, keys(got), name, keys(want))
			}
		}
		for name := range want {
			if !got[name] {
				t.Errorf("%s: dataSources %v lack %s", id, keys(got), name)
			}
		}

		if rec.State == cve.StateRejected {
			continue
		}
		for _, c := range u.claims[id] {
			found := false
			for _, p := range rec.Remediation.Products {
				for _, a := range p.Atoms {
					found = found || c.matches(p, a)
				}
			}
			if !found {
				t.Errorf("%s: no atom for %s", id, c)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no record checked")
	}
	t.Logf("%d records, %d with fixes named upstream", checked, len(u.claims))
}

func union(a, b map[string]bool) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// debianEOL reads the end of life of each Debian release from the
// endoflife.date product file: a date, or true for ended without a date.
func debianEOL(t *testing.T, fsys fs.FS) map[string]string {
	t.Helper()
	data, err := fs.ReadFile(fsys, "eol/products/debian.md")
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.SplitN(string(data), "---", 3)
	if len(parts) < 3 {
		t.Fatal("debian.md: no front matter")
	}
	var front struct {
		Releases []struct {
			Cycle string `yaml:"releaseCycle"`
			EOL   string `yaml:"eol"`
		} `yaml:"releases"`
	}
	if err := yaml.Unmarshal([]byte(parts[1]), &front); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, r := range front.Releases {
		out[r.Cycle] = r.EOL
	}
	return out
}

// windowsRelease names the Windows releases, which Microsoft updates by
// KB; tools and apps named "Windows ..." (Windows Terminal, Windows
// Sysmon, the Hardware Lab Kit) are updated otherwise.
var windowsRelease = regexp.MustCompile(`^Windows (?:7|8\.1|RT 8\.1|10|11|Server 20[0-9]{2})\b`)

// TestDebianEOLAndWindowsKB checks that every Debian atom on a release past
// its end of life carries eol (and no other does), and that every atom MSRC
// gives for a Windows release carries its KB. The CNA's atoms for Windows
// products, from the CVE List, name builds only: the CVE record names no
// KB, and the KB of MSRC's atom for the same build stands beside them with
// MSRC's own provenance.
func TestDebianEOLAndWindowsKB(t *testing.T) {
	ctx := context.Background()
	db, fsys := dataCatalog(t)
	eols := debianEOL(t, fsys)
	today := sampleNow[:len("2006-01-02")]
	var ended, supported, kbs int
	err := db.Walk(ctx, "", func(s cve.Summary) error {
		if !s.HasRemediation {
			return nil
		}
		rec, err := db.Record(ctx, s.CVEID)
		if err != nil {
			return err
		}
		for _, p := range rec.Remediation.Products {
			release, isDebian := strings.CutPrefix(p.Ecosystem, "Debian:")
			for _, a := range p.Atoms {
				switch {
				case isDebian:
					eol, known := eols[release]
					past := known && (eol == "true" || eol != "false" && eol <= today)
					if past != (a.EOL != nil) {
						t.Errorf("%s %s %s %s: eol %+v, release ends %q", s.CVEID, p.Ecosystem, p.Product, a.FixedVersion, a.EOL, eol)
						continue
					}
					if !past {
						supported++
						continue
					}
					ended++
					if eol != "true" && (a.EOL.EOLFrom == nil || *a.EOL.EOLFrom != eol) {
						t.Errorf("%s %s %s: eolFrom %v, want %s", s.CVEID, p.Ecosystem, p.Product, a.EOL.EOLFrom, eol)
					}
				case p.Ecosystem == "Windows" && a.Source == "Microsoft Security Response Center" &&
					windowsRelease.MatchString(p.Product) && !strings.Contains(p.Product, "HLK"):
					if !msrcKB.MatchString(a.KB) || !strings.HasPrefix(a.KB, "KB") {
						t.Errorf("%s %s %s: kb %q", s.CVEID, p.Product, a.FixedVersion, a.KB)
					}
					kbs++
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if *dataDir == "" && (ended == 0 || supported == 0 || kbs == 0) {
		t.Errorf("the sample has %d Debian atoms on ended releases, %d on supported ones and %d Windows atoms with a KB; want some of each", ended, supported, kbs)
	}
	t.Logf("%d Debian atoms on ended releases, %d on supported ones, %d Windows atoms with a KB", ended, supported, kbs)
}
