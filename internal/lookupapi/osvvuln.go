package lookupapi

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/ossf/osv-schema/bindings/go/osvschema"
	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/errs"
	"github.com/patchline/patchline/internal/exposure"
)

// osvVuln answers GET /osv/v1/vulns/{id}: the OSV document of a CVE, or
// of an advisory the catalog knows (see advisoryOSV).
func (s *Server) osvVuln(w http.ResponseWriter, r *http.Request) error {
	raw := r.PathValue("id")
	var (
		v   *osvschema.Vulnerability
		err error
	)
	if id, perr := cve.ParseID(raw); perr == nil {
		rec, err := s.catalog.Record(r.Context(), id)
		if err != nil {
			if errors.Is(err, errs.ErrNotFound) {
				return errs.NotFoundf("%s is not in the catalog", id)
			}
			return err
		}
		if v, err = OSV(rec); err != nil {
			return err
		}
	} else {
		idx, err := s.packageIndex()
		if err != nil {
			return err
		}
		if v, err = s.advisoryOSV(r.Context(), idx, raw); err != nil {
			return err
		}
	}
	body, err := appendOSV(nil, v)
	if err != nil {
		return err
	}
	writeCacheable(w, r, "application/json", cacheRecord, append(body, '\n'))
	return nil
}

// advisoryOSV returns the OSV document of an advisory the catalog knows
// through the fixes it gives (GHSA-…, PYSEC-…, RUSTSEC-…, GO-…, DSA-…,
// ALSA-…): the advisory's id, the affected packages of its fixes, and its
// CVEs, as aliases when it names one (a GitHub or Go advisory is the same
// vulnerability), as related when it names several (an erratum). The
// description, scores and references are the CVE's when there is one.
func (s *Server) advisoryOSV(ctx context.Context, idx *exposure.Index, id string) (*osvschema.Vulnerability, error) {
	if len(id) > 128 {
		return nil, errs.Invalidf("id is longer than 128 bytes")
	}
	ids := idx.Advisory(id)
	if len(ids) == 0 {
		return nil, errs.NotFoundf("%s is neither a CVE of the catalog nor an advisory of its fixes", clipDetail(id))
	}
	adv := &cve.Record{CVEID: id, State: cve.StatePublished}
	var cves []*cve.Record
	for _, cid := range ids {
		rec, err := s.catalog.Record(ctx, cid)
		if errors.Is(err, errs.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		cves = append(cves, rec)
		// The advisory's fixes, each product once: an erratum gives the
		// same fixes for each of its CVEs.
		for _, p := range rec.Remediation.Products {
			for _, a := range p.Atoms {
				if a.AdvisoryID == nil || !strings.EqualFold(strings.TrimSpace(*a.AdvisoryID), id) {
					continue
				}
				adv.CVEID = strings.TrimSpace(*a.AdvisoryID) // as the source spells it
				i := slices.IndexFunc(adv.Remediation.Products, func(q cve.Product) bool {
					return q.Ecosystem == p.Ecosystem && q.Product == p.Product
				})
				if i < 0 {
					i = len(adv.Remediation.Products)
					adv.Remediation.Products = append(adv.Remediation.Products, cve.Product{Ecosystem: p.Ecosystem, Product: p.Product})
				}
				prod := &adv.Remediation.Products[i]
				if !slices.ContainsFunc(prod.Atoms, func(b cve.Atom) bool { return sameFix(a, b) }) {
					prod.Atoms = append(prod.Atoms, a)
				}
			}
		}
		for _, d := range rec.DataSources {
			if !slices.ContainsFunc(adv.DataSources, func(o cve.DataSource) bool { return o.Name == d.Name }) {
				adv.DataSources = append(adv.DataSources, d)
			}
		}
		if rec.ModifiedAt != nil && (adv.ModifiedAt == nil || rec.ModifiedAt.After(*adv.ModifiedAt)) {
			adv.ModifiedAt = rec.ModifiedAt
		}
	}
	if len(cves) == 0 {
		return nil, errs.NotFoundf("%s is neither a CVE of the catalog nor an advisory of its fixes", clipDetail(id))
	}
	adv.Remediation.Available = slices.ContainsFunc(adv.Remediation.Products, func(p cve.Product) bool {
		return slices.ContainsFunc(p.Atoms, func(a cve.Atom) bool { return a.HasFix() })
	})
	if len(cves) == 1 {
		c := cves[0]
		adv.Description, adv.Severity, adv.CVSS, adv.EPSS, adv.KEV = c.Description, c.Severity, c.CVSS, c.EPSS, c.KEV
		adv.CWEs, adv.References, adv.PublishedAt = c.CWEs, c.References, c.PublishedAt
	} else {
		var names []string
		for _, c := range cves {
			names = append(names, c.CVEID)
		}
		desc := adv.CVEID + " fixes " + strings.Join(names, ", ") + "."
		adv.Description = &desc
	}
	v, err := OSV(adv)
	if err != nil {
		return nil, err
	}
	// The advisory's own CVEs, not the other advisories of its fixes.
	v.Aliases, v.Related = nil, nil
	for _, c := range cves {
		if len(cves) == 1 {
			v.Aliases = append(v.Aliases, c.CVEID)
		} else {
			v.Related = append(v.Related, c.CVEID)
		}
	}
	return v, nil
}

// sameFix reports whether two atoms say the same fix, from the same
// source.
func sameFix(a, b cve.Atom) bool {
	eq := func(x, y *string) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	return a.FixedVersion == b.FixedVersion && a.Source == b.Source && a.KB == b.KB &&
		eq(a.AffectedRange, b.AffectedRange) && eq(a.SourceURL, b.SourceURL)
}
