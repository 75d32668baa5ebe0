package exposure

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/errs"
	"github.com/patchline/patchline/internal/httpx"
)

// RecordReader reads catalog records: the KEV entry of a CVE (its date
// added, due date and required action) is in its record.
type RecordReader interface {
	Record(ctx context.Context, id string) (*cve.Record, error)
}

// KEVReport is where the fleet stands against the due dates of CISA's
// Known Exploited Vulnerabilities catalog: the date by which US federal
// agencies must remediate each KEV CVE under BOD 22-01, which many other
// organisations hold themselves to. Only affected agents count; an agent
// whose versions could not be compared is left out, as on the fleet risk
// page.
type KEVReport struct {
	// AsOf is the day the report counts from (UTC), as YYYY-MM-DD.
	AsOf string `json:"asOf"`
	// CVEs counts the KEV CVEs present on at least one agent; Overdue
	// those whose due date has passed.
	CVEs    int `json:"kevCves"`
	Overdue int `json:"overdueCves"`
	// Agents counts the agents with at least one KEV CVE;
	// OverdueAgents those with at least one past its due date.
	Agents        int `json:"agents"`
	OverdueAgents int `json:"overdueAgents"`
	// Findings are the KEV CVEs present, the earliest due first.
	Findings []KEVFinding `json:"cves"`
	// ByAgent are the agents with a KEV CVE, the most overdue first.
	ByAgent []KEVAgent `json:"byAgent"`
}

// KEVFinding is one KEV CVE present on the fleet.
type KEVFinding struct {
	CVEID          string `json:"cveId"`
	Name           string `json:"vulnerabilityName,omitempty"`
	DateAdded      string `json:"dateAdded"`
	DueDate        string `json:"dueDate,omitempty"`
	RequiredAction string `json:"requiredAction,omitempty"`
	Ransomware     bool   `json:"knownRansomwareCampaignUse"`
	// DaysLeft is the number of days until the due date, negative once
	// it has passed; nil without a due date.
	DaysLeft *int `json:"daysLeft"`
	Overdue  bool `json:"overdue"`
	// Affected counts the agents the CVE affects.
	Affected int `json:"affectedAgents"`
	// Fixes are the fixed versions that apply to those agents.
	Fixes []Fix `json:"fixes"`
	// Agents are the agents the CVE affects.
	Agents []KEVAgentRef `json:"-"`
}

// KEVAgentRef names an agent of a KEVFinding.
type KEVAgentRef struct {
	AgentID  string
	Hostname string
	Ring     string
}

// KEVAgent is one agent with KEV CVEs.
type KEVAgent struct {
	AgentID  string `json:"agentId"`
	Hostname string `json:"hostname"`
	Ring     string `json:"ring"`
	CVEs     int    `json:"kevCves"`
	Overdue  int    `json:"overdueCves"`
	// EarliestDue is the earliest due date of its KEV CVEs, "" when none
	// has one.
	EarliestDue string `json:"earliestDueDate"`
}

// BuildKEVReport builds the KEV report of the fleet as of now: the KEV
// CVEs that affect agents (from store), their KEV entries (from cat) and
// the agents they affect.
func BuildKEVReport(ctx context.Context, store Store, cat RecordReader, now time.Time) (*KEVReport, error) {
	kev := true
	vulns, err := store.FleetVulnerabilities(ctx, FleetFilter{KEV: &kev})
	if err != nil {
		return nil, fmt.Errorf("kev report: %w", err)
	}
	today := day(now)
	r := &KEVReport{AsOf: today.Format(time.DateOnly), Findings: []KEVFinding{}, ByAgent: []KEVAgent{}}
	byAgent := map[string]*KEVAgent{}
	for _, v := range vulns {
		f, ok, err := kevFinding(ctx, cat, v.CVEID, today)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		agents, err := store.VulnerabilityAgents(ctx, AgentFilter{CVEID: v.CVEID, Status: Affected})
		if err != nil {
			return nil, fmt.Errorf("kev report: %w", err)
		}
		if len(agents) == 0 {
			continue
		}
		f.Fixes = v.Fixes
		if f.Fixes == nil {
			f.Fixes = []Fix{}
		}
		f.Affected = len(agents)
		for _, a := range agents {
			f.Agents = append(f.Agents, KEVAgentRef{AgentID: a.AgentID, Hostname: a.Hostname, Ring: a.Ring})
			ka := byAgent[a.AgentID]
			if ka == nil {
				ka = &KEVAgent{AgentID: a.AgentID, Hostname: a.Hostname, Ring: a.Ring}
				byAgent[a.AgentID] = ka
			}
			ka.add(f)
		}
		r.Findings = append(r.Findings, f)
		if f.Overdue {
			r.Overdue++
		}
	}
	r.CVEs = len(r.Findings)
	slices.SortFunc(r.Findings, func(a, b KEVFinding) int {
		return cmpDue(a.DueDate, b.DueDate, a.CVEID, b.CVEID)
	})
	for _, a := range byAgent {
		r.ByAgent = append(r.ByAgent, *a)
		if a.Overdue > 0 {
			r.OverdueAgents++
		}
	}
	r.Agents = len(r.ByAgent)
	sortKEVAgents(r.ByAgent)
	return r, nil
}

// AgentKEV returns the KEV CVEs that affect one agent as of now, the
// earliest due first. It returns errs.ErrNotFound for an unknown agent,
// as store.AgentVulnerabilities does.
func AgentKEV(ctx context.Context, store Store, cat RecordReader, agentID string, now time.Time) ([]KEVFinding, error) {
	vulns, err := store.AgentVulnerabilities(ctx, agentID)
	if err != nil {
		return nil, err
	}
	today := day(now)
	out := []KEVFinding{}
	for _, v := range vulns {
		if !v.KEV || v.Status != Affected {
			continue
		}
		f, ok, err := kevFinding(ctx, cat, v.CVEID, today)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		f.Affected = 1
		f.Fixes = []Fix{}
		for _, fi := range v.Findings {
			if fi.Status == Affected && fi.Fixed != "" {
				fix := Fix{Ecosystem: fi.Ecosystem, Product: fi.Product, Version: fi.Fixed, KB: fi.KB, EOLFrom: fi.EOLFrom}
				if !slices.Contains(f.Fixes, fix) {
					f.Fixes = append(f.Fixes, fix)
				}
			}
		}
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b KEVFinding) int { return cmpDue(a.DueDate, b.DueDate, a.CVEID, b.CVEID) })
	return out, nil
}

// kevFinding returns the KEV entry of a CVE as a finding counted from
// today; false when the catalog no longer lists the CVE as KEV.
func kevFinding(ctx context.Context, cat RecordReader, id string, today time.Time) (KEVFinding, bool, error) {
	rec, err := cat.Record(ctx, id)
	if errors.Is(err, errs.ErrNotFound) {
		return KEVFinding{}, false, nil
	}
	if err != nil {
		return KEVFinding{}, false, fmt.Errorf("kev report: %w", err)
	}
	if rec.KEV == nil {
		return KEVFinding{}, false, nil
	}
	k := rec.KEV
	f := KEVFinding{CVEID: id, Name: k.VulnerabilityName, DateAdded: k.DateAdded, DueDate: k.DueDate,
		RequiredAction: k.RequiredAction, Ransomware: strings.EqualFold(k.KnownRansomwareCampaignUse, "Known")}
	if due, err := time.Parse(time.DateOnly, k.DueDate); err == nil {
		left := int(due.Sub(today).Hours() / 24)
		f.DaysLeft, f.Overdue = &left, left < 0
	}
	return f, true, nil
}

// WriteCSV writes the report as CSV, one row per agent and KEV CVE, in
// the order of Findings.
func (r *KEVReport) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"agentId", "hostname", "ring", "cveId", "vulnerabilityName", "dateAdded", "dueDate", "daysLeft", "overdue", "fixedIn"})
	for _, f := range r.Findings {
		days := ""
		if f.DaysLeft != nil {
			days = strconv.Itoa(*f.DaysLeft)
		}
		var fixes []string
		for _, fx := range f.Fixes {
			s := fx.Product + " " + fx.Version
			if fx.KB != "" {
				s += " (" + fx.KB + ")"
			}
			fixes = append(fixes, s)
		}
		for _, a := range f.Agents {
			cw.Write([]string{a.AgentID, httpx.CSVCell(a.Hostname), httpx.CSVCell(a.Ring), f.CVEID, f.Name, f.DateAdded, f.DueDate,
				days, strconv.FormatBool(f.Overdue), httpx.CSVCell(strings.Join(fixes, "; "))})
		}
	}
	cw.Flush()
	return cw.Error()
}

func (a *KEVAgent) add(f KEVFinding) {
	a.CVEs++
	if f.Overdue {
		a.Overdue++
	}
	if f.DueDate != "" && (a.EarliestDue == "" || f.DueDate < a.EarliestDue) {
		a.EarliestDue = f.DueDate
	}
}

// sortKEVAgents orders agents by overdue CVEs, then KEV CVEs (both
// descending), then earliest due date, then hostname.
func sortKEVAgents(agents []KEVAgent) {
	slices.SortFunc(agents, func(a, b KEVAgent) int {
		switch {
		case a.Overdue != b.Overdue:
			return b.Overdue - a.Overdue
		case a.CVEs != b.CVEs:
			return b.CVEs - a.CVEs
		}
		return cmpDue(a.EarliestDue, b.EarliestDue, a.Hostname+"\x00"+a.AgentID, b.Hostname+"\x00"+b.AgentID)
	})
}

// cmpDue orders by due date (YYYY-MM-DD, none last), then by tie.
func cmpDue(a, b, tieA, tieB string) int {
	switch {
	case a == b:
		return strings.Compare(tieA, tieB)
	case a == "":
		return 1
	case b == "":
		return -1
	}
	return strings.Compare(a, b)
}

// day returns the UTC date of t at midnight.
func day(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}
