package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"path"
	"strings"
)

// eolValidators are the validators of one product's document.
type eolValidators struct {
	ETag         string `json:"etag,omitempty"`
	LastModified string `json:"lastModified,omitempty"`
}

// productURL is the document of a product: the source URL with {product}
// replaced, or the URL followed by /<product>/ when it has no {product}.
func productURL(base, product string) string {
	if strings.Contains(base, "{product}") {
		return strings.ReplaceAll(base, "{product}", url.PathEscape(product))
	}
	return strings.TrimRight(base, "/") + "/" + url.PathEscape(product) + "/"
}

// syncEOL fetches the document of each configured endoflife.date product
// with a conditional request. The cursor is a JSON object of the
// validators by product. A product the upstream does not know is passed
// over with a warning.
func syncEOL(ctx context.Context, j *job) error {
	cfg := &j.s.cfg
	cur := map[string]eolValidators{}
	if j.prev.Cursor != "" {
		if err := json.Unmarshal([]byte(j.prev.Cursor), &cur); err != nil {
			return fmt.Errorf("eol cursor: %w", err)
		}
	}
	next := make(map[string]eolValidators, len(cur))
	for k, v := range cur {
		next[k] = v
	}
	var changed []string
	for _, product := range cfg.EOLProducts {
		u := productURL(j.src.URL, product)
		// The parser takes the product from the file name; the ending
		// says which form the document is in.
		ext := ".json"
		if pu, err := url.Parse(u); err == nil && strings.EqualFold(path.Ext(pu.Path), ".md") {
			ext = ".md"
		}
		file, err := j.path("eol", safeName(product)+ext)
		if err != nil {
			return err
		}
		v := cur[product]
		resp, err := j.download(ctx, request{url: u, etag: v.ETag, lastModified: v.LastModified}, file)
		if isNotFound(err) {
			j.note("%s: not found", product)
			j.log.Warn("eol product not found", "product", product, "url", u)
			continue
		}
		if err != nil {
			return fmt.Errorf("eol %s: %w", product, err)
		}
		if resp.notModified {
			continue
		}
		next[product] = eolValidators{ETag: resp.etag, LastModified: resp.lastModified}
		changed = append(changed, product)
	}
	b, err := json.Marshal(next)
	if err != nil {
		return err
	}
	j.next.Cursor = string(b)
	if len(changed) == 0 {
		j.note("not modified")
		return nil
	}
	j.note("fetched %s", strings.Join(changed, ", "))
	j.ingestDir(strict(j.parser()), "eol")
	return nil
}
