package ingest

import (
	"encoding/json"

	"github.com/patchline/patchline/internal/cve"
)

// decodeFacts decodes the JSON of a cve.Facts into f as json.Unmarshal
// does. The stored facts of a run are decoded again to be merged, which
// with encoding/json's reflection costs as much as all of the merging; this
// decoder reads the members it knows, as json.Marshal writes them, several
// times faster, and hands anything else (a member it does not know, a
// spelling json.Marshal does not write, malformed text) to json.Unmarshal.
func decodeFacts(body []byte, f *cve.Facts) error {
	d := factsDecoder{b: body}
	var fast cve.Facts
	if d.facts(&fast) && d.end() {
		*f = fast
		return nil
	}
	return json.Unmarshal(body, f)
}

// facts reads the members of a cve.Facts that json.Marshal writes.
func (d *factsDecoder) facts(f *cve.Facts) bool {
	return d.object(func(key string) bool {
		switch key {
		case "cveId":
			return d.str(&f.CVEID)
		case "feed":
			return d.str(&f.Feed)
		case "doc":
			return d.str(&f.Doc)
		case "source":
			return d.null() || d.dataSource(&f.Source)
		case "state":
			return d.str(&f.State)
		case "rejectedReason":
			return d.str(&f.RejectedReason)
		case "description":
			return d.str(&f.Description)
		case "published":
			return d.optTime(&f.Published)
		case "modified":
			return d.optTime(&f.Modified)
		case "metrics":
			return d.metrics(&f.Metrics)
		case "cwes":
			return d.strings(&f.CWEs)
		case "references":
			return d.references(&f.References)
		case "atoms":
			return d.atoms(&f.Atoms)
		case "kev":
			if d.null() {
				f.KEV = nil
				return true
			}
			if f.KEV == nil {
				f.KEV = new(cve.KEV)
			}
			return d.kev(f.KEV)
		case "epss":
			if d.null() {
				f.EPSS = nil
				return true
			}
			if f.EPSS == nil {
				f.EPSS = new(cve.EPSS)
			}
			return d.epss(f.EPSS)
		}
		return false
	})
}

func (d *factsDecoder) dataSource(s *cve.DataSource) bool {
	return d.object(func(key string) bool {
		switch key {
		case "name":
			return d.str(&s.Name)
		case "use":
			return d.str(&s.Use)
		case "license":
			return d.str(&s.License)
		case "url":
			return d.optStr(&s.URL)
		}
		return false
	})
}

func (d *factsDecoder) metrics(p *[]cve.Metric) bool {
	if d.null() {
		*p = nil
		return true
	}
	var out []cve.Metric
	ok, empty := d.array(func() bool {
		var m cve.Metric
		if !d.null() && !d.object(func(key string) bool {
			switch key {
			case "version":
				return d.str(&m.Version)
			case "vector":
				return d.str(&m.Vector)
			case "score":
				return d.float(&m.Score)
			case "severity":
				return d.str(&m.Severity)
			case "source":
				return d.str(&m.Source)
			case "type":
				return d.str(&m.Type)
			}
			return false
		}) {
			return false
		}
		out = append(out, m)
		return true
	})
	if empty {
		out = []cve.Metric{}
	}
	*p = out
	return ok
}

func (d *factsDecoder) references(p *[]cve.Reference) bool {
	if d.null() {
		*p = nil
		return true
	}
	var out []cve.Reference
	ok, empty := d.array(func() bool {
		var r cve.Reference
		if !d.null() && !d.object(func(key string) bool {
			switch key {
			case "url":
				return d.str(&r.URL)
			case "tags":
				return d.strings(&r.Tags)
			}
			return false
		}) {
			return false
		}
		out = append(out, r)
		return true
	})
	if empty {
		out = []cve.Reference{}
	}
	*p = out
	return ok
}

func (d *factsDecoder) atoms(p *[]cve.ProductAtom) bool {
	if d.null() {
		*p = nil
		return true
	}
	var out []cve.ProductAtom
	ok, empty := d.array(func() bool {
		var a cve.ProductAtom
		if !d.null() && !d.object(func(key string) bool {
			switch key {
			case "ecosystem":
				return d.str(&a.Ecosystem)
			case "product":
				return d.str(&a.Product)
			case "release":
				return d.str(&a.Release)
			case "fixedVersion":
				return d.str(&a.FixedVersion)
			case "affectedRange":
				return d.optStr(&a.AffectedRange)
			case "advisoryId":
				return d.optStr(&a.AdvisoryID)
			case "sourceUrl":
				return d.optStr(&a.SourceURL)
			case "source":
				return d.str(&a.Source)
			case "license":
				return d.str(&a.License)
			case "eol":
				if d.null() {
					a.EOL = nil
					return true
				}
				if a.EOL == nil {
					a.EOL = new(cve.EOL)
				}
				return d.object(func(key string) bool {
					switch key {
					case "eolFrom":
						return d.optStr(&a.EOL.EOLFrom)
					case "eoesFrom":
						return d.optStr(&a.EOL.EOESFrom)
					}
					return false
				})
			case "kb":
				return d.str(&a.KB)
			case "unparsedVersion":
				return d.boolean(&a.Unparsed)
			}
			return false
		}) {
			return false
		}
		out = append(out, a)
		return true
	})
	if empty {
		out = []cve.ProductAtom{}
	}
	*p = out
	return ok
}

func (d *factsDecoder) kev(k *cve.KEV) bool {
	return d.object(func(key string) bool {
		switch key {
		case "dateAdded":
			return d.str(&k.DateAdded)
		case "dueDate":
			return d.str(&k.DueDate)
		case "requiredAction":
			return d.str(&k.RequiredAction)
		case "knownRansomwareCampaignUse":
			return d.str(&k.KnownRansomwareCampaignUse)
		case "vendorProject":
			return d.str(&k.VendorProject)
		case "product":
			return d.str(&k.Product)
		case "vulnerabilityName":
			return d.str(&k.VulnerabilityName)
		case "shortDescription":
			return d.str(&k.ShortDescription)
		case "notes":
			return d.str(&k.Notes)
		case "cwes":
			return d.strings(&k.CWEs)
		}
		return false
	})
}

func (d *factsDecoder) epss(e *cve.EPSS) bool {
	return d.object(func(key string) bool {
		switch key {
		case "score":
			return d.float(&e.Score)
		case "percentile":
			return d.float(&e.Percentile)
		case "date":
			return d.str(&e.Date)
		case "model":
			return d.str(&e.Model)
		}
		return false
	})
}
