package feed

import (
	"archive/zip"
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Walk opens location and calls fn for every file in it that p reads, in a
// stable order. A location is a file, a directory (walked), a .zip or .gz
// file, or an http(s) URL. Errors reading the location are wrapped in
// ErrUnreadable; errors from fn are returned as they are.
func Walk(ctx context.Context, client *http.Client, location string, exts []string, fn func(name string, r io.Reader) error) error {
	w := walker{ctx: ctx, exts: exts, fn: fn}
	if strings.HasPrefix(location, "http://") || strings.HasPrefix(location, "https://") {
		return w.url(client, location)
	}
	info, err := os.Stat(location)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrUnreadable, location, err)
	}
	if info.IsDir() {
		return WalkFS(ctx, os.DirFS(location), ".", exts, fn)
	}
	// A file named on the command line is read whatever its ending.
	dir, name := filepath.Split(location)
	if dir == "" {
		dir = "."
	}
	w.fsys = os.DirFS(dir)
	return w.file(name, name, true)
}

// WalkFS is Walk for the directory root of fsys (an embedded sample, say).
func WalkFS(ctx context.Context, fsys fs.FS, root string, exts []string, fn func(name string, r io.Reader) error) error {
	w := walker{ctx: ctx, exts: exts, fn: fn, fsys: fsys}
	var files []string
	err := fs.WalkDir(fsys, root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && strings.HasPrefix(d.Name(), ".") {
			return fs.SkipDir
		}
		if !d.IsDir() {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnreadable, err)
	}
	sort.Strings(files)
	for _, p := range files {
		name := strings.TrimPrefix(strings.TrimPrefix(p, root), "/")
		if err := w.file(p, name, false); err != nil {
			return err
		}
	}
	return nil
}

type walker struct {
	ctx  context.Context
	exts []string
	fn   func(name string, r io.Reader) error
	fsys fs.FS
}

// skip reports whether a file is documentation beside the data rather than
// data: provenance notes, licenses and hidden files.
func skip(name string) bool {
	base := path.Base(name)
	upper := strings.ToUpper(base)
	return strings.HasPrefix(base, ".") || strings.HasPrefix(upper, "SOURCE.") ||
		strings.HasPrefix(upper, "README") || strings.HasPrefix(upper, "LICENSE")
}

func (w walker) wants(name string) bool {
	if skip(name) {
		return false
	}
	n := strings.ToLower(strings.TrimSuffix(name, ".gz"))
	if strings.HasSuffix(n, ".zip") {
		return true
	}
	for _, e := range w.exts {
		if strings.HasSuffix(n, e) {
			return true
		}
	}
	return false
}

// file reads the file at p of w.fsys under the given name; force reads it
// whatever its ending.
func (w walker) file(p, name string, force bool) error {
	if !force && !w.wants(name) {
		return nil
	}
	f, err := w.fsys.Open(p)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnreadable, err)
	}
	defer f.Close()
	if strings.HasSuffix(strings.ToLower(name), ".zip") {
		ra, ok := f.(io.ReaderAt)
		info, err := f.Stat()
		if !ok || err != nil {
			return fmt.Errorf("%w: %s: cannot read the zip archive", ErrUnreadable, name)
		}
		zr, err := zip.NewReader(ra, info.Size())
		if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrUnreadable, name, err)
		}
		return w.zip(zr, name)
	}
	return w.stream(name, f)
}

func (w walker) zip(zr *zip.Reader, name string) error {
	files := append([]*zip.File(nil), zr.File...)
	sort.Slice(files, func(i, j int) bool { return files[i].Name < files[j].Name })
	for _, zf := range files {
		if zf.FileInfo().IsDir() || !w.wants(zf.Name) {
			continue
		}
		rc, err := zf.Open()
		if err != nil {
			return fmt.Errorf("%w: %s: %s: %v", ErrUnreadable, name, zf.Name, err)
		}
		if strings.HasSuffix(strings.ToLower(zf.Name), ".zip") {
			// The CVE List's release zip holds a zip of the records.
			err = w.spoolZip(name+"!"+zf.Name, rc)
		} else {
			err = w.stream(name+"!"+zf.Name, rc)
		}
		rc.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// stream hands one file's content to fn, decompressing .gz files. Errors of
// the underlying reader are remembered so that a file that cannot be read
// fails the run instead of passing for a malformed one.
func (w walker) stream(name string, r io.Reader) error {
	if err := w.ctx.Err(); err != nil {
		return err
	}
	src := &readErr{r: r}
	var in io.Reader = bufio.NewReaderSize(src, 256<<10)
	if strings.HasSuffix(strings.ToLower(name), ".gz") {
		gz, err := gzip.NewReader(in)
		if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrUnreadable, name, err)
		}
		defer gz.Close()
		gzr := &readErr{r: gz}
		in = gzr
		name = strings.TrimSuffix(name, ".gz")
		err = w.fn(name, in)
		if gzr.err != nil {
			return fmt.Errorf("%w: %s: %v", ErrUnreadable, name, gzr.err)
		}
		return err
	}
	err := w.fn(name, in)
	if src.err != nil {
		return fmt.Errorf("%w: %s: %v", ErrUnreadable, name, src.err)
	}
	return err
}

func (w walker) url(client *http.Client, u string) error {
	if client == nil {
		client = &http.Client{Timeout: 30 * time.Minute}
	}
	req, err := http.NewRequestWithContext(w.ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrUnreadable, u, err)
	}
	req.Header.Set("User-Agent", "patchline (+https://github.com/patchline/patchline)")
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnreadable, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%w: %s: HTTP %s", ErrUnreadable, u, resp.Status)
	}
	name := path.Base(req.URL.Path)
	if !strings.HasSuffix(strings.ToLower(name), ".zip") {
		return w.stream(name, resp.Body)
	}
	return w.spoolZip(name, resp.Body)
}

// spoolZip copies a zip archive that can only be streamed to a temporary
// file, for the random access zip needs, and walks it.
func (w walker) spoolZip(name string, r io.Reader) error {
	tmp, err := os.CreateTemp("", "patchline-*.zip")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	n, err := io.Copy(tmp, r)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrUnreadable, name, err)
	}
	zr, err := zip.NewReader(tmp, n)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrUnreadable, name, err)
	}
	return w.zip(zr, name)
}

type readErr struct {
	r   io.Reader
	err error
}

func (r *readErr) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		r.err = err
	}
	return n, err
}
