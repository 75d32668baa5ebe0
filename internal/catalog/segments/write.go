package segments

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// segmentExt ends the name of a segment file; tmpPrefix starts the name of
// a file being written.
const (
	segmentExt = ".seg"
	tmpPrefix  = ".tmp-"
)

// ErrStale reports that the store is not at the generation a delta
// starts from.
var ErrStale = errors.New("body store is not at the generation the change starts from")

// Put adds the body of key to the segment being written; a nil body says
// that the catalog has no record of key. Keys come in increasing order.
type Put func(key int64, body []byte) error

// WriteBase writes a store of every record of the catalog at generation
// gen into dir, replacing what it held: fill calls put for each record, in
// increasing key order.
func WriteBase(dir string, gen int64, fill func(put Put) error) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("write body store: %w", err)
	}
	si, err := writeSegment(dir, gen, fill)
	if err != nil {
		return fmt.Errorf("write body store: %w", err)
	}
	m := manifest{Format: format, Generation: gen, Segments: []segInfo{si}}
	if err := writeManifest(dir, m); err != nil {
		os.Remove(filepath.Join(dir, si.Name))
		return fmt.Errorf("write body store: %w", err)
	}
	removeUnlisted(dir, m)
	return nil
}

// NeedsBase reports whether a change of n records to the catalog at
// generation from is to be written as a new base rather than a delta:
// when the store in dir is not at from or cannot be read, or when its
// deltas would grow past a quarter of its base or to maxSegments.
func NeedsBase(dir string, from int64, n int) bool {
	m, err := readManifest(dir)
	if err != nil || m.Generation != from || len(m.Segments) >= maxSegments {
		return true
	}
	base := m.Segments[0]
	var deltas int64
	for _, si := range m.Segments[1:] {
		deltas += si.Bytes
	}
	var avg int64
	if base.Records > 0 {
		avg = base.Bytes / int64(base.Records)
	}
	return 4*(deltas+int64(n)*avg) > base.Bytes
}

// WriteDelta adds to the store in dir, at generation from, a segment of
// the records a change of the catalog wrote, after which it holds
// generation to: fill calls put for each, in increasing key order, with a
// nil body for a record deleted. It returns ErrStale when the store is not
// at from.
func WriteDelta(dir string, from, to int64, fill func(put Put) error) error {
	m, err := readManifest(dir)
	if err != nil || m.Generation != from {
		return ErrStale
	}
	si, err := writeSegment(dir, to, fill)
	if err != nil {
		return fmt.Errorf("write body store: %w", err)
	}
	if cur, err := readManifest(dir); err != nil || cur.Generation != from {
		os.Remove(filepath.Join(dir, si.Name)) // another writer came first
		return ErrStale
	}
	m.Generation = to
	m.Segments = append(m.Segments, si)
	if err := writeManifest(dir, m); err != nil {
		os.Remove(filepath.Join(dir, si.Name))
		return fmt.Errorf("write body store: %w", err)
	}
	return nil
}

// writeSegment writes the segment of what fill puts, under a name of its
// own in dir.
func writeSegment(dir string, gen int64, fill func(put Put) error) (segInfo, error) {
	si := segInfo{Name: fmt.Sprintf("%016x-%x%s", uint64(gen), time.Now().UnixNano(), segmentExt)}
	tmp := filepath.Join(dir, tmpPrefix+si.Name)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return si, err
	}
	w := &segWriter{w: bufio.NewWriterSize(f, 1<<20), off: uint64(len(segmentMagic))}
	w.w.WriteString(segmentMagic)
	err = fill(w.put)
	if err == nil {
		err = w.finish()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, si.Name))
	}
	if err != nil {
		os.Remove(tmp)
		return si, err
	}
	si.Size, si.Records, si.Bytes = int64(w.off), len(w.index), w.bodies
	return si, nil
}

// segWriter writes the bodies of a segment and keeps its index.
type segWriter struct {
	w      *bufio.Writer
	off    uint64
	index  []entry
	bodies int64
}

func (w *segWriter) put(key int64, body []byte) error {
	if n := len(w.index); n > 0 && key <= w.index[n-1].key {
		return fmt.Errorf("key %d after %d: keys out of order", key, w.index[n-1].key)
	}
	if body == nil {
		w.index = append(w.index, entry{key: key, n: tombstone})
		return nil
	}
	if uint64(len(body)) >= uint64(tombstone) || w.off+uint64(len(body)) >= 1<<offsetBits {
		return fmt.Errorf("body %d: too large", key)
	}
	w.index = append(w.index, entry{key: key, at: w.off, n: uint32(len(body)), sum: crc32.Checksum(body, castagnoli)})
	if _, err := w.w.Write(body); err != nil {
		return err
	}
	w.off += uint64(len(body))
	w.bodies += int64(len(body))
	return nil
}

// finish writes the index and the footer.
func (w *segWriter) finish() error {
	indexAt := w.off
	sum := crc32.New(castagnoli)
	var b [entrySize]byte
	for _, e := range w.index {
		binary.LittleEndian.PutUint64(b[0:], uint64(e.key))
		binary.LittleEndian.PutUint64(b[8:], e.at)
		binary.LittleEndian.PutUint32(b[16:], e.n)
		binary.LittleEndian.PutUint32(b[20:], e.sum)
		sum.Write(b[:])
		if _, err := w.w.Write(b[:]); err != nil {
			return err
		}
		w.off += entrySize
	}
	var foot [footerSize]byte
	binary.LittleEndian.PutUint64(foot[0:], indexAt)
	binary.LittleEndian.PutUint64(foot[8:], uint64(len(w.index)))
	binary.LittleEndian.PutUint32(foot[16:], sum.Sum32())
	copy(foot[24:], footerMagic)
	w.w.Write(foot[:])
	w.off += footerSize
	return w.w.Flush()
}

// writeManifest puts m in place in dir: written apart, then renamed.
func writeManifest(dir string, m manifest) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, fmt.Sprintf("%s%s-%d", tmpPrefix, ManifestName, os.Getpid()))
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(append(b, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, ManifestName))
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// staleTmp is the age past which a file being written is one a killed
// writer left.
const staleTmp = time.Hour

// removeUnlisted removes the segments m does not list, and the files of
// writers killed meanwhile. A reader that has them open keeps reading
// them (on Unix; elsewhere the removal waits for the next writer).
func removeUnlisted(dir string, m manifest) {
	listed := map[string]bool{}
	for _, si := range m.Segments {
		listed[si.Name] = true
	}
	des, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, de := range des {
		name := de.Name()
		switch {
		case strings.HasPrefix(name, tmpPrefix):
			if info, err := de.Info(); err == nil && time.Since(info.ModTime()) > staleTmp {
				os.Remove(filepath.Join(dir, name))
			}
		case filepath.Ext(name) == segmentExt && !listed[name]:
			os.Remove(filepath.Join(dir, name))
		}
	}
}
