// Package segments is a read-optimised store of the catalog's record
// bodies, kept beside the SQLite catalog as derived data: immutable
// segment files, each a run of bodies followed by a sorted index of their
// keys, offsets, lengths and checksums, and a manifest that lists the
// segments and names the catalog generation they hold. A read is a binary
// search in memory and one ReadAt, where SQLite descends a B-tree and reads
// a page at a time (bench/RESULTS.md, 2026-11-25).
//
// A change to the catalog adds a delta segment of the records it changed
// (a newer segment's entry, or tombstone, wins over an older one's); when
// the deltas would outgrow a quarter of the base, or number maxSegments,
// the writer writes a new base of every record instead. Every file is
// written to a temporary name and renamed, the manifest last: a reader
// sees the old store or the new one. The files are not synced, as the
// catalog's own commits are not (SQLite's synchronous=NORMAL in WAL mode):
// what a crash may leave half written, the checks find. A missing
// manifest, a segment of the wrong size, a bad footer or index checksum
// fail Open; a body whose checksum does not match fails its Read with
// ErrCorrupt, and the caller reads the catalog instead.
package segments

import (
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
)

// ManifestName is the manifest's file name in the store's directory.
const ManifestName = "MANIFEST"

// format is the version of the manifest and segment layout.
const format = 1

// The layout of a segment: segmentMagic, the bodies, the index
// (entrySize bytes an entry, by key), the footer (footerSize bytes: index
// offset, entry count, the index's CRC-32C, footerMagic).
const (
	segmentMagic = "PLBODY1\n"
	footerMagic  = "PLBODYE\n"
	entrySize    = 24
	footerSize   = 32
	// tombstone is the length of the entry of a deleted record.
	tombstone = ^uint32(0)
	// maxSegments bounds the segments of a store: a base and its deltas.
	maxSegments = 16
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt reports a store file that is not as written.
var ErrCorrupt = errors.New("body store is corrupt")

// manifest lists the segments of a store, oldest (the base) first.
type manifest struct {
	Format     int       `json:"format"`
	Generation int64     `json:"generation"`
	Segments   []segInfo `json:"segments"`
}

// segInfo describes a segment file.
type segInfo struct {
	Name    string `json:"name"`
	Size    int64  `json:"size"`    // of the file
	Records int    `json:"records"` // entries, tombstones included
	Bytes   int64  `json:"bytes"`   // of bodies
}

// Store is an open body store. Its methods may be called concurrently.
type Store struct {
	gen   int64
	files []*os.File
	keys  []int64 // sorted
	locs  []loc   // of keys[i]
	disk  int64
}

// loc is where a body is: its file (the top 16 bits of at) and offset in
// it, its length and checksum.
type loc struct {
	at  uint64
	n   uint32
	sum uint32
}

const offsetBits = 48

// Open opens the store in dir. It fails when the manifest is missing or
// unreadable, or a segment is not the file the manifest describes.
func Open(dir string) (*Store, error) {
	m, err := readManifest(dir)
	if err != nil {
		return nil, err
	}
	s := &Store{gen: m.Generation}
	var all []entry
	for i, si := range m.Segments {
		f, es, err := openSegment(filepath.Join(dir, si.Name), si)
		if err != nil {
			s.Close()
			return nil, err
		}
		s.files = append(s.files, f)
		s.disk += si.Size
		for j := range es {
			es[j].at |= uint64(i) << offsetBits
		}
		all = append(all, es...)
	}
	if len(m.Segments) > 1 {
		// The newest entry of each key last among its equals.
		slices.SortStableFunc(all, func(a, b entry) int { return cmp.Compare(a.key, b.key) })
	}
	s.keys = make([]int64, 0, len(all))
	s.locs = make([]loc, 0, len(all))
	for i, e := range all {
		if i+1 < len(all) && all[i+1].key == e.key {
			continue // an older entry
		}
		if e.n == tombstone {
			continue
		}
		s.keys = append(s.keys, e.key)
		s.locs = append(s.locs, loc{at: e.at, n: e.n, sum: e.sum})
	}
	s.keys = slices.Clip(s.keys)
	s.locs = slices.Clip(s.locs)
	return s, nil
}

// Generation is the catalog generation the store holds.
func (s *Store) Generation() int64 { return s.gen }

// Len is the number of records in the store.
func (s *Store) Len() int { return len(s.keys) }

// MemoryBytes is the memory of the store's index.
func (s *Store) MemoryBytes() int { return cap(s.keys)*8 + cap(s.locs)*16 }

// DiskBytes is the size of the store's segment files.
func (s *Store) DiskBytes() int64 { return s.disk }

// Read appends the body of key to dst; found is false when the store has
// no record of key. A body that is not as written is ErrCorrupt.
func (s *Store) Read(key int64, dst []byte) (out []byte, found bool, err error) {
	i, ok := slices.BinarySearch(s.keys, key)
	if !ok {
		return dst, false, nil
	}
	l := s.locs[i]
	n := len(dst)
	out = slices.Grow(dst, int(l.n))[:n+int(l.n)]
	body := out[n:]
	f := s.files[l.at>>offsetBits]
	if _, err := f.ReadAt(body, int64(l.at&(1<<offsetBits-1))); err != nil {
		return dst, false, fmt.Errorf("read body %d: %w", key, err)
	}
	if crc32.Checksum(body, castagnoli) != l.sum {
		return dst, false, fmt.Errorf("body %d: checksum: %w", key, ErrCorrupt)
	}
	return out, true, nil
}

// Close closes the segment files. Reads in flight may fail.
func (s *Store) Close() error {
	var errs []error
	for _, f := range s.files {
		errs = append(errs, f.Close())
	}
	s.files = nil
	return errors.Join(errs...)
}

// entry is an index entry of a segment.
type entry struct {
	key int64
	at  uint64
	n   uint32
	sum uint32
}

// openSegment opens the segment at path and reads its index, checking the
// file against what the manifest says of it.
func openSegment(path string, si segInfo) (*os.File, []entry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	es, err := readIndex(f, si)
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("segment %s: %w", si.Name, err)
	}
	return f, es, nil
}

func readIndex(f *os.File, si segInfo) ([]entry, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := st.Size()
	if size != si.Size || size < int64(len(segmentMagic))+footerSize {
		return nil, fmt.Errorf("size %d, want %d: %w", size, si.Size, ErrCorrupt)
	}
	var head [len(segmentMagic)]byte
	var foot [footerSize]byte
	if _, err := f.ReadAt(head[:], 0); err != nil {
		return nil, err
	}
	if _, err := f.ReadAt(foot[:], size-footerSize); err != nil {
		return nil, err
	}
	indexAt := binary.LittleEndian.Uint64(foot[0:])
	count := binary.LittleEndian.Uint64(foot[8:])
	sum := binary.LittleEndian.Uint32(foot[16:])
	if string(head[:]) != segmentMagic || string(foot[24:]) != footerMagic ||
		count != uint64(si.Records) || indexAt < uint64(len(segmentMagic)) ||
		indexAt+count*entrySize+footerSize != uint64(size) {
		return nil, fmt.Errorf("footer: %w", ErrCorrupt)
	}
	raw := make([]byte, count*entrySize)
	if _, err := f.ReadAt(raw, int64(indexAt)); err != nil {
		return nil, err
	}
	if crc32.Checksum(raw, castagnoli) != sum {
		return nil, fmt.Errorf("index checksum: %w", ErrCorrupt)
	}
	es := make([]entry, count)
	for i := range es {
		b := raw[i*entrySize:]
		e := entry{key: int64(binary.LittleEndian.Uint64(b)), at: binary.LittleEndian.Uint64(b[8:]),
			n: binary.LittleEndian.Uint32(b[16:]), sum: binary.LittleEndian.Uint32(b[20:])}
		if i > 0 && e.key <= es[i-1].key {
			return nil, fmt.Errorf("index out of order: %w", ErrCorrupt)
		}
		if e.n != tombstone && (e.at < uint64(len(segmentMagic)) || e.at+uint64(e.n) > indexAt) {
			return nil, fmt.Errorf("entry %d out of bounds: %w", e.key, ErrCorrupt)
		}
		es[i] = e
	}
	return es, nil
}

// readManifest reads the manifest of the store in dir.
func readManifest(dir string) (manifest, error) {
	var m manifest
	b, err := os.ReadFile(filepath.Join(dir, ManifestName))
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("manifest: %w: %v", ErrCorrupt, err)
	}
	if m.Format != format {
		return m, fmt.Errorf("manifest: format %d, want %d", m.Format, format)
	}
	if len(m.Segments) == 0 || len(m.Segments) > maxSegments {
		return m, fmt.Errorf("manifest: %d segments: %w", len(m.Segments), ErrCorrupt)
	}
	for _, si := range m.Segments {
		if si.Name != filepath.Base(si.Name) || filepath.Ext(si.Name) != segmentExt {
			return m, fmt.Errorf("manifest: segment %q: %w", si.Name, ErrCorrupt)
		}
	}
	return m, nil
}

// Generation returns the catalog generation that the store in dir holds,
// from its manifest alone.
func Generation(dir string) (int64, error) {
	m, err := readManifest(dir)
	return m.Generation, err
}
