package exposure

import (
	"hash/maphash"
	"slices"
)

// runs holds a list of T for each of many string keys (the index's
// 800,000 products at 300,000 CVEs, its 200,000 advisories) in a few
// arrays rather than a map of strings to slices, whose keys and lists are
// two objects per key that the collector marks at each cycle. The keys are
// one byte array, the lists runs in chunks of runsChunk items with room to
// grow, and a key is found by its hash in a map of integers, checked
// against the key itself. With T free of pointers, the collector looks
// into none of it.
//
// A list that outgrows its room moves to the end of the last chunk with
// twice the room. The place it leaves is given back when the lists are
// written again without room: by insert, once the chunks hold more room
// than lists, and by compact, which also leaves out the keys whose lists
// are empty. A slice that get returns is valid until the next change.
type runs[T any] struct {
	seed   maphash.Seed
	at     map[uint64]uint32 // rows by hash of key; a hash taken goes on to the next
	rows   []runRow
	keys   []byte
	chunks [][]T // filled from the start; a list longer than runsChunk has one of its own
	used   int   // items of the chunks given to lists, with their room
	live   int   // items in lists
	// slack is the room beyond twice live at which insert compacts.
	slack int
}

// runsChunk is the number of items of a chunk: the arrays stay small
// enough that growing never copies more than one list.
const runsChunk = 1 << 16

// runRow is one key and its list: where each starts, and the list's
// length and room.
type runRow struct {
	key, keyLen uint32
	chunk, off  uint32
	n, cap      uint32
}

func newRuns[T any]() runs[T] {
	return runs[T]{seed: maphash.MakeSeed(), at: map[uint64]uint32{}, slack: 1 << 16}
}

// find returns the row of key; ok is false when there is none, and h is
// then where a new row of key goes in at.
func (r *runs[T]) find(key string) (row uint32, h uint64, ok bool) {
	for h = maphash.String(r.seed, key); ; h++ {
		if row, ok = r.at[h]; !ok || string(r.keyOf(r.rows[row])) == key {
			return row, h, ok
		}
	}
}

// keyOf returns the bytes of the key of a row, valid until the next
// change.
func (r *runs[T]) keyOf(w runRow) []byte { return r.keys[w.key : w.key+w.keyLen] }

// list returns the list of a row with its room, nil for a row without
// room (whose chunk may be gone).
func (r *runs[T]) list(w runRow) []T {
	if w.cap == 0 {
		return nil
	}
	return r.chunks[w.chunk][w.off : w.off+w.cap]
}

// get returns the list of key, nil for none.
func (r *runs[T]) get(key string) []T {
	row, _, ok := r.find(key)
	if !ok {
		return nil
	}
	w := r.rows[row]
	return r.list(w)[:w.n:w.n]
}

// Len returns the number of keys whose lists are not empty.
func (r *runs[T]) Len() int {
	n := 0
	for _, w := range r.rows {
		if w.n > 0 {
			n++
		}
	}
	return n
}

// alloc gives room for n items at the end of the last chunk, or in a new
// one.
func (r *runs[T]) alloc(n uint32) (chunk, off uint32) {
	last := len(r.chunks) - 1
	if last < 0 || cap(r.chunks[last])-len(r.chunks[last]) < int(n) {
		r.chunks = append(r.chunks, make([]T, 0, max(runsChunk, int(n))))
		last++
	}
	c := r.chunks[last]
	r.chunks[last] = c[:len(c)+int(n)]
	r.used += int(n)
	return uint32(last), uint32(len(c))
}

// insert puts v into the list of key at the place that pos gives for the
// list as it is (0 to its length), making the key when it is new.
func (r *runs[T]) insert(key string, v T, pos func([]T) int) {
	if r.used > 2*r.live+r.slack {
		r.pack()
	}
	row, h, ok := r.find(key)
	if !ok {
		row = uint32(len(r.rows))
		r.rows = append(r.rows, runRow{key: uint32(len(r.keys)), keyLen: uint32(len(key))})
		r.keys = append(r.keys, key...)
		r.at[h] = row
	}
	w := &r.rows[row]
	if w.n == w.cap {
		moved := *w
		moved.cap = max(1, 2*w.cap)
		moved.chunk, moved.off = r.alloc(moved.cap)
		copy(r.list(moved), r.list(*w)[:w.n])
		*w = moved
	}
	list := r.list(*w)[:w.n+1]
	at := pos(list[:w.n])
	copy(list[at+1:], list[at:w.n])
	list[at] = v
	w.n++
	r.live++
}

// filter keeps of each list the items keep reports true for, and calls
// changed with the key of each list it shortens (a string of its own).
func (r *runs[T]) filter(keep func(T) bool, changed func(key string)) {
	for i := range r.rows {
		w := &r.rows[i]
		list := r.list(*w)[:w.n]
		kept := slices.DeleteFunc(list, func(v T) bool { return !keep(v) })
		if len(kept) == len(list) {
			continue
		}
		w.n = uint32(len(kept))
		r.live -= len(list) - len(kept)
		if changed != nil {
			changed(string(r.keyOf(*w)))
		}
	}
}

// pack writes the lists again one after the other without room.
func (r *runs[T]) pack() {
	chunks := r.chunks
	r.chunks, r.used = nil, 0
	for i := range r.rows {
		w := &r.rows[i]
		if w.n == 0 {
			w.chunk, w.off, w.cap = 0, 0, 0
			continue
		}
		from := chunks[w.chunk][w.off : w.off+w.n]
		w.chunk, w.off = r.alloc(w.n)
		w.cap = w.n
		copy(r.list(*w), from)
	}
}

// compact gives back the room of the lists and the keys of the lists
// left empty; it does nothing when there is neither.
func (r *runs[T]) compact() {
	empty := 0
	for _, w := range r.rows {
		if w.n == 0 {
			empty++
		}
	}
	if empty == 0 {
		if r.used > r.live {
			r.pack()
		}
		return
	}
	out := runs[T]{seed: r.seed, slack: r.slack, at: make(map[uint64]uint32, len(r.rows)-empty),
		rows: make([]runRow, 0, len(r.rows)-empty), chunks: r.chunks, used: r.used, live: r.live}
	for _, w := range r.rows {
		if w.n == 0 {
			continue
		}
		key := r.keyOf(w)
		h := maphash.Bytes(r.seed, key) // as find hashes it: the keys are distinct
		for _, taken := out.at[h]; taken; _, taken = out.at[h] {
			h++
		}
		out.at[h] = uint32(len(out.rows))
		w.key = uint32(len(out.keys))
		out.rows = append(out.rows, w)
		out.keys = append(out.keys, key...)
	}
	out.pack()
	*r = out
}
