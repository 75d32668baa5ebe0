package feed

import (
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func gz(t *testing.T, s string) []byte {
	t.Helper()
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	w.Write([]byte(s))
	w.Close()
	return b.Bytes()
}

func zipOf(t *testing.T, files map[string][]byte) []byte {
	t.Helper()
	var b bytes.Buffer
	w := zip.NewWriter(&b)
	for name, body := range files {
		f, _ := w.Create(name)
		f.Write(body)
	}
	w.Close()
	return b.Bytes()
}

func collect(t *testing.T, location string) (map[string]string, error) {
	t.Helper()
	got := map[string]string{}
	err := Walk(context.Background(), nil, location, []string{".json"}, func(name string, r io.Reader) error {
		b, err := io.ReadAll(r)
		got[name] = string(b)
		return err
	})
	return got, err
}

func TestWalk(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, body []byte) {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a/one.json", []byte("1"))
	write("a/two.json.gz", gz(t, "2"))
	write("a/SOURCE.md", []byte("provenance"))
	write("a/notes.txt", []byte("not data"))
	inner := zipOf(t, map[string][]byte{"cves/CVE-1.json": []byte("4")})
	write("b/all.zip", zipOf(t, map[string][]byte{"x/three.json": []byte("3"), "cves.zip": inner, "x/README.md": []byte("r")}))

	got, err := collect(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"a/one.json":                         "1",
		"a/two.json":                         "2",
		"b/all.zip!x/three.json":             "3",
		"b/all.zip!cves.zip!cves/CVE-1.json": "4",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}

	// A file named directly is read whatever its ending.
	got, err = collect(t, filepath.Join(dir, "a/notes.txt"))
	if err != nil || got["notes.txt"] != "not data" {
		t.Errorf("single file: %v %v", got, err)
	}
}

func TestWalkURL(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/feed.json.gz":
			w.Write(gz(t, "gz"))
		case "/all.zip":
			w.Write(zipOf(t, map[string][]byte{"GHSA-1.json": []byte("z")}))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	got, err := collect(t, srv.URL+"/feed.json.gz")
	if err != nil || got["feed.json"] != "gz" {
		t.Errorf("gz URL: %v %v", got, err)
	}
	got, err = collect(t, srv.URL+"/all.zip")
	if err != nil || got["all.zip!GHSA-1.json"] != "z" {
		t.Errorf("zip URL: %v %v", got, err)
	}
	if _, err := collect(t, srv.URL+"/missing.json"); !errors.Is(err, ErrUnreadable) {
		t.Errorf("404 URL: err = %v, want ErrUnreadable", err)
	}
}

func TestWalkUnreadable(t *testing.T) {
	dir := t.TempDir()
	for _, loc := range []string{
		filepath.Join(dir, "missing"),
		writeTemp(t, dir, "bad.json.gz", []byte("not gzip")),
		writeTemp(t, dir, "truncated.json.gz", gz(t, "some data that is long enough")[:20]),
		writeTemp(t, dir, "bad.zip", []byte("not a zip")),
	} {
		if _, err := collect(t, loc); !errors.Is(err, ErrUnreadable) {
			t.Errorf("%s: err = %v, want ErrUnreadable", filepath.Base(loc), err)
		}
	}
}

func writeTemp(t *testing.T, dir, name string, body []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, body, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
