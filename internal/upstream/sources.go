package upstream

import (
	"slices"
	"strings"

	"github.com/patchline/patchline/internal/catalog"
	"github.com/patchline/patchline/internal/errs"
	"github.com/patchline/patchline/internal/feed"
	"github.com/patchline/patchline/internal/feed/csaf"
	"github.com/patchline/patchline/internal/feed/cvelist"
	"github.com/patchline/patchline/internal/feed/debian"
	"github.com/patchline/patchline/internal/feed/eol"
	"github.com/patchline/patchline/internal/feed/epss"
	"github.com/patchline/patchline/internal/feed/kev"
	"github.com/patchline/patchline/internal/feed/msrc"
	"github.com/patchline/patchline/internal/feed/nvd"
	"github.com/patchline/patchline/internal/feed/osv"
	"github.com/patchline/patchline/internal/ingest"
)

// Store is the catalog a sync writes: records through ingest runs, and the
// state of each source.
type Store interface {
	catalog.Store
	catalog.SyncStates
}

// Source is one upstream to sync.
type Source struct {
	// Name is the ingest source name: cvelist, nvd, kev, epss, osv,
	// debian, msrc, eol.
	Name string
	// URL is the base URL of the upstream (see Defaults), or of a mirror
	// that speaks the same protocol; or a local directory or file, a
	// mirror ingested whole when it changed.
	URL string
}

// order is the order in which sources are listed and synced.
var order = []string{"cvelist", "nvd", "kev", "epss", "osv", "debian", "msrc", "eol"}

// mirrorOnly are the sources without an upstream protocol of their own,
// synced only from a local mirror: vendor CSAF providers each publish
// their own tree.
var mirrorOnly = map[string]bool{"csaf": true}

// defaultURLs are the upstreams' own addresses. The eol URL is a template:
// {product} stands for each product.
var defaultURLs = map[string]string{
	"cvelist": "https://api.github.com/repos/CVEProject/cvelistV5/releases",
	"nvd":     "https://services.nvd.nist.gov/rest/json/cves/2.0",
	"kev":     "https://www.cisa.gov/sites/default/files/feeds/known_exploited_vulnerabilities.json",
	"epss":    "https://epss.empiricalsecurity.com/epss_scores-current.csv.gz",
	"osv":     "https://osv-vulnerabilities.storage.googleapis.com",
	"debian":  "https://security-tracker.debian.org/tracker/data/json",
	"msrc":    "https://api.msrc.microsoft.com/cvrf/v3.0",
	"eol":     "https://endoflife.date/api/v1/products/{product}/",
}

// DefaultOSVEcosystems are the OSV ecosystems synced unless configured
// otherwise: the package registries and distributions the catalog serves.
var DefaultOSVEcosystems = []string{
	"PyPI", "npm", "Go", "Maven", "crates.io", "RubyGems", "Packagist", "NuGet", "Hex", "Pub",
	"Debian", "Ubuntu", "AlmaLinux", "Rocky Linux", "Alpine",
}

// DefaultEOLProducts are the endoflife.date products synced unless
// configured otherwise: those whose releases the catalog's fixes name.
var DefaultEOLProducts = []string{"debian", "ubuntu", "alpine-linux", "almalinux", "rocky-linux", "rhel"}

// Names returns the names of the sources that can be synced, in sync
// order; csaf only from a local directory.
func Names() []string { return append(slices.Clone(order), "csaf") }

// Defaults returns every source this build can sync, at its default URL.
// A source whose parser this build lacks is left out.
func Defaults() []Source {
	var out []Source
	for _, name := range order {
		if _, ok := parserFor(name); ok {
			out = append(out, Source{Name: name, URL: defaultURLs[name]})
		}
	}
	return out
}

// ParseSource parses a SOURCE or SOURCE=URL argument: a source at its
// default URL, or at the given URL, directory or file.
func ParseSource(arg string) (Source, error) {
	name, loc, hasLoc := strings.Cut(arg, "=")
	def, ok := defaultURLs[name]
	if !ok && !mirrorOnly[name] {
		return Source{}, errs.Invalidf("unknown source %q: want one of %s", name, strings.Join(Names(), ", "))
	}
	if mirrorOnly[name] && (!hasLoc || !isLocal(loc)) {
		return Source{}, errs.Invalidf("source %s is synced only from a local directory: %s=DIR", name, name)
	}
	if _, ok := parserFor(name); !ok {
		return Source{}, errs.Invalidf("source %s: this build has no %s parser", name, name)
	}
	if !hasLoc {
		return Source{Name: name, URL: def}, nil
	}
	if loc == "" {
		return Source{}, errs.Invalidf("%q: want SOURCE or SOURCE=URL", arg)
	}
	return Source{Name: name, URL: loc}, nil
}

// builtin are the parsers sync uses when the ingest registry has none of
// that name.
var builtin = map[string]feed.Parser{
	cvelist.Parser.Name: cvelist.Parser,
	nvd.Parser.Name:     nvd.Parser,
	kev.Parser.Name:     kev.Parser,
	msrc.Parser.Name:    msrc.Parser,
	epss.Parser.Name:    epss.Parser,
	osv.Parser.Name:     osv.Parser,
	debian.Parser.Name:  debian.Parser,
	eol.Parser.Name:     eol.Parser,
	csaf.Parser.Name:    csaf.Parser,
}

// parserFor returns the parser of an ingest source: the ingest registry's,
// else one of the builtin ones.
func parserFor(name string) (feed.Parser, bool) {
	if p, ok := ingest.ParserFor(name); ok {
		return p, true
	}
	p, ok := builtin[name]
	return p, ok
}
