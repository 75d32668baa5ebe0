package controlapi

import (
	"context"
	"encoding/csv"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/patchline/patchline/internal/agentproto"
	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/errs"
	"github.com/patchline/patchline/internal/exposure"
)

type kevCatalog map[string]*cve.Record

func (c kevCatalog) Record(_ context.Context, id string) (*cve.Record, error) {
	if r, ok := c[id]; ok {
		return r, nil
	}
	return nil, errs.NotFoundf("no %s", id)
}

func TestKEVCompliance(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a := e.enroll("=cmd|' /C calc'!A0", "windows") // a hostname a spreadsheet would run
	e.checkIn(a, agentproto.CheckInRequest{Hostname: "=cmd|' /C calc'!A0", OS: agentproto.OS{Platform: "windows", Name: "Windows 11 Pro", Version: "23H2", Build: "22631.4460"},
		Inventory: &agentproto.Inventory{Software: []agentproto.Software{{Name: "Mozilla Firefox", Version: "115.0", Ecosystem: "Desktop"}}, PendingUpdates: []agentproto.Update{}}})
	pending, err := e.store.PendingExposure(ctx, 10)
	if err != nil || len(pending) != 1 {
		t.Fatalf("pending exposure: %v %v", pending, err)
	}
	if err := e.store.PutRisks(ctx, []exposure.Risk{{CVEID: "CVE-2024-9680", KEV: true}}); err != nil {
		t.Fatal(err)
	}
	if err := e.store.PutExposure(ctx, a.id, pending[0].Token, []string{"Desktop/mozillafirefox"}, []exposure.Finding{{
		CVEID: "CVE-2024-9680", Ecosystem: "Desktop", Product: "Mozilla Firefox", Package: "Mozilla Firefox",
		Installed: "115.0", Fixed: "131.0.2", Status: exposure.Affected}}); err != nil {
		t.Fatal(err)
	}

	// Without a catalog the routes are not there.
	problem(t, e.do(request{method: "GET", path: "/api/compliance/kev", apiKey: e.key}), http.StatusNotFound)

	e.srv.cfg.Exposure = e.store
	e.srv.cfg.Catalog = kevCatalog{"CVE-2024-9680": {CVEID: "CVE-2024-9680", KEV: &cve.KEV{
		DateAdded: "2024-10-15", DueDate: "2024-11-05", VulnerabilityName: "Mozilla Firefox Use-After-Free Vulnerability"}}}
	e.srv.now = func() time.Time { return time.Date(2024, 11, 8, 12, 0, 0, 0, time.UTC) }

	rep := decode[exposure.KEVReport](t, e.do(request{method: "GET", path: "/api/compliance/kev", apiKey: e.key}), http.StatusOK)
	if rep.AsOf != "2024-11-08" || rep.CVEs != 1 || rep.Overdue != 1 || rep.OverdueAgents != 1 || len(rep.Findings) != 1 ||
		*rep.Findings[0].DaysLeft != -3 || rep.Findings[0].Fixes[0].Version != "131.0.2" || rep.ByAgent[0].AgentID != a.id {
		t.Errorf("report = %+v", rep)
	}

	rec := e.do(request{method: "GET", path: "/api/compliance/kev.csv", apiKey: e.key})
	rows, err := csv.NewReader(strings.NewReader(rec.Body.String())).ReadAll()
	if rec.Code != http.StatusOK || err != nil || len(rows) != 2 {
		t.Fatalf("CSV: %d %v %q", rec.Code, err, rec.Body.String())
	}
	if got := strings.Join(rows[1], ","); got != a.id+",'=cmd|' /C calc'!A0,,CVE-2024-9680,Mozilla Firefox Use-After-Free Vulnerability,2024-10-15,2024-11-05,-3,true,Mozilla Firefox 131.0.2" {
		t.Errorf("CSV row: %s", got)
	}

	one := decode[agentKEVJSON](t, e.do(request{method: "GET", path: "/api/agents/" + a.id + "/compliance/kev", apiKey: e.key}), http.StatusOK)
	if one.Overdue != 1 || len(one.Results) != 1 || one.Results[0].CVEID != "CVE-2024-9680" {
		t.Errorf("agent = %+v", one)
	}
	problem(t, e.do(request{method: "GET", path: "/api/agents/agt_nobody/compliance/kev", apiKey: e.key}), http.StatusNotFound)
	problem(t, e.do(request{method: "GET", path: "/api/compliance/kev?x=1", apiKey: e.key}), http.StatusBadRequest)
	if rec := e.do(request{method: "GET", path: "/api/compliance/kev"}); rec.Code != http.StatusUnauthorized {
		t.Errorf("without a key: %d", rec.Code)
	}
}
