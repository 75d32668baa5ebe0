package cve

import (
	"context"
	"time"
)

// SourceRecords counts the served records that one data source knows.
type SourceRecords struct {
	// Name is the data source's name as dataSources give it: cvelist,
	// nvd, kev, epss, osv:GHSA, debian, msrc, csaf:Red Hat ...
	Name string
	// License is the license its facts name (of OSV databases and CSAF
	// providers, whose facts each name theirs; empty for the others).
	License string
	// Records counts the served records (rejected ones included) with
	// facts from the source.
	Records int
}

// SourceIngest is what the newest ingest run that read a source did with
// it (a sync's run included).
type SourceIngest struct {
	// Source is the ingest source name: cvelist, nvd, kev ...
	Source string
	// Location is what the run read: a URL, a path, or "sample:FEED" for
	// the bundled sample.
	Location          string
	Started, Finished time.Time
	Read, Added       int
	Changed, Rejected int
}

// SourceCatalog is what a catalog knows of the sources behind it, for the
// sources report and the front page. Its counts read whole tables: callers
// keep them for as long as Generation gives the same number.
type SourceCatalog interface {
	// Generation returns a number that changes whenever an ingest run
	// commits. It reads one row.
	Generation(ctx context.Context) (int64, error)

	// SourceRecords counts, per data source, the served records with
	// facts from it, by name. It reads the keys of every facts row; the
	// OSV databases and CSAF providers are told apart by the letters
	// their document ids start with (GHSA, PYSEC, RHSA …).
	SourceRecords(ctx context.Context) ([]SourceRecords, error)

	// LastIngests returns, per ingest source, the newest ingest run that
	// read it, by source name. It reads the whole log of runs.
	LastIngests(ctx context.Context) ([]SourceIngest, error)
}
