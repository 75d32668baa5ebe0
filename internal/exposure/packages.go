package exposure

import (
	"context"
	"errors"
	"fmt"

	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/device"
	"github.com/patchline/patchline/internal/errs"
	"github.com/patchline/patchline/internal/sbom"
	"github.com/patchline/patchline/internal/version"
)

// MatchPackage returns the findings of one package: Match of an inventory
// holding only that package. A package without version finds every CVE
// of its product, as Unknown.
func (x *Index) MatchPackage(p sbom.Package) []Finding {
	findings, _ := x.Match(device.Inventory{Software: []device.Software{
		{Name: p.Name, Version: p.Version, Ecosystem: p.Ecosystem},
	}})
	return findings
}

// PackageResult is what the catalog says of one package.
type PackageResult struct {
	Package         sbom.Package           `json:"package"`
	Vulnerabilities []PackageVulnerability `json:"vulnerabilities"`
}

// PackageVulnerability is one CVE that affects (or may affect) a package:
// the finding of Match, the fix of each source that gives one, and the
// CVE's scores.
type PackageVulnerability struct {
	CVEID   string `json:"cveId"`
	Status  Status `json:"status"`
	Reason  string `json:"reason,omitempty"`
	Product string `json:"product"` // as the catalog names it
	// FixedVersion is the fix that applies to the version asked about:
	// the least fixed version above it; "" when none is known.
	FixedVersion string `json:"fixedVersion"`
	KB           string `json:"kb,omitempty"`
	EOLFrom      string `json:"eolFrom,omitempty"`
	// Fixes are, per source, the atom of the product with the least fixed
	// version above the version asked about: the fix with its provenance.
	Fixes    []cve.Atom `json:"fixes"`
	Severity *string    `json:"severity"`
	CVSS     *float64   `json:"cvss"`
	KEV      *cve.KEV   `json:"kev"`
	EPSS     *cve.EPSS  `json:"epss"`
}

// QueryPackages returns, for each package in order, the CVEs that affect
// it with the fix of each source, read from cat. The packages must have
// passed sbom.Check.
func (x *Index) QueryPackages(ctx context.Context, cat cve.Catalog, pkgs []sbom.Package) ([]PackageResult, error) {
	out := make([]PackageResult, len(pkgs))
	records := map[string]*cve.Record{}
	for i, p := range pkgs {
		out[i] = PackageResult{Package: p, Vulnerabilities: []PackageVulnerability{}}
		for _, f := range x.MatchPackage(p) {
			rec, ok := records[f.CVEID]
			if !ok {
				r, err := cat.Record(ctx, f.CVEID)
				switch {
				case errors.Is(err, errs.ErrNotFound):
					// Removed from the catalog since the index last saw it.
				case err != nil:
					return nil, fmt.Errorf("query packages: %w", err)
				}
				rec, records[f.CVEID] = r, r
			}
			if rec == nil {
				continue
			}
			v := PackageVulnerability{
				CVEID: f.CVEID, Status: f.Status, Reason: f.Reason, Product: f.Product,
				FixedVersion: f.Fixed, KB: f.KB, EOLFrom: f.EOLFrom,
				Fixes:    sourceFixes(rec, f.Ecosystem, f.Product, p.Version),
				Severity: rec.Severity, KEV: rec.KEV, EPSS: rec.EPSS,
			}
			if rec.CVSS != nil {
				score := rec.CVSS.Score
				v.CVSS = &score
			}
			out[i].Vulnerabilities = append(out[i].Vulnerabilities, v)
		}
	}
	return out, nil
}

// sourceFixes returns, per source, the atom of a record's product with the
// least fixed version above installed (whose affected range, when it has
// one, holds installed), in the order the sources first appear. Without
// an installed version, or when it does not parse, every source's atoms
// are candidates and the least fixed version wins.
func sourceFixes(rec *cve.Record, ecosystem, product, installed string) []cve.Atom {
	v, verr := version.Parse(ecosystem, installed)
	best := map[string]int{}
	var out []cve.Atom
	var fixed []version.Version
	for _, p := range rec.Remediation.Products {
		if p.Ecosystem != ecosystem || p.Product != product {
			continue
		}
		for _, a := range p.Atoms {
			fv, err := version.Parse(ecosystem, a.FixedVersion)
			if err != nil || a.Unparsed {
				continue
			}
			if verr == nil {
				if c, err := v.Compare(fv); err != nil || c >= 0 {
					continue
				}
				if a.AffectedRange != nil {
					var pl pool
					if bounds, ok := parseRange(&pl, ecosystem, *a.AffectedRange); ok {
						if in, err := contains(bounds, v); err != nil || !in {
							continue
						}
					}
				}
			}
			i, seen := best[a.Source]
			switch {
			case !seen:
				best[a.Source] = len(out)
				out = append(out, a)
				fixed = append(fixed, fv)
			case less(fv, fixed[i]):
				out[i], fixed[i] = a, fv
			}
		}
	}
	if out == nil {
		out = []cve.Atom{}
	}
	return out
}
