// Package sample embeds the bundled sample catalog: real public records of
// every upstream feed, each folder with its SOURCE.md naming origin and
// license. serve loads it into an empty catalog, and `patchline ingest
// --sample` loads it on demand.
package sample

import (
	"embed"
	"io/fs"
)

//go:embed all:data
var files embed.FS

// Feeds are the sample's folders in ingest order, each named after the
// ingest source that reads it.
var Feeds = []string{"cvelist", "nvd", "kev", "epss", "osv", "debian", "msrc", "eol"}

// FS returns the sample's files: one folder per feed.
func FS() fs.FS {
	sub, err := fs.Sub(files, "data")
	if err != nil {
		panic(err) // the embedded tree always has data/
	}
	return sub
}
