package main

import (
	"encoding/json"
	"io"
	"log"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"
)

// osvEcosystems are the ecosystems whose fixes querybatchRequests asks
// about, by the part of the name before any ':'.
var osvEcosystems = map[string]bool{"PyPI": true, "npm": true, "Go": true, "Maven": true, "crates.io": true,
	"RubyGems": true, "NuGet": true, "Packagist": true, "Debian": true, "Ubuntu": true, "AlmaLinux": true, "Alpine": true}

// querybatchRequests returns n querybatch requests of 1,000 packages each,
// picked from the products of the records the batch requests captured,
// each at one of the versions that fix it.
func querybatchRequests(rng *rand.Rand, batches []*request, n int) []*request {
	type pkg struct{ eco, name, version string }
	var pkgs []pkg
	for _, r := range batches {
		var resp struct {
			Results []struct {
				Remediation struct {
					Products []struct {
						Ecosystem, Product string
						Atoms              []struct {
							FixedVersion string `json:"fixedVersion"`
							Unparsed     bool   `json:"unparsedVersion"`
						}
					}
				}
			}
		}
		json.Unmarshal(r.resp, &resp)
		for _, rec := range resp.Results {
			for _, p := range rec.Remediation.Products {
				base, _, _ := strings.Cut(p.Ecosystem, ":")
				for _, a := range p.Atoms {
					if osvEcosystems[base] && !a.Unparsed && a.FixedVersion != "" {
						pkgs = append(pkgs, pkg{p.Ecosystem, p.Product, a.FixedVersion})
					}
				}
			}
		}
	}
	if len(pkgs) == 0 {
		log.Printf("no package of an OSV ecosystem in the captured records: querybatch not measured")
		return nil
	}
	// Each package as likely as any other, as in an SBOM, whatever the
	// number of its fixes: one version of each, picked among its fixes.
	byName := map[[2]string][]string{}
	var names [][2]string
	for _, p := range pkgs {
		k := [2]string{p.eco, p.name}
		if _, ok := byName[k]; !ok {
			names = append(names, k)
		}
		byName[k] = append(byName[k], p.version)
	}
	var out []*request
	for range n {
		var b struct {
			Queries []map[string]any `json:"queries"`
		}
		for range 1000 {
			k := names[rng.IntN(len(names))]
			versions := byName[k]
			b.Queries = append(b.Queries, map[string]any{"package": map[string]string{"ecosystem": k[0], "name": k[1]},
				"version": versions[rng.IntN(len(versions))]})
		}
		body, _ := json.Marshal(b)
		out = append(out, &request{method: "POST", path: "/osv/v1/querybatch", body: body})
	}
	return out
}

// waitForPackageIndex waits, up to ten minutes, until the server's
// package index, built in the background after it starts, answers.
func waitForPackageIndex(client *http.Client, base string) {
	start := time.Now()
	for time.Since(start) < 10*time.Minute {
		resp, err := client.Post(base+"/osv/v1/querybatch", "application/json", strings.NewReader(`{"queries":[]}`))
		if err != nil {
			log.Fatalf("querybatch: %v", err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable {
			log.Printf("package index ready after %.0f s", time.Since(start).Seconds())
			return
		}
		time.Sleep(time.Second)
	}
	log.Printf("the package index was not ready within ten minutes")
}
