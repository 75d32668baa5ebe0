package agentproto

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// HeaderAgentState is a response header of the agent routes. With the
// value AgentStateRemoved on a 401 it tells the agent that it was removed
// by an administrator: it should delete its state and stop, not enroll
// again. A 401 without it means that the server does not know the
// credential, and an agent that still has its enrollment secret enrolls
// again.
const HeaderAgentState = "Patchline-Agent-State"

// AgentStateRemoved is the HeaderAgentState value of a removed agent.
const AgentStateRemoved = "removed"

// DeltaCapability is the first capability of a server that takes
// inventory deltas; agents send an older server the whole inventory.
const DeltaCapability = 2

// InventoryDelta is the change of an inventory since the one the server
// holds, identified by its InventoryHash. The server applies it only when
// Base is the hash of what it holds and the result hashes to Hash; it
// refuses any other delta with 409 Conflict, and the agent then sends its
// full inventory.
type InventoryDelta struct {
	Base string `json:"base"`
	Hash string `json:"hash"`
	// Added and Removed are software items, compared whole: an upgrade
	// removes the old version and adds the new one.
	Added   []Software `json:"added,omitempty"`
	Removed []Software `json:"removed,omitempty"`
	// PendingUpdates, InstalledUpdates and Notes, when set, replace the
	// lists whole.
	PendingUpdates   *[]Update `json:"pendingUpdates,omitempty"`
	InstalledUpdates *[]Update `json:"installedUpdates,omitempty"`
	Notes            *[]string `json:"notes,omitempty"`
}

// Empty reports whether d changes nothing.
func (d *InventoryDelta) Empty() bool {
	return len(d.Added) == 0 && len(d.Removed) == 0 && d.PendingUpdates == nil && d.InstalledUpdates == nil && d.Notes == nil
}

// Canonical returns a copy of inv in canonical order: software by
// ecosystem, name, architecture, version and source; updates by id and
// title; notes sorted; nil lists as empty ones.
func Canonical(inv Inventory) Inventory {
	out := Inventory{
		Software:         slices.Clone(inv.Software),
		PendingUpdates:   slices.Clone(inv.PendingUpdates),
		InstalledUpdates: slices.Clone(inv.InstalledUpdates),
		Notes:            slices.Clone(inv.Notes),
	}
	slices.Sort(out.Notes)
	if out.Software == nil {
		out.Software = []Software{}
	}
	if out.PendingUpdates == nil {
		out.PendingUpdates = []Update{}
	}
	slices.SortFunc(out.Software, compareSoftware)
	slices.SortFunc(out.PendingUpdates, compareUpdates)
	slices.SortFunc(out.InstalledUpdates, compareUpdates)
	return out
}

// compareSoftware orders software by ecosystem, name, architecture,
// version, source, publisher and channel. It compares a field only when the ones before are
// equal: cmp.Or would compare them all.
func compareSoftware(a, b Software) int {
	if c := strings.Compare(a.Ecosystem, b.Ecosystem); c != 0 {
		return c
	}
	if c := strings.Compare(a.Name, b.Name); c != 0 {
		return c
	}
	if c := strings.Compare(a.Arch, b.Arch); c != 0 {
		return c
	}
	if c := strings.Compare(a.Version, b.Version); c != 0 {
		return c
	}
	if c := strings.Compare(a.Source, b.Source); c != 0 {
		return c
	}
	if c := strings.Compare(a.Publisher, b.Publisher); c != 0 {
		return c
	}
	return strings.Compare(a.Channel, b.Channel)
}

// compareUpdates orders updates by id, title and severity.
func compareUpdates(a, b Update) int {
	if c := strings.Compare(a.ID, b.ID); c != 0 {
		return c
	}
	if c := strings.Compare(a.Title, b.Title); c != 0 {
		return c
	}
	return strings.Compare(a.Severity, b.Severity)
}

// Equal reports whether a and b list the same items in the same order, an
// empty list and a missing one alike. Of two inventories in canonical
// order (Canonical), it reports whether they are the same inventory: then
// Diff(a, b) is empty.
func Equal(a, b Inventory) bool {
	return slices.Equal(a.Software, b.Software) && slices.Equal(a.PendingUpdates, b.PendingUpdates) &&
		slices.Equal(a.InstalledUpdates, b.InstalledUpdates) && slices.Equal(a.Notes, b.Notes)
}

// InventoryHash identifies an inventory whatever the order of its lists:
// the hex SHA-256 of the JSON encoding of its Canonical form.
func InventoryHash(inv Inventory) string {
	b, err := json.Marshal(Canonical(inv))
	if err != nil {
		panic(err) // strings and slices of structs of strings always encode
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Diff returns the delta that turns old into cur.
func Diff(old, cur Inventory) InventoryDelta {
	d := InventoryDelta{Base: InventoryHash(old), Hash: InventoryHash(cur)}
	have := map[Software]int{}
	for _, s := range old.Software {
		have[s]++
	}
	for _, s := range cur.Software {
		if have[s] > 0 {
			have[s]--
			continue
		}
		d.Added = append(d.Added, s)
	}
	for _, s := range old.Software {
		if have[s] > 0 {
			have[s]--
			d.Removed = append(d.Removed, s)
		}
	}
	slices.SortFunc(d.Added, compareSoftware)
	slices.SortFunc(d.Removed, compareSoftware)
	o, c := Canonical(old), Canonical(cur)
	if !slices.Equal(o.PendingUpdates, c.PendingUpdates) {
		d.PendingUpdates = &c.PendingUpdates
	}
	if !slices.Equal(o.InstalledUpdates, c.InstalledUpdates) {
		u := c.InstalledUpdates
		if u == nil {
			u = []Update{}
		}
		d.InstalledUpdates = &u
	}
	if !slices.Equal(o.Notes, c.Notes) {
		n := c.Notes
		if n == nil {
			n = []string{}
		}
		d.Notes = &n
	}
	return d
}

// Apply returns inv changed by d, in canonical order. It does not check
// the hashes. It fails when d removes an item that inv does not have. It
// takes time linear in the sizes of inv and d, whatever they hold.
func (d *InventoryDelta) Apply(inv Inventory) (Inventory, error) {
	out := Canonical(inv)
	remove := make(map[Software]int, len(d.Removed))
	for _, r := range d.Removed {
		remove[r]++
	}
	kept := out.Software[:0]
	for _, s := range out.Software {
		if remove[s] > 0 {
			remove[s]--
			continue
		}
		kept = append(kept, s)
	}
	for _, r := range d.Removed {
		if remove[r] > 0 {
			return Inventory{}, fmt.Errorf("apply inventory delta: %s %s (%s) is not in the inventory", r.Name, r.Version, r.Ecosystem)
		}
	}
	out.Software = append(kept, d.Added...)
	if d.PendingUpdates != nil {
		out.PendingUpdates = *d.PendingUpdates
	}
	if d.InstalledUpdates != nil {
		out.InstalledUpdates = *d.InstalledUpdates
	}
	if d.Notes != nil {
		out.Notes = *d.Notes
	}
	return Canonical(out), nil
}
