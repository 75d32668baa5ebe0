package exposure

import "slices"

// fixesTable holds the index's sets of atoms, a million of them at
// 300,000 CVEs whose packages are real-shaped (most products have a set or
// two of their own). They are kept in a few arrays rather than a million
// objects, so that the collector, which marks every object of the live
// heap at each cycle, has three of them to look at: a row of integers per
// set, the products' names one after another, and the atoms of each set
// one run after another (one array, whose pointers all name the pool's few
// thousand atoms). The arrays only grow; a slice or name taken from them
// stays what it was.
type fixesTable struct {
	rows  []fixesRow
	names []byte
	atoms []*atom
	// strs are the distinct ecosystems and architectures that rows name
	// by index, 0 the empty string; at holds their indexes.
	strs []string
	at   map[string]uint16
}

// fixesRow is one set of atoms of a product, by position in the table's
// arrays: 16 bytes.
type fixesRow struct {
	name, atoms       uint32 // where the name starts in names, the atoms in atoms
	nameLen, atomsLen uint16
	ecosystem, arch   uint16 // in strs
}

// add appends a set and returns its id. ok is false for a set the table
// cannot hold, which the index leaves out: a product name of 64 KiB or
// more, 65,536 atoms or more, or a 65,536th distinct ecosystem; no feed
// has any of them, and the record itself stays in the catalog.
func (t *fixesTable) add(f fixes) (id int32, ok bool) {
	eco, ok1 := t.index(f.ecosystem)
	arch, ok2 := t.index(f.arch)
	if !ok1 || !ok2 || len(f.product) > 0xffff || len(f.atoms) > 0xffff {
		return 0, false
	}
	t.rows = append(t.rows, fixesRow{
		name: uint32(len(t.names)), nameLen: uint16(len(f.product)),
		atoms: uint32(len(t.atoms)), atomsLen: uint16(len(f.atoms)),
		ecosystem: eco, arch: arch,
	})
	t.names = append(t.names, f.product...)
	t.atoms = append(t.atoms, f.atoms...)
	return int32(len(t.rows) - 1), true
}

// index returns the index of s in strs, adding it when it is not there
// and there is room.
func (t *fixesTable) index(s string) (uint16, bool) {
	if t.at == nil {
		t.strs, t.at = []string{""}, map[string]uint16{"": 0}
	}
	if i, ok := t.at[s]; ok {
		return i, true
	}
	if len(t.strs) > 0xffff {
		return 0, false
	}
	t.strs = append(t.strs, s)
	t.at[s] = uint16(len(t.strs) - 1)
	return t.at[s], true
}

// get returns the set id, its product's name a string of its own.
func (t *fixesTable) get(id int32) fixes {
	r := t.rows[id]
	return fixes{
		ecosystem: t.strs[r.ecosystem],
		product:   string(t.names[r.name : r.name+uint32(r.nameLen)]),
		arch:      t.strs[r.arch],
		atoms:     t.atomsOf(r),
	}
}

// atomsOf returns the atoms of a row, a slice of the table's array.
func (t *fixesTable) atomsOf(r fixesRow) []*atom {
	return t.atoms[r.atoms : r.atoms+uint32(r.atomsLen) : r.atoms+uint32(r.atomsLen)]
}

// arch returns the architecture of set id, "" for any.
func (t *fixesTable) arch(id int32) string { return t.strs[t.rows[id].arch] }

// is reports whether set id is the set of atoms of product of ecosystem.
func (t *fixesTable) is(id int32, ecosystem, product string, atoms []*atom) bool {
	r := t.rows[id]
	return t.strs[r.ecosystem] == ecosystem && string(t.names[r.name:r.name+uint32(r.nameLen)]) == product &&
		slices.Equal(t.atomsOf(r), atoms)
}
