package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/patchline/patchline/internal/agentproto"
)

// Identity is what enrollment gave the agent.
type Identity struct {
	Server     string    `json:"server"` // the control service it enrolled with
	AgentID    string    `json:"agentId"`
	Credential string    `json:"credential"` // "<agentId>.<plat_…>"
	EnrolledAt time.Time `json:"enrolledAt"`
	// PinSHA256 is the pin of the server's public key (see Trust) that
	// every connection checks, "" for none.
	PinSHA256 string `json:"pinSha256,omitempty"`
}

// PendingResult is the result of a command not yet delivered to the
// server. Results are written before the command starts (a provisional
// one, which says that the agent stopped while the command ran) and again
// when it ends, so that no outcome is lost to a crash, a restart or a
// server that is down.
type PendingResult struct {
	CommandID string            `json:"commandId"`
	Report    agentproto.Report `json:"report"`
	// Final is false for a provisional result, which is delivered only
	// if the run that wrote it (Run) is over.
	Final bool   `json:"final"`
	Run   string `json:"run"`
	// Bundle is the log bundle of a collect-logs command, uploaded before
	// the report; BundleUploaded notes that it was.
	Bundle         []byte    `json:"-"`
	BundleType     string    `json:"bundleType,omitempty"`
	BundleUploaded bool      `json:"bundleUploaded,omitempty"`
	Created        time.Time `json:"created"`
}

// Policy is a version of a policy object the agent applied.
type Policy struct {
	ID        string          `json:"id"`
	Version   int             `json:"version"`
	Settings  json.RawMessage `json:"settings"`
	AppliedAt time.Time       `json:"appliedAt"`
}

// State keeps what the agent must not forget: its identity, the
// inventory the server holds, undelivered results and applied policies.
// Methods are safe for concurrent use.
type State interface {
	// Identity returns the identity, nil before enrollment.
	Identity() (*Identity, error)
	SaveIdentity(id *Identity) error

	// Reported returns the inventory the server last accepted, nil when
	// it holds none the agent knows of.
	Reported() (*agentproto.Inventory, error)
	// SaveReported records the inventory the server accepted; nil forgets
	// it, so that the next check-in sends the whole inventory.
	SaveReported(inv *agentproto.Inventory) error

	// PutResult stores r, replacing the result of the same command.
	PutResult(r *PendingResult) error
	// Results returns the stored results, oldest first.
	Results() ([]*PendingResult, error)
	DeleteResult(commandID string) error

	// Policies returns the applied policies by id.
	Policies() (map[string]*Policy, error)
	SavePolicy(p *Policy) error

	// Reset forgets everything: a new enrollment starts from nothing.
	Reset() error
	// Remove forgets everything and leaves a mark that the endpoint was
	// removed, which Removed reports from then on.
	Remove(at time.Time) error
	// Removed returns when the endpoint was removed, nil if it was not.
	Removed() (*time.Time, error)
}

// MemoryState is a State held in memory, for the simulated fleet and
// tests.
type MemoryState struct {
	mu       sync.Mutex
	identity *Identity
	reported *agentproto.Inventory
	results  map[string]*PendingResult
	policies map[string]*Policy
	removed  *time.Time
}

var _ State = (*MemoryState)(nil)

// NewMemoryState returns an empty MemoryState.
func NewMemoryState() *MemoryState {
	return &MemoryState{results: map[string]*PendingResult{}, policies: map[string]*Policy{}}
}

// Identity implements State.
func (m *MemoryState) Identity() (*Identity, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.identity == nil {
		return nil, nil
	}
	id := *m.identity
	return &id, nil
}

// SaveIdentity implements State.
func (m *MemoryState) SaveIdentity(id *Identity) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := *id
	m.identity = &c
	return nil
}

// Reported implements State.
func (m *MemoryState) Reported() (*agentproto.Inventory, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.reported, nil
}

// SaveReported implements State.
func (m *MemoryState) SaveReported(inv *agentproto.Inventory) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reported = inv
	return nil
}

// PutResult implements State.
func (m *MemoryState) PutResult(r *PendingResult) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := *r
	m.results[r.CommandID] = &c
	return nil
}

// Results implements State.
func (m *MemoryState) Results() ([]*PendingResult, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*PendingResult, 0, len(m.results))
	for _, r := range m.results {
		c := *r
		out = append(out, &c)
	}
	sortResults(out)
	return out, nil
}

// DeleteResult implements State.
func (m *MemoryState) DeleteResult(commandID string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.results, commandID)
	return nil
}

// Policies implements State.
func (m *MemoryState) Policies() (map[string]*Policy, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]*Policy, len(m.policies))
	for id, p := range m.policies {
		c := *p
		out[id] = &c
	}
	return out, nil
}

// SavePolicy implements State.
func (m *MemoryState) SavePolicy(p *Policy) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := *p
	m.policies[p.ID] = &c
	return nil
}

// Reset implements State.
func (m *MemoryState) Reset() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.identity, m.reported = nil, nil
	m.results, m.policies = map[string]*PendingResult{}, map[string]*Policy{}
	return nil
}

// Remove implements State.
func (m *MemoryState) Remove(at time.Time) error {
	m.Reset()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.removed = &at
	return nil
}

// Removed implements State.
func (m *MemoryState) Removed() (*time.Time, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.removed, nil
}

func sortResults(rs []*PendingResult) {
	slices.SortFunc(rs, func(a, b *PendingResult) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.CommandID, b.CommandID)
	})
}

// DiskState is a State in a directory that only its owner can read
// (0700, files 0600): the credential authenticates the endpoint.
//
//	agent.json          the identity
//	inventory.json      the inventory the server holds
//	policies.json       the applied policies
//	results/ID.json     undelivered results, results/ID.bundle their log bundles
//	removed             the time the endpoint was removed, once it was
//
// Every file is written whole to a temporary file and renamed over the
// old one, so that a crash leaves the old or the new file, never a part.
type DiskState struct {
	dir string
	mu  sync.Mutex
}

var _ State = (*DiskState)(nil)

// OpenDiskState opens (creating it when needed) the state directory dir
// and makes it private to its owner.
func OpenDiskState(dir string) (*DiskState, error) {
	if dir == "" {
		return nil, errors.New("open agent state: empty directory name")
	}
	if err := os.MkdirAll(filepath.Join(dir, "results"), 0o700); err != nil {
		return nil, fmt.Errorf("open agent state: %w", err)
	}
	for _, d := range []string{dir, filepath.Join(dir, "results")} {
		if err := os.Chmod(d, 0o700); err != nil {
			return nil, fmt.Errorf("open agent state: %w", err)
		}
	}
	return &DiskState{dir: dir}, nil
}

// Dir returns the state directory.
func (d *DiskState) Dir() string { return d.dir }

// writeFile writes data to name within the state directory, atomically,
// readable by the owner only.
func (d *DiskState) writeFile(name string, data []byte) error {
	path := filepath.Join(d.dir, name)
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	if dir, err := os.Open(filepath.Dir(path)); err == nil {
		dir.Sync()
		dir.Close()
	}
	return nil
}

func (d *DiskState) writeJSON(name string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return d.writeFile(name, b)
}

// readJSON reads name into v; it returns false when the file does not
// exist.
func (d *DiskState) readJSON(name string, v any) (bool, error) {
	b, err := os.ReadFile(filepath.Join(d.dir, name))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return false, fmt.Errorf("%s: %w", filepath.Join(d.dir, name), err)
	}
	return true, nil
}

// Identity implements State.
func (d *DiskState) Identity() (*Identity, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var id Identity
	ok, err := d.readJSON("agent.json", &id)
	if err != nil || !ok {
		return nil, wrapState("read identity", err)
	}
	return &id, nil
}

// SaveIdentity implements State.
func (d *DiskState) SaveIdentity(id *Identity) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return wrapState("save identity", d.writeJSON("agent.json", id))
}

// Reported implements State.
func (d *DiskState) Reported() (*agentproto.Inventory, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var inv agentproto.Inventory
	ok, err := d.readJSON("inventory.json", &inv)
	if err != nil || !ok {
		return nil, wrapState("read reported inventory", err)
	}
	return &inv, nil
}

// SaveReported implements State.
func (d *DiskState) SaveReported(inv *agentproto.Inventory) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if inv == nil {
		return wrapState("forget reported inventory", removeIfExists(filepath.Join(d.dir, "inventory.json")))
	}
	return wrapState("save reported inventory", d.writeJSON("inventory.json", inv))
}

// resultName returns the file name of a command's result; command ids are
// checked so that a hostile id cannot name a path.
func resultName(commandID, ext string) (string, error) {
	if commandID == "" || strings.ContainsAny(commandID, `/\.`) || len(commandID) > 100 {
		return "", fmt.Errorf("command id %q cannot name a file", commandID)
	}
	return filepath.Join("results", commandID+ext), nil
}

// PutResult implements State.
func (d *DiskState) PutResult(r *PendingResult) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	name, err := resultName(r.CommandID, ".json")
	if err != nil {
		return wrapState("save result", err)
	}
	bname, _ := resultName(r.CommandID, ".bundle")
	switch {
	case r.BundleUploaded:
		if err := removeIfExists(filepath.Join(d.dir, bname)); err != nil {
			return wrapState("delete log bundle", err)
		}
	case r.Bundle != nil:
		if err := d.writeFile(bname, r.Bundle); err != nil {
			return wrapState("save log bundle", err)
		}
	}
	return wrapState("save result", d.writeJSON(name, r))
}

// Results implements State.
func (d *DiskState) Results() ([]*PendingResult, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	entries, err := os.ReadDir(filepath.Join(d.dir, "results"))
	if err != nil {
		return nil, wrapState("read results", err)
	}
	var out []*PendingResult
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		var r PendingResult
		if _, err := d.readJSON(filepath.Join("results", e.Name()), &r); err != nil {
			return nil, wrapState("read results", err)
		}
		r.CommandID = id
		b, err := os.ReadFile(filepath.Join(d.dir, "results", id+".bundle"))
		if err == nil {
			r.Bundle = b
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, wrapState("read results", err)
		}
		out = append(out, &r)
	}
	sortResults(out)
	return out, nil
}

// DeleteResult implements State.
func (d *DiskState) DeleteResult(commandID string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, ext := range []string{".bundle", ".json"} {
		name, err := resultName(commandID, ext)
		if err != nil {
			return wrapState("delete result", err)
		}
		if err := removeIfExists(filepath.Join(d.dir, name)); err != nil {
			return wrapState("delete result", err)
		}
	}
	return nil
}

// Policies implements State.
func (d *DiskState) Policies() (map[string]*Policy, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[string]*Policy{}
	if _, err := d.readJSON("policies.json", &out); err != nil {
		return nil, wrapState("read policies", err)
	}
	return out, nil
}

// SavePolicy implements State.
func (d *DiskState) SavePolicy(p *Policy) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	all := map[string]*Policy{}
	if _, err := d.readJSON("policies.json", &all); err != nil {
		return wrapState("save policy", err)
	}
	all[p.ID] = p
	return wrapState("save policy", d.writeJSON("policies.json", all))
}

// Reset implements State.
func (d *DiskState) Reset() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return wrapState("reset", d.reset())
}

func (d *DiskState) reset() error {
	for _, name := range []string{"agent.json", "inventory.json", "policies.json"} {
		if err := removeIfExists(filepath.Join(d.dir, name)); err != nil {
			return err
		}
	}
	if err := os.RemoveAll(filepath.Join(d.dir, "results")); err != nil {
		return err
	}
	return os.MkdirAll(filepath.Join(d.dir, "results"), 0o700)
}

// Remove implements State.
func (d *DiskState) Remove(at time.Time) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.reset(); err != nil {
		return wrapState("remove", err)
	}
	// An installed agent's enrollment secret goes too: the endpoint has
	// no business with the fleet any more.
	if err := removeIfExists(filepath.Join(d.dir, EnrollSecretFile)); err != nil {
		return wrapState("remove", err)
	}
	os.Remove(filepath.Join(d.dir, "results"))
	return wrapState("remove", d.writeFile("removed", []byte(at.UTC().Format(time.RFC3339)+"\n")))
}

// Removed implements State.
func (d *DiskState) Removed() (*time.Time, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	b, err := os.ReadFile(filepath.Join(d.dir, "removed"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, wrapState("read removal mark", err)
	}
	t, err := time.Parse(time.RFC3339, strings.TrimSpace(string(b)))
	if err != nil {
		t = time.Time{}
	}
	return &t, nil
}

func removeIfExists(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

func wrapState(op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("agent state: %s: %w", op, err)
}
