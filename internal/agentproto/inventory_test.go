package agentproto

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestInventoryHashIgnoresOrder(t *testing.T) {
	a := Inventory{
		Software: []Software{
			{Name: "openssh-server", Version: "1:9.2p1-2+deb12u2", Ecosystem: "Debian:12", Arch: "amd64", Source: "openssh"},
			{Name: "bash", Version: "5.2.15-2+b2", Ecosystem: "Debian:12", Arch: "amd64"},
		},
		PendingUpdates: []Update{{ID: "b", Title: "B"}, {ID: "a", Title: "A"}},
	}
	b := Inventory{
		Software:         []Software{a.Software[1], a.Software[0]},
		PendingUpdates:   []Update{a.PendingUpdates[1], a.PendingUpdates[0]},
		InstalledUpdates: []Update{},
	}
	if InventoryHash(a) != InventoryHash(b) {
		t.Error("the order of the lists changes the hash")
	}
	c := b
	c.Software = append([]Software{{Name: "bash", Version: "5.2.15-2+b3", Ecosystem: "Debian:12", Arch: "amd64"}}, b.Software[1])
	if InventoryHash(a) == InventoryHash(c) {
		t.Error("a new version does not change the hash")
	}
	if got := InventoryHash(Inventory{}); got != InventoryHash(Inventory{Software: []Software{}, PendingUpdates: []Update{}}) {
		t.Errorf("nil and empty lists hash differently: %s", got)
	}
}

func TestDiffApply(t *testing.T) {
	deb := func(name, version string) Software {
		return Software{Name: name, Version: version, Ecosystem: "Debian:12", Arch: "amd64"}
	}
	tests := []struct {
		name     string
		old, cur Inventory
		want     InventoryDelta
	}{
		{
			name: "nothing changed",
			old:  Inventory{Software: []Software{deb("a", "1")}},
			cur:  Inventory{Software: []Software{deb("a", "1")}, PendingUpdates: []Update{}},
			want: InventoryDelta{},
		},
		{
			name: "upgrade, install, removal",
			old:  Inventory{Software: []Software{deb("a", "1"), deb("b", "1"), deb("c", "1")}},
			cur:  Inventory{Software: []Software{deb("a", "2"), deb("b", "1"), deb("d", "1")}},
			want: InventoryDelta{Added: []Software{deb("a", "2"), deb("d", "1")}, Removed: []Software{deb("a", "1"), deb("c", "1")}},
		},
		{
			name: "same items in another order",
			old:  Inventory{Software: []Software{deb("b", "1"), deb("a", "1")}, InstalledUpdates: []Update{}},
			cur:  Inventory{Software: []Software{deb("a", "1"), deb("b", "1")}},
			want: InventoryDelta{},
		},
		{
			name: "two versions of one package",
			old:  Inventory{Software: []Software{deb("kernel", "1"), deb("kernel", "2")}},
			cur:  Inventory{Software: []Software{deb("kernel", "2"), deb("kernel", "3")}},
			want: InventoryDelta{Added: []Software{deb("kernel", "3")}, Removed: []Software{deb("kernel", "1")}},
		},
		{
			name: "updates",
			old:  Inventory{PendingUpdates: []Update{{ID: "KB1", Title: "x"}}},
			cur:  Inventory{InstalledUpdates: []Update{{ID: "KB1", Title: "x"}}},
			want: InventoryDelta{PendingUpdates: &[]Update{}, InstalledUpdates: &[]Update{{ID: "KB1", Title: "x"}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Diff(tt.old, tt.cur)
			if d.Base != InventoryHash(tt.old) || d.Hash != InventoryHash(tt.cur) {
				t.Errorf("hashes of the delta are not those of the inventories")
			}
			tt.want.Base, tt.want.Hash = d.Base, d.Hash
			if diff := cmp.Diff(tt.want, d); diff != "" {
				t.Errorf("Diff (-want +got):\n%s", diff)
			}
			if (len(tt.want.Added)+len(tt.want.Removed) == 0 && tt.want.PendingUpdates == nil && tt.want.InstalledUpdates == nil) != d.Empty() {
				t.Errorf("Empty = %v", d.Empty())
			}
			if got := Equal(Canonical(tt.old), Canonical(tt.cur)); got != d.Empty() {
				t.Errorf("Equal of the canonical inventories = %v, but Empty = %v", got, d.Empty())
			}
			// Through JSON, as it travels.
			b, err := json.Marshal(d)
			if err != nil {
				t.Fatal(err)
			}
			var wire InventoryDelta
			if err := json.Unmarshal(b, &wire); err != nil {
				t.Fatal(err)
			}
			got, err := wire.Apply(tt.old)
			if err != nil {
				t.Fatal(err)
			}
			if InventoryHash(got) != wire.Hash {
				t.Errorf("applying the delta gives %+v, not the current inventory", got)
			}
		})
	}
	d := InventoryDelta{Removed: []Software{deb("z", "1")}}
	if _, err := d.Apply(Inventory{}); err == nil {
		t.Error("removing a missing item succeeded")
	}
}

// TestDiffApplyNotes: what the agent could not read travels in deltas and
// changes the hash, whatever its order.
func TestDiffApplyNotes(t *testing.T) {
	old := Inventory{Software: []Software{{Name: "Windows 11 Version 23H2", Version: "10.0.22631.4460", Ecosystem: "Windows", Arch: "x64"}}}
	cur := old
	cur.Notes = []string{"Windows Update search: not implemented", "Win32_QuickFixEngineering: access denied"}
	if InventoryHash(old) == InventoryHash(cur) {
		t.Fatal("notes do not change the hash")
	}
	d := Diff(old, cur)
	if d.Notes == nil || d.Empty() {
		t.Fatalf("delta %+v carries no notes", d)
	}
	got, err := d.Apply(old)
	if err != nil {
		t.Fatal(err)
	}
	if InventoryHash(got) != d.Hash {
		t.Errorf("applied delta hashes to %s, want %s", InventoryHash(got), d.Hash)
	}
	if diff := cmp.Diff([]string{"Win32_QuickFixEngineering: access denied", "Windows Update search: not implemented"}, got.Notes); diff != "" {
		t.Errorf("notes (-want +got):\n%s", diff)
	}
	back := Diff(cur, old)
	if back.Notes == nil || len(*back.Notes) != 0 {
		t.Errorf("notes gone: delta %+v", back.Notes)
	}
}
