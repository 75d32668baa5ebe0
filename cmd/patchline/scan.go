package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/exposure"
	"github.com/patchline/patchline/internal/lookupapi"
	"github.com/patchline/patchline/internal/sbom"
)

func init() {
	commands["scan"] = command{
		usage: "[--data DIR] [--catalog-db DSN] [--json] [--fail-on SEVERITY] FILE|-",
		run:   runScan,
	}
}

// exitFindings is the exit status of a scan that found vulnerabilities at
// or above --fail-on: apart from 1 (an error) and 2 (a usage mistake), so
// that a CI job can tell them apart.
const exitFindings = 3

// exitError ends a command with an exit status of its own.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// severityRank orders the severities --fail-on takes.
var severityRank = map[string]int{cve.SeverityLow: 1, cve.SeverityMedium: 2, cve.SeverityHigh: 3, cve.SeverityCritical: 4}

// ScanConfig is the typed configuration of `patchline scan`.
type ScanConfig struct {
	Data, CatalogDB string
	JSON            bool
	FailOn          string // a severity, "" for never
	File            string // a path, or - for standard input
}

// Validate checks the configuration and fills in derived defaults.
func (c *ScanConfig) Validate() error {
	if c.CatalogDB == "" {
		c.CatalogDB = "sqlite:" + filepath.Join(c.Data, "catalog.db")
	}
	c.FailOn = strings.ToUpper(c.FailOn)
	if _, ok := severityRank[c.FailOn]; c.FailOn != "" && !ok {
		return fmt.Errorf("--fail-on %q: want CRITICAL, HIGH, MEDIUM or LOW", c.FailOn)
	}
	return nil
}

func runScan(ctx context.Context, env *Env, args []string) error {
	var c ScanConfig
	fs := newFlags("scan", env)
	fs.StringVar(&c.Data, "data", "./patchline-data", "directory of the embedded databases")
	fs.StringVar(&c.CatalogDB, "catalog-db", "", "catalog store DSN (default DATA/catalog.db)")
	fs.BoolVar(&c.JSON, "json", false, "print the report as JSON")
	fs.StringVar(&c.FailOn, "fail-on", "", "exit 3 when a package is affected by a CVE of this severity or above: CRITICAL, HIGH, MEDIUM or LOW")
	if err := parseFlags(fs, env, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errUsage
	}
	c.File = fs.Arg(0)
	if err := c.Validate(); err != nil {
		return err
	}
	var (
		data []byte
		err  error
	)
	if c.File == "-" {
		data, err = io.ReadAll(io.LimitReader(env.Stdin, lookupapi.MaxSBOMBody+1))
	} else {
		data, err = readLimited(c.File, lookupapi.MaxSBOMBody)
	}
	if err != nil {
		return err
	}
	if len(data) > lookupapi.MaxSBOMBody {
		return fmt.Errorf("%s: larger than %d bytes", c.File, lookupapi.MaxSBOMBody)
	}
	var doc *sbom.Document
	if t := bytes.TrimSpace(data); len(t) > 0 && (t[0] == '{' || bytes.HasPrefix(t, []byte("\xef\xbb\xbf{"))) {
		doc, err = sbom.Parse(data)
	} else {
		doc, err = sbom.ParseList(data)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", c.File, err)
	}

	db, err := openCatalogDSN(ctx, c.CatalogDB)
	if err != nil {
		return err
	}
	defer db.Close()
	st, err := db.Stats(ctx)
	if err != nil {
		return err
	}
	if st.Records == 0 {
		return fmt.Errorf("the catalog %s is empty: load it with patchline ingest first", redactDSN(c.CatalogDB))
	}
	idx := exposure.NewIndex()
	if _, err := idx.Refresh(ctx, db); err != nil {
		return err
	}
	results, err := idx.QueryPackages(ctx, db, doc.Packages)
	if err != nil {
		return err
	}
	rep := lookupapi.NewSBOMReport(doc, results)
	if c.JSON {
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		printScan(env.Stdout, rep)
	}
	if c.FailOn == "" {
		return nil
	}
	n := 0
	for _, r := range rep.Results {
		for _, v := range r.Vulnerabilities {
			if v.Status == exposure.Affected && v.Severity != nil && severityRank[strings.ToUpper(*v.Severity)] >= severityRank[c.FailOn] {
				n++
			}
		}
	}
	if n > 0 {
		return &exitError{code: exitFindings, msg: fmt.Sprintf("%d findings at or above %s", n, c.FailOn)}
	}
	return nil
}

// readLimited reads a file of at most max bytes (one byte more to tell a
// larger one).
func readLimited(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, max+1))
}

// printScan writes a scan report as a table: one line per finding, then
// the skipped components and the counts.
func printScan(w io.Writer, rep lookupapi.SBOMReport) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ECOSYSTEM\tPACKAGE\tVERSION\tCVE\tSEVERITY\tKEV\tSTATUS\tFIXED IN")
	for _, r := range rep.Results {
		for _, v := range r.Vulnerabilities {
			sev, kev, fixed := "-", "", v.FixedVersion
			if v.Severity != nil {
				sev = *v.Severity
			}
			if v.KEV != nil {
				kev = "KEV"
			}
			if fixed == "" {
				fixed = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Package.Ecosystem, r.Package.Name, r.Package.Version,
				v.CVEID, sev, kev, v.Status, fixed)
		}
	}
	tw.Flush()
	for _, s := range rep.Skipped {
		fmt.Fprintf(w, "skipped %s %s: %s\n", s.Name, s.Version, s.Reason)
	}
	sum := rep.Summary
	fmt.Fprintf(w, "%s: %d packages, %d vulnerable; %d CVEs (%d critical, %d high, %d known exploited); %d with a fix; %d unknown; %d components skipped\n",
		strings.TrimSpace(rep.Format+" "+rep.Version), sum.Packages, sum.VulnerablePackages, sum.Vulnerabilities, sum.Critical, sum.High, sum.KEV,
		sum.FixAvailable, sum.Unknown, sum.Skipped)
}
