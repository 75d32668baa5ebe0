package upstream

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/patchline/patchline/internal/ingest"
)

// syncMirror syncs a source from a local directory or file, kept current by
// other means (rsync, git pull, a cron job): when the names, sizes or
// modification times of its files changed since the last sync, the whole
// location is ingested, which stores only what differs. The validator is a
// fingerprint of the file list.
func syncMirror(ctx context.Context, j *job) error {
	fp, n, err := fingerprint(j.src.URL)
	if err != nil {
		return fmt.Errorf("mirror %s: %w", j.src.URL, err)
	}
	if fp == j.prev.ETag {
		j.note("mirror unchanged")
		return nil
	}
	j.next.ETag = fp
	j.note("mirror changed: %d files", n)
	j.inputs = append(j.inputs, ingest.Source{Parser: j.parser(), Location: j.src.URL})
	return nil
}

// fingerprint hashes the relative path, size and modification time of every
// file under root (root itself when it is a file), hidden ones left out.
func fingerprint(root string) (string, int, error) {
	h := sha256.New()
	n := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != root && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		fmt.Fprintf(h, "%s\x00%d\x00%d\n", filepath.ToSlash(rel), info.Size(), info.ModTime().UnixNano())
		n++
		return nil
	})
	if err != nil {
		return "", 0, err
	}
	if _, err := os.Stat(root); err != nil {
		return "", 0, err
	}
	return "files:" + hex.EncodeToString(h.Sum(nil)), n, nil
}
