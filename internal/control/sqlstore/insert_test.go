package sqlstore

import (
	"context"
	"fmt"
	"testing"

	"github.com/patchline/patchline/internal/exposure"
)

// TestPutRisksInMany stores more risks than one statement of many rows
// holds on PostgreSQL (insertRows), twice: the second time each row is
// updated in place, and the last risk of one CVE wins.
func TestPutRisksInMany(t *testing.T) {
	ctx := context.Background()
	risks := func(cvss float64) []exposure.Risk {
		var out []exposure.Risk
		for i := range 400 {
			v := cvss
			out = append(out, exposure.Risk{CVEID: fmt.Sprintf("CVE-2024-%d", 10000+i), CVSS: &v, Severity: "HIGH"})
		}
		// The same CVE again: this one wins.
		last := cvss + 1
		return append(out, exposure.Risk{CVEID: "CVE-2024-10000", CVSS: &last, KEV: true})
	}
	for _, e := range benchEngines {
		t.Run(e.name, func(t *testing.T) {
			s := e.open(t)
			for _, cvss := range []float64{5, 7} {
				if err := s.PutRisks(ctx, risks(cvss)); err != nil {
					t.Fatal(err)
				}
				var n, kev int
				var sum float64
				if err := s.rq().QueryRow(ctx, `SELECT count(*), sum(cvss), count(*) FILTER (WHERE kev) FROM cve_risks`).Scan(&n, &sum, &kev); err != nil {
					t.Fatal(err)
				}
				if want := 400*cvss + 1; n != 400 || sum != want || kev != 1 {
					t.Errorf("after PutRisks with cvss %v: %d rows, sum of cvss %v, %d KEV; want 400, %v, 1", cvss, n, sum, kev, want)
				}
			}
		})
	}
}
