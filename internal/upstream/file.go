package upstream

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/url"
	"os"
	"path"
	"strings"
)

// syncFile syncs a source published as one document (KEV, EPSS, the Debian
// tracker) with a conditional request. The cursor is the SHA-256 of the
// document last ingested, so that an upstream that answers 200 without
// validators still costs no ingest run when nothing changed.
func syncFile(ctx context.Context, j *job) error {
	p := j.parser()
	name := localName(j.src.URL, j.src.Name, p.Exts)
	file, err := j.path(j.src.Name, name)
	if err != nil {
		return err
	}
	resp, err := j.download(ctx, request{url: j.src.URL, etag: j.prev.ETag, lastModified: j.prev.LastModified}, file)
	if err != nil {
		return err
	}
	if resp.notModified {
		j.note("not modified")
		return nil
	}
	j.next.ETag, j.next.LastModified = resp.etag, resp.lastModified
	sum, err := fileSum(file)
	if err != nil {
		return err
	}
	if sum == j.prev.Cursor {
		j.note("fetched, content unchanged")
		return nil
	}
	j.next.Cursor = sum
	j.note("fetched %s", name)
	j.ingestDir(strict(p), j.src.Name)
	return nil
}

// localName is the name under which a document fetched from u is kept: the
// last segment of its path when its ending is one the parser reads (with
// or without .gz), else the source name with the parser's first ending.
func localName(u, source string, exts []string) string {
	if pu, err := url.Parse(u); err == nil {
		base := path.Base(pu.Path)
		n := strings.ToLower(strings.TrimSuffix(base, ".gz"))
		for _, e := range exts {
			if strings.HasSuffix(n, e) && len(n) > len(e) {
				return base
			}
		}
	}
	if len(exts) == 0 {
		return source
	}
	return source + exts[0]
}

func fileSum(name string) (string, error) {
	f, err := os.Open(name)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hash %s: %w", name, err)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}
