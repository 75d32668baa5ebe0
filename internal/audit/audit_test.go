package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"strings"
	"testing"
	"time"
)

// memLog is an audit log in memory.
type memLog struct{ entries []*Entry }

var _ Log = (*memLog)(nil)

func (l *memLog) AppendAudit(ctx context.Context, e *Entry) error {
	prevID, prevHash := int64(0), GenesisHash
	if n := len(l.entries); n > 0 {
		prevID, prevHash = l.entries[n-1].ID, l.entries[n-1].Hash
	}
	e.Chain(prevID, prevHash)
	c := *e
	l.entries = append(l.entries, &c)
	return nil
}

func (l *memLog) FindAuditEntries(ctx context.Context, f Filter) ([]*Entry, error) {
	return nil, nil
}

func (l *memLog) WalkAudit(ctx context.Context, fn func(*Entry) error) error {
	for _, e := range l.entries {
		c := *e
		if err := fn(&c); err != nil {
			return err
		}
	}
	return nil
}

func filledLog(t *testing.T, n int) *memLog {
	t.Helper()
	l := &memLog{}
	start := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	for i := 0; i < n; i++ {
		e := &Entry{Time: start.Add(time.Duration(i) * time.Second), Actor: "key:plk_x", KeyID: "plk_x",
			Method: "GET", Path: "/api/agents", Status: 200, ClientAddress: "192.0.2.1"}
		if err := e.SetEvent(APIRequest{}); err != nil {
			t.Fatal(err)
		}
		if i%3 == 1 {
			if err := e.SetEvent(CommandsQueued{Type: "reboot", Commands: []string{"cmd_1"}}); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.AppendAudit(context.Background(), e); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

func TestVerifyIntact(t *testing.T) {
	l := filledLog(t, 10)
	res, err := Verify(context.Background(), l)
	if err != nil || res.Broken != nil {
		t.Fatalf("Verify = %+v, %v", res, err)
	}
	if res.Entries != 10 || string(res.Head) != string(l.entries[9].Hash) {
		t.Errorf("Verify = %d entries, head %x", res.Entries, res.Head)
	}
}

func TestVerifyFindsTampering(t *testing.T) {
	tests := []struct {
		name   string
		tamper func(l *memLog)
		wantID int64
	}{
		{"status", func(l *memLog) { l.entries[4].Status = 403 }, 5},
		{"key id", func(l *memLog) { l.entries[2].KeyID = "plk_y" }, 3},
		{"actor", func(l *memLog) { l.entries[0].Actor = "anonymous" }, 1},
		{"time", func(l *memLog) { l.entries[6].Time = l.entries[6].Time.Add(time.Millisecond) }, 7},
		{"details", func(l *memLog) { l.entries[7].Details = json.RawMessage(`{"type":"remove","commands":["cmd_1"]}`) }, 8},
		{"path", func(l *memLog) { l.entries[9].Path = "/api/audit-log" }, 10},
		{"deleted", func(l *memLog) { l.entries = append(l.entries[:3], l.entries[4:]...) }, 4},
		{"swapped", func(l *memLog) { l.entries[5], l.entries[6] = l.entries[6], l.entries[5] }, 6},
		{"rehashed without the chain", func(l *memLog) {
			e := l.entries[3]
			e.Status = 500
			e.Hash = e.ComputeHash(e.PrevHash)
		}, 5},
		{"renumbered", func(l *memLog) {
			e := l.entries[3]
			e.ID = 40
			e.Hash = e.ComputeHash(e.PrevHash)
		}, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := filledLog(t, 10)
			tt.tamper(l)
			res, err := Verify(context.Background(), l)
			if err != nil {
				t.Fatal(err)
			}
			if res.Broken == nil {
				t.Fatal("tampering not detected")
			}
			if res.Broken.ID != tt.wantID {
				t.Errorf("broken at entry %d (%s), want %d", res.Broken.ID, res.Broken.Reason, tt.wantID)
			}
		})
	}
}

// TestEventRegistry checks that every event type of the package is in
// Events, under the name its Action returns, and that names are unique.
func TestEventRegistry(t *testing.T) {
	seen := map[string]bool{}
	for _, et := range Events {
		if seen[et.Action] {
			t.Errorf("action %s is registered twice", et.Action)
		}
		seen[et.Action] = true
		if got := et.New().Action(); got != et.Action {
			t.Errorf("registered %s, but its type says %s", et.Action, got)
		}
		if et.Description == "" {
			t.Errorf("action %s has no description", et.Action)
		}
		if !strings.Contains(et.Action, ".") || strings.ToLower(et.Action) != et.Action {
			t.Errorf("action %q is not of the form noun.verb", et.Action)
		}
	}

	// Every type with an Action method in this package must be
	// registered.
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "events.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	registered := map[string]bool{}
	for _, et := range Events {
		registered[strings.TrimPrefix(typeName(et.New()), "*")] = true
	}
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Recv == nil || fn.Name.Name != "Action" {
			continue
		}
		recv := fn.Recv.List[0].Type
		if star, ok := recv.(*ast.StarExpr); ok {
			recv = star.X
		}
		name := recv.(*ast.Ident).Name
		if !registered[name] {
			t.Errorf("event type %s is not in Events", name)
		}
	}
}

func typeName(ev Event) string {
	return strings.TrimPrefix(strings.TrimPrefix(fmt.Sprintf("%T", ev), "*audit."), "audit.")
}
