package agentproto

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// messageSeeds are agent messages as agents send them, and hostile
// variants of them.
var messageSeeds = []string{
	`{"enrollSecret":"ples_2TfK9mQx7LbW3nVc8RzH1pYd6GsJ4uEa0XkN5oBqFtIe3Zw1Q","capability":2,"hostname":"laptop-0042","os":{"platform":"windows","name":"Windows 11 Pro","version":"23H2","build":"22631.3447"},"arch":"amd64","agentVersion":"1.0.0"}`,
	`{"capability":2,"hostname":"laptop-0042","os":{"platform":"windows","name":"Windows 11 Pro","version":"23H2","build":"22631.3447"},"arch":"amd64","agentVersion":"1.0.0","ips":["10.0.4.17"],"inventory":{"software":[{"name":"7-Zip","version":"23.01","ecosystem":"Desktop"}],"pendingUpdates":[{"id":"KB5036893","title":"2024-04 Cumulative Update","severity":"critical"}],"installedUpdates":[{"id":"KB5034441","title":"x"}]},"featureUpgrade":{"state":"ready","target":"24H2"},"appliedPolicies":[{"policyId":"pol_q4x7","version":3,"compliant":false,"message":"lockAfterMinutes is 10"}],"rebootPending":true}`,
	`{"capability":2,"hostname":"db-1","os":{"platform":"linux","name":"Debian GNU/Linux","version":"12","build":"6.1.0-18-amd64"},"inventory":null,"inventoryDelta":{"base":"e3b0","hash":"f00d","added":[{"name":"openssl","version":"3.0.11-1~deb12u2","ecosystem":"Debian:12","arch":"amd64","source":"openssl"}],"removed":[{"name":"openssl","version":"3.0.11-1~deb12u1","ecosystem":"Debian:12","arch":"amd64","source":"openssl"}],"pendingUpdates":[]}}`,
	`{"state":"failed","result":{"message":"not allowed by this endpoint's local policy","exitCode":1,"data":{"files":3}}}`,
	`{"state":"succeeded","result":{"message":"","data":null}}`,
	`{"state":"running","result":null}`,
	`{"capability":99999999999999999999}`,
	`{"capability":-1,"hostname":"h\r\nX-Injected: 1","ips":["x\r\nY"]}`,
	"{\"hostname\":\"\xff\xfe\"}",
	`{"inventory":{"software":[` + `{"name":"a","version":"1","ecosystem":"npm"},{"name":"a","version":"1","ecosystem":"npm"}` + `]}}`,
	`[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]`,
	`null`,
	``,
}

// FuzzMessages decodes bodies as every message of the protocol: decoding
// never panics, and a decoded message encodes to a stable form (what the
// server stores and answers is what it read).
func FuzzMessages(f *testing.F) {
	for _, s := range messageSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, newMsg := range []func() any{
			func() any { return new(EnrollRequest) },
			func() any { return new(CheckInRequest) },
			func() any { return new(Report) },
			func() any { return new(InventoryDelta) },
			func() any { return new(CheckInResponse) },
		} {
			v := newMsg()
			if err := json.Unmarshal(data, v); err != nil {
				continue
			}
			once, err := json.Marshal(v)
			if err != nil {
				t.Fatalf("encode %T decoded from %q: %v", v, data, err)
			}
			w := newMsg()
			if err := json.Unmarshal(once, w); err != nil {
				t.Fatalf("decode %T from its own encoding %s: %v", v, once, err)
			}
			twice, err := json.Marshal(w)
			if err != nil || !bytes.Equal(once, twice) {
				t.Fatalf("%T does not survive a round trip:\n%s\n%s", v, once, twice)
			}
			if c, ok := v.(*CheckInRequest); ok && c.Inventory != nil {
				if InventoryHash(*c.Inventory) != InventoryHash(Canonical(*c.Inventory)) {
					t.Fatalf("the hash of an inventory depends on its order: %s", data)
				}
			}
			if d, ok := v.(*InventoryDelta); ok {
				d.Apply(Inventory{Software: []Software{{Name: "a", Version: "1", Ecosystem: "npm"}}})
			}
		}
	})
}

// FuzzInventoryDelta checks Diff and Apply on inventories decoded from
// fuzzed JSON: the delta from one inventory to another, sent over the
// wire, turns the first into one with the hash of the second.
func FuzzInventoryDelta(f *testing.F) {
	f.Add([]byte(`{"software":[{"name":"a","version":"1","ecosystem":"npm"},{"name":"b","version":"1","ecosystem":"npm"}],"pendingUpdates":[{"id":"KB1","title":"x"}]}`),
		[]byte(`{"software":[{"name":"a","version":"2","ecosystem":"npm"},{"name":"b","version":"1","ecosystem":"npm"},{"name":"b","version":"1","ecosystem":"npm"}],"installedUpdates":[{"id":"KB1","title":"x"}]}`))
	f.Add([]byte(`{}`), []byte(`{"software":[],"pendingUpdates":[],"installedUpdates":[]}`))
	f.Add([]byte(`{"software":[{"name":"kernel","version":"1","ecosystem":"Debian:12","arch":"amd64","source":"linux"}]}`), []byte(`null`))
	f.Fuzz(func(t *testing.T, oldJSON, curJSON []byte) {
		var old, cur Inventory
		if json.Unmarshal(oldJSON, &old) != nil || json.Unmarshal(curJSON, &cur) != nil {
			return
		}
		d := Diff(old, cur)
		if d.Base != InventoryHash(old) || d.Hash != InventoryHash(cur) {
			t.Fatal("the hashes of the delta are not those of the inventories")
		}
		wire, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		var got InventoryDelta
		if err := json.Unmarshal(wire, &got); err != nil {
			t.Fatal(err)
		}
		inv, err := got.Apply(old)
		if err != nil {
			t.Fatalf("apply %s to %s: %v", wire, oldJSON, err)
		}
		if InventoryHash(inv) != InventoryHash(cur) {
			t.Fatalf("%s applied to %s gives %+v, not %s", wire, oldJSON, inv, curJSON)
		}
		if (InventoryHash(old) == InventoryHash(cur)) != d.Empty() {
			t.Fatalf("Empty() = %v for %s", d.Empty(), wire)
		}
	})
}

// TestApplyLargeDelta applies a delta that removes every item of a large
// inventory in reverse order: an agent's message of a few MiB must not
// cost the server more than a moment (a search per removed item took
// seconds here).
func TestApplyLargeDelta(t *testing.T) {
	var inv Inventory
	for i := range 30_000 {
		inv.Software = append(inv.Software, Software{Name: fmt.Sprintf("pkg-%06d", i), Version: "1.0", Ecosystem: "npm"})
	}
	d := InventoryDelta{Added: []Software{{Name: "new", Version: "2", Ecosystem: "npm"}}}
	for i := len(inv.Software) - 1; i >= 0; i-- {
		d.Removed = append(d.Removed, inv.Software[i])
	}
	start := time.Now()
	got, err := d.Apply(inv)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	t.Logf("applied %d removals in %v", len(d.Removed), took)
	if took > 5*time.Second {
		t.Errorf("applying a delta of %d removals took %v", len(d.Removed), took)
	}
	if len(got.Software) != 1 || got.Software[0].Name != "new" {
		t.Errorf("got %d items", len(got.Software))
	}
	d.Removed = append(d.Removed, d.Removed[0])
	if _, err := d.Apply(inv); err == nil {
		t.Error("removing an item twice from an inventory that has it once succeeded")
	}
}
