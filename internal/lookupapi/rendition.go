package lookupapi

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"sync"

	"github.com/patchline/patchline/internal/cve"
)

// The streams of a catalog that names its versions are rendered: the
// lines of the whole catalog are encoded once a version, into a temporary
// file, and every request of that version copies its part of them from
// there. A line then costs its encoding once a change of the catalog
// rather than once a request, and the bytes (60 MB for bulk.jsonl at
// 300,000 records) are held by the page cache, not by the heap. The
// streams of other catalogs, and of one whose rendering failed, are
// encoded as they are sent.

// versioned is a catalog that names the state its reads see: a number
// that changes with every commit that changes its records (the SQLite
// catalog's data version, the PostgreSQL catalog's catalog_version).
type versioned interface {
	Version(ctx context.Context) (int64, error)
}

// markEvery is the number of lines between two marks of a rendition: an
// `after` reads at most that many lines to find where its stream starts.
const markEvery = 64

// rendition is the lines of a stream over the whole catalog at one
// version, in an unlinked file that is closed once the rendition is
// replaced and no request reads it.
type rendition struct {
	version int64
	f       *os.File
	size    int64
	// marks holds the key and offset of every markEvery-th line, from the
	// first.
	marks []mark

	// readers counts the requests reading f; retired says that a newer
	// rendition replaced this one.
	mu      sync.Mutex
	readers int
	retired bool
}

type mark struct{ key, off int64 }

// renditions keeps the rendition of each stream.
type renditions struct {
	mu  sync.Mutex // held while rendering: requests of the stream wait
	cur map[string]*rendition
}

// acquire returns the rendition of stream name at the catalog's version,
// rendering it with line when there is none; the caller releases it.
// It returns nil, with no error, for a catalog without versions.
func (s *Server) acquire(ctx context.Context, name string, line func([]byte, *cve.Summary) []byte) (*rendition, error) {
	vc, ok := s.catalog.(versioned)
	if !ok {
		return nil, nil
	}
	version, err := vc.Version(ctx)
	if err != nil {
		return nil, err
	}
	rs := &s.renditions
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if r := rs.cur[name]; r != nil && r.version == version {
		r.hold()
		return r, nil
	}
	// Rendered for every request that waits, whether or not this one
	// stays.
	r, err := s.renderStream(context.WithoutCancel(ctx), version, line)
	if err != nil {
		return nil, fmt.Errorf("render %s: %w", name, err)
	}
	if old := rs.cur[name]; old != nil {
		old.retire()
	}
	if rs.cur == nil {
		rs.cur = map[string]*rendition{}
	}
	rs.cur[name] = r
	r.hold()
	return r, nil
}

// renderStream writes the lines of every record to a new rendition.
func (s *Server) renderStream(ctx context.Context, version int64, line func([]byte, *cve.Summary) []byte) (*rendition, error) {
	f, err := os.CreateTemp("", "patchline-stream-*")
	if err != nil {
		return nil, err
	}
	// Unlinked at once, the file goes with its last descriptor, and with
	// the process however it ends.
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, err
	}
	r := &rendition{version: version, f: f}
	bw := bufio.NewWriterSize(f, streamBuffer)
	var cur cve.Summary // outside the closure: one of them, not one a row
	n := 0
	err = s.catalog.Walk(ctx, "", func(sum cve.Summary) error {
		cur = sum
		if n%markEvery == 0 {
			key, _ := cve.Key(cur.CVEID)
			r.marks = append(r.marks, mark{key: key, off: r.size})
		}
		n++
		b := line(bw.AvailableBuffer(), &cur)
		r.size += int64(len(b))
		_, err := bw.Write(b)
		return err
	})
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return r, nil
}

// hold counts a reader in.
func (r *rendition) hold() {
	r.mu.Lock()
	r.readers++
	r.mu.Unlock()
}

// release counts a reader out, and closes the file of a retired
// rendition once no request reads it.
func (r *rendition) release() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.readers--
	if r.retired && r.readers == 0 {
		r.f.Close()
	}
}

// retire marks a replaced rendition, closing its file unless a request
// reads it.
func (r *rendition) retire() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.retired = true
	if r.readers == 0 {
		r.f.Close()
	}
}

// start returns the offset of the first line after the record with the
// key of `after` (a valid CVE id), 0 for "".
func (r *rendition) start(after string) (int64, error) {
	if after == "" {
		return 0, nil
	}
	key, _ := cve.Key(after)
	// The block whose first line is the last at or before the key.
	i := sort.Search(len(r.marks), func(i int) bool { return r.marks[i].key > key })
	if i == 0 {
		return 0, nil
	}
	off, end := r.marks[i-1].off, r.size
	if i < len(r.marks) {
		end = r.marks[i].off
	}
	block := make([]byte, end-off)
	if _, err := r.f.ReadAt(block, off); err != nil {
		return 0, err
	}
	for len(block) > 0 {
		n := bytes.IndexByte(block, '\n') + 1
		if n == 0 {
			return 0, fmt.Errorf("line at %d has no end", off)
		}
		k, ok := lineKey(block[:n])
		if !ok {
			return 0, fmt.Errorf("line at %d names no CVE id", off)
		}
		if k > key {
			break
		}
		off += int64(n)
		block = block[n:]
	}
	return off, nil
}

// lineKey returns the key of the record of a stream line: every stream's
// line starts with the record's id (`{"cveId":"CVE-…` or `CVE-…,`), the
// first CVE id in it.
func lineKey(line []byte) (int64, bool) {
	i := bytes.Index(line, []byte("CVE-"))
	if i < 0 {
		return 0, false
	}
	j := i + len("CVE-")
	for j < len(line) && (line[j] >= '0' && line[j] <= '9' || line[j] == '-') {
		j++
	}
	return cve.Key(string(line[i:j]))
}

// reader returns the lines from offset on.
func (r *rendition) reader(offset int64) io.Reader {
	return io.NewSectionReader(r.f, offset, r.size-offset)
}
