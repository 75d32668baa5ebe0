package ingest

import "github.com/patchline/patchline/internal/feed"

// ParserFor returns the parser of the ingest source name, and false when
// this build has none.
func ParserFor(name string) (feed.Parser, bool) {
	p, ok := parsers[name]
	return p, ok
}
