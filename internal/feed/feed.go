// Package feed reads upstream locations (files, directories, zip archives,
// gzip files and http(s) URLs) and hands each file to a format parser. The
// parsers live in the packages below this one, one per upstream format.
package feed

import (
	"context"
	"errors"
	"io"

	"github.com/patchline/patchline/internal/cve"
)

// Sink receives what a parser reads from a file.
type Sink interface {
	// Facts receives the facts of one upstream record about one CVE. An
	// error from Facts stops the parse and is returned by the parser.
	Facts(f *cve.Facts) error
	// Lifecycle receives the support window of one product release.
	Lifecycle(l *cve.Lifecycle) error
	// Reject counts one malformed record and names it (a file name, a file
	// name with a record id or line, ...) so that an operator can find it.
	Reject(name string, err error)
}

// Parser reads one upstream format.
type Parser struct {
	// Name is the ingest source name: cvelist, nvd, kev, epss ...
	Name string
	// Exts are the file name endings the parser reads (".json", ".csv");
	// compression endings are removed before matching. Other files of a
	// location are passed over.
	Exts []string
	// Parse reads one file. It reports a malformed record inside the file
	// to sink.Reject and goes on; it returns an error when the file as a
	// whole cannot be parsed (the caller then rejects the whole file) or
	// when the sink fails.
	Parse func(ctx context.Context, name string, r io.Reader, sink Sink) error
}

// ErrUnreadable marks an error reading a location, as opposed to an error
// in its content: it fails the whole ingest run.
var ErrUnreadable = errors.New("location cannot be read")
