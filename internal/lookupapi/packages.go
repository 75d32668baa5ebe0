package lookupapi

import (
	"errors"
	"net/http"
	"strings"

	"github.com/patchline/patchline/internal/errs"
	"github.com/patchline/patchline/internal/exposure"
	"github.com/patchline/patchline/internal/httpx"
	"github.com/patchline/patchline/internal/sbom"
)

// MaxPackages is the number of packages a package query may ask about.
const MaxPackages = MaxBatch

// maxPackagesBody bounds the body of a package query: 100 purls of a few
// hundred bytes each, and room for whitespace.
const maxPackagesBody = 256 << 10

// MaxSBOMBody bounds the body of an SBOM scan.
const MaxSBOMBody = 16 << 20

// packagesRequest is the body of POST /packages/query.
type packagesRequest struct {
	Packages *[]packageQuery `json:"packages"`
}

// packageQuery is one package of a package query: a purl, or an ecosystem
// and a name; the version in the purl or beside it.
type packageQuery struct {
	PURL      string `json:"purl"`
	Ecosystem string `json:"ecosystem"`
	Name      string `json:"name"`
	Version   string `json:"version"`
}

// packagesResponse is the answer of POST /packages/query.
type packagesResponse struct {
	Results []exposure.PackageResult `json:"results"`
}

// resolve returns the package of q, or an errs.ErrInvalid error.
func (q packageQuery) resolve() (sbom.Package, error) {
	var p sbom.Package
	if q.PURL != "" {
		if q.Ecosystem != "" || q.Name != "" {
			return p, errs.Invalidf("ecosystem and name given beside a purl: give one or the other")
		}
		var err error
		if p, err = sbom.FromPURL(q.PURL); err != nil {
			return p, err
		}
		if p.Version != "" && q.Version != "" && p.Version != q.Version {
			return p, errs.Invalidf("version %q given beside the purl's %q", q.Version, p.Version)
		}
	} else {
		if q.Ecosystem == "" || q.Name == "" {
			return p, errs.Invalidf(`want "purl", or "ecosystem" and "name"`)
		}
		p = sbom.Package{Ecosystem: q.Ecosystem, Name: q.Name}
	}
	if q.Version != "" {
		p.Version = q.Version
	}
	return p, sbom.Check(p)
}

// queryPackages answers POST /packages/query: for each package, in
// request order, the CVEs that affect it with the fix of each source.
func (s *Server) queryPackages(w http.ResponseWriter, r *http.Request) error {
	var req packagesRequest
	if err := decodeBody(w, r, maxPackagesBody, &req); err != nil {
		return err
	}
	if req.Packages == nil {
		return errs.Invalidf(`request body has no "packages": want {"packages": [{"purl": "pkg:pypi/django@4.2.0"}, …]}`)
	}
	if n := len(*req.Packages); n == 0 || n > MaxPackages {
		return errs.Invalidf("packages holds %d packages; want 1 to %d", n, MaxPackages)
	}
	pkgs := make([]sbom.Package, len(*req.Packages))
	for i, q := range *req.Packages {
		p, err := q.resolve()
		if err != nil {
			return errs.Invalidf("packages[%d]: %s", i, errs.Message(err))
		}
		pkgs[i] = p
	}
	idx, err := s.packageIndex()
	if err != nil {
		return unavailable(w, err)
	}
	results, err := idx.QueryPackages(r.Context(), s.catalog, pkgs)
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	return httpx.WriteJSON(w, http.StatusOK, packagesResponse{Results: results})
}

// SBOMReport is the answer of POST /sbom: the findings of each package of
// the document, the components that could not be matched, and counts.
type SBOMReport struct {
	Format  string                   `json:"format"`
	Version string                   `json:"specVersion"`
	Summary Summary                  `json:"summary"`
	Results []exposure.PackageResult `json:"results"`
	Skipped []sbom.Skipped           `json:"skipped"`
}

// Summary counts the findings of an SBOM.
type Summary struct {
	Packages           int `json:"packages"`           // matched against the catalog
	Skipped            int `json:"skipped"`            // components without a usable purl
	VulnerablePackages int `json:"vulnerablePackages"` // with an affected finding
	Vulnerabilities    int `json:"vulnerabilities"`    // distinct CVEs affecting a package
	Critical           int `json:"critical"`           // of those, CRITICAL
	High               int `json:"high"`               // of those, HIGH
	KEV                int `json:"kev"`                // of those, known exploited
	FixAvailable       int `json:"fixAvailable"`       // affected findings with a fixed version
	Unknown            int `json:"unknown"`            // findings of unknown status
}

// NewSBOMReport returns the report of a parsed document and its results.
func NewSBOMReport(doc *sbom.Document, results []exposure.PackageResult) SBOMReport {
	rep := SBOMReport{Format: doc.Format, Version: doc.Version, Results: results, Skipped: doc.Skipped}
	if rep.Skipped == nil {
		rep.Skipped = []sbom.Skipped{}
	}
	rep.Summary.Packages, rep.Summary.Skipped = len(results), len(doc.Skipped)
	cves := map[string]bool{}
	for _, res := range results {
		vulnerable := false
		for _, v := range res.Vulnerabilities {
			if v.Status != exposure.Affected {
				rep.Summary.Unknown++
				continue
			}
			vulnerable = true
			if v.FixedVersion != "" {
				rep.Summary.FixAvailable++
			}
			if cves[v.CVEID] {
				continue
			}
			cves[v.CVEID] = true
			rep.Summary.Vulnerabilities++
			if v.Severity != nil {
				switch strings.ToUpper(*v.Severity) {
				case "CRITICAL":
					rep.Summary.Critical++
				case "HIGH":
					rep.Summary.High++
				}
			}
			if v.KEV != nil {
				rep.Summary.KEV++
			}
		}
		if vulnerable {
			rep.Summary.VulnerablePackages++
		}
	}
	return rep
}

// scanSBOM answers POST /sbom: a CycloneDX or SPDX JSON document matched
// package by package.
func (s *Server) scanSBOM(w http.ResponseWriter, r *http.Request) error {
	body, err := httpx.ReadBody(w, r, MaxSBOMBody)
	if err != nil {
		return tooLargeIsInvalid(err, MaxSBOMBody)
	}
	doc, err := sbom.Parse(body)
	if err != nil {
		return err
	}
	idx, err := s.packageIndex()
	if err != nil {
		return unavailable(w, err)
	}
	results, err := idx.QueryPackages(r.Context(), s.catalog, doc.Packages)
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	return httpx.WriteJSON(w, http.StatusOK, NewSBOMReport(doc, results))
}

// unavailable writes the 503 of a package index being built, or returns
// any other error.
func unavailable(w http.ResponseWriter, err error) error {
	if errors.Is(err, errIndexBuilding) {
		w.Header().Set("Retry-After", "5")
		httpx.WriteProblem(w, http.StatusServiceUnavailable, err.Error())
		return nil
	}
	return err
}
