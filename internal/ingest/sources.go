package ingest

import (
	"fmt"
	"sort"
	"strings"

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
	"github.com/patchline/patchline/internal/sample"
)

// parsers are the ingest sources by name.
var parsers = map[string]feed.Parser{}

func init() {
	for _, p := range []feed.Parser{
		cvelist.Parser, nvd.Parser, kev.Parser, epss.Parser, osv.Parser, debian.Parser, msrc.Parser, csaf.Parser, eol.Parser,
	} {
		parsers[p.Name] = p
	}
}

// Names returns the names of the ingest sources.
func Names() []string {
	names := make([]string, 0, len(parsers))
	for n := range parsers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ParseSource parses a SOURCE=LOCATION argument.
func ParseSource(arg string) (Source, error) {
	name, loc, ok := strings.Cut(arg, "=")
	if !ok || loc == "" {
		return Source{}, fmt.Errorf("%q: want SOURCE=LOCATION", arg)
	}
	p, ok := parsers[name]
	if !ok {
		return Source{}, fmt.Errorf("unknown source %q: want one of %s", name, strings.Join(Names(), ", "))
	}
	return Source{Parser: p, Location: loc}, nil
}

// SampleSources returns the sources that load the bundled sample catalog.
func SampleSources() []Source {
	var out []Source
	for _, name := range sample.Feeds {
		if p, ok := parsers[name]; ok {
			asOf, _ := sample.Date(name)
			out = append(out, Source{Parser: p, Location: name, FS: sample.FS(), Label: sample.Label + name, AsOf: asOf})
		}
	}
	return out
}
