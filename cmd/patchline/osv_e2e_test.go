package main

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ossf/osv-schema/bindings/go/osvschema"
	"osv.dev/bindings/go/api"
	"osv.dev/bindings/go/osvdev"
)

// waitForPackageIndex waits until the package queries of a serve answer:
// the package index is built in the background after start.
func waitForPackageIndex(t *testing.T, s *server) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := http.Post(s.LookupURL+"/osv/v1/query", "application/json",
			strings.NewReader(`{"package":{"ecosystem":"PyPI","name":"django"},"version":"4.2.0"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusOK:
			return
		case resp.StatusCode != http.StatusServiceUnavailable:
			t.Fatalf("POST /osv/v1/query: %s", resp.Status)
		case time.Now().After(deadline):
			t.Fatalf("the package index was not built within a minute:\n%s", s.Log())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestOSVClientEndToEnd points OSV.dev's official Go client at a running
// serve: its query, querybatch and vulns calls work unchanged, and a
// client mistake is a 400 it does not retry.
func TestOSVClientEndToEnd(t *testing.T) {
	e2e(t)
	s := startServe(t, "", nil, "--rate-limit", "off")
	waitForPackageIndex(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := osvdev.DefaultClient()
	c.BaseHostURL = s.LookupURL + "/osv"
	c.Config.MaxRetryAttempts = 1

	ids := func(vulns []*osvschema.Vulnerability) []string {
		var out []string
		for _, v := range vulns {
			out = append(out, v.GetId())
		}
		return out
	}
	django := func(v string) *api.Query {
		return &api.Query{Package: &osvschema.Package{Ecosystem: "PyPI", Name: "django"}, Param: &api.Query_Version{Version: v}}
	}

	// Django 4.2.0 is affected by CVE-2024-27351, fixed in 4.2.11
	// (PYSEC-2024-47: introduced 4.2, fixed 4.2.11).
	got, err := c.Query(ctx, django("4.2.0"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(ids(got.GetVulns()), "CVE-2024-27351") {
		t.Fatalf("Query django 4.2.0: %v, want CVE-2024-27351 among them", ids(got.GetVulns()))
	}
	for _, v := range got.GetVulns() {
		if v.GetId() != "CVE-2024-27351" {
			continue
		}
		var fixed []string
		for _, a := range v.GetAffected() {
			for _, r := range a.GetRanges() {
				for _, e := range r.GetEvents() {
					if e.GetFixed() != "" && strings.EqualFold(a.GetPackage().GetName(), "django") {
						fixed = append(fixed, e.GetFixed())
					}
				}
			}
		}
		if !slices.Contains(fixed, "4.2.11") {
			t.Errorf("CVE-2024-27351 fixed versions of django: %v, want 4.2.11 among them", fixed)
		}
	}

	batch, err := c.QueryBatch(ctx, []*api.Query{
		django("4.2.10"),
		django("4.2.11"),
		{Package: &osvschema.Package{Purl: "pkg:pypi/django@4.2.0"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(batch.GetResults()); n != 3 {
		t.Fatalf("QueryBatch: %d results for 3 queries", n)
	}
	for i, want := range []bool{true, false, true} {
		r := batch.GetResults()[i]
		if has := slices.Contains(ids(r.GetVulns()), "CVE-2024-27351"); has != want {
			t.Errorf("QueryBatch result %d: %v, CVE-2024-27351 among them = %v, want %v", i, ids(r.GetVulns()), has, want)
		}
		for _, v := range r.GetVulns() {
			if v.GetModified() == nil || v.GetModified().AsTime().IsZero() {
				t.Errorf("QueryBatch result %d: %s has no modified time", i, v.GetId())
			}
		}
	}

	for _, tc := range []struct{ id, wantID, alias string }{
		{"CVE-2024-27351", "CVE-2024-27351", ""},
		{"PYSEC-2024-47", "PYSEC-2024-47", "CVE-2024-27351"},
		{"pysec-2024-47", "PYSEC-2024-47", "CVE-2024-27351"},
	} {
		v, err := c.GetVulnByID(ctx, tc.id)
		if err != nil {
			t.Errorf("GetVulnByID %s: %v", tc.id, err)
			continue
		}
		if v.GetId() != tc.wantID || (tc.alias != "" && !slices.Contains(v.GetAliases(), tc.alias)) {
			t.Errorf("GetVulnByID %s: id %s aliases %v, want %s with alias %q", tc.id, v.GetId(), v.GetAliases(), tc.wantID, tc.alias)
		}
	}

	// Client mistakes are 400s, which the client reports without retrying.
	c.Config.MaxRetryAttempts = 4
	start := time.Now()
	_, err = c.Query(ctx, &api.Query{Package: &osvschema.Package{Ecosystem: "NoSuchEcosystem", Name: "x"}, Param: &api.Query_Version{Version: "1"}})
	if err == nil || !strings.Contains(err.Error(), "400") || !strings.Contains(err.Error(), "unknown ecosystem") {
		t.Errorf("Query of an unknown ecosystem: %v, want a 400 naming it", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the client retried a 400 for %v", d)
	}
	if _, err := c.GetVulnByID(ctx, "GHSA-0000-0000-0000"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("GetVulnByID of an unknown advisory: %v, want a 404", err)
	}
}
