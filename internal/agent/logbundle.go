package agent

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// logBundle builds the gzip-compressed tar of a collect-logs command: the
// tails of log files and the output of commands, within the bounds of
// MaxLogFileBytes and MaxLogBundleInput, and a manifest that says what is
// in it and what was skipped and why.
type logBundle struct {
	buf      bytes.Buffer
	gz       *gzip.Writer
	tw       *tar.Writer
	manifest strings.Builder
	budget   int64
	included []string
	err      error
	now      time.Time
}

func newLogBundle() *logBundle {
	b := &logBundle{budget: MaxLogBundleInput, now: time.Now()}
	b.gz = gzip.NewWriter(&b.buf)
	b.tw = tar.NewWriter(b.gz)
	return b
}

// add puts data in the bundle as name.
func (b *logBundle) add(name string, data []byte, mod time.Time) {
	if b.err != nil {
		return
	}
	if err := b.tw.WriteHeader(&tar.Header{Name: name, Mode: 0o600, Size: int64(len(data)), ModTime: mod, Typeflag: tar.TypeReg}); err != nil {
		b.err = err
		return
	}
	_, b.err = b.tw.Write(data)
	b.budget -= int64(len(data))
}

// skip notes in the manifest that source is not in the bundle.
func (b *logBundle) skip(source, why string) {
	fmt.Fprintf(&b.manifest, "%s\tskipped: %s\n", source, why)
}

// addFile adds the tail of the file at path, named in the manifest as
// source.
func (b *logBundle) addFile(path, source string) {
	data, fi, note := readTail(path, min(int64(MaxLogFileBytes), b.budget))
	if data == nil {
		b.skip(source, note)
		return
	}
	b.add(bundleName(source), data, fi.ModTime())
	b.included = append(b.included, source)
	fmt.Fprintf(&b.manifest, "%s\t%d of %d bytes%s\n", source, len(data), fi.Size(), note)
}

// addCommand adds the output of a command, run for at most 30 seconds.
func (b *logBundle) addCommand(ctx context.Context, run Runner, name, program string, args ...string) {
	source := program + " " + strings.Join(args, " ")
	if b.budget <= 0 {
		b.skip(source, "the bundle is full")
		return
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	out, err := run(cctx, nil, program, args...)
	cancel()
	switch {
	case err != nil:
		b.skip(source, err.Error())
	case len(bytes.TrimSpace(out)) == 0:
		b.skip(source, "no entries")
	default:
		out = tail(out, int(min(int64(MaxLogFileBytes), b.budget)))
		b.add(name, out, b.now)
		b.included = append(b.included, name)
		fmt.Fprintf(&b.manifest, "%s\t%d bytes\n", source, len(out))
	}
}

// bundleName is the name in the tar of a file at path: relative, with
// forward slashes and no drive letter.
func bundleName(path string) string {
	p := strings.ReplaceAll(path, "\\", "/")
	if len(p) >= 2 && p[1] == ':' {
		p = p[2:]
	}
	return strings.TrimPrefix(filepath.ToSlash(filepath.Clean(p)), "/")
}

// outcome closes the bundle.
func (b *logBundle) outcome() Outcome {
	header := fmt.Sprintf("Patchline log bundle\ncollected %s on %s\n\n", b.now.UTC().Format(time.RFC3339), hostnameOr("unknown"))
	b.add("manifest.txt", []byte(header+b.manifest.String()), b.now)
	if b.err == nil {
		b.err = b.tw.Close()
	}
	if b.err == nil {
		b.err = b.gz.Close()
	}
	if b.err != nil {
		return Failf("building the bundle: %v", b.err)
	}
	return Outcome{
		Message:    fmt.Sprintf("collected %d log sources, %d bytes compressed", len(b.included), b.buf.Len()),
		Data:       map[string]any{"files": b.included, "bytes": b.buf.Len()},
		Bundle:     b.buf.Bytes(),
		BundleType: "application/gzip",
	}
}

// readTail returns the last max bytes of a regular file, or nil and why
// not.
func readTail(path string, max int64) ([]byte, fs.FileInfo, string) {
	if max <= 0 {
		return nil, nil, "the bundle is full"
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, "not present"
	}
	if err != nil {
		return nil, nil, err.Error()
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err.Error()
	}
	if !fi.Mode().IsRegular() {
		return nil, nil, "not a regular file"
	}
	note := ""
	if fi.Size() > max {
		if _, err := f.Seek(fi.Size()-max, io.SeekStart); err != nil {
			return nil, nil, err.Error()
		}
		note = " (the end)"
	}
	data, err := io.ReadAll(io.LimitReader(f, max))
	if err != nil {
		return nil, nil, err.Error()
	}
	return data, fi, note
}

func tail(b []byte, n int) []byte {
	if len(b) <= n {
		return b
	}
	return b[len(b)-n:]
}
