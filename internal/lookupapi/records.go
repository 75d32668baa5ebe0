package lookupapi

import (
	"context"
	"errors"
	"net/http"
	"sync"

	"github.com/patchline/patchline/internal/catalog"
	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/errs"
	"github.com/patchline/patchline/internal/httpx"
)

// MaxBatch is the number of ids a batch lookup may ask for.
const MaxBatch = 100

// maxBatchBody bounds the body of a batch lookup: 100 ids fit in 8 KiB; the
// rest is room for whitespace.
const maxBatchBody = 64 << 10

// bufPool holds response buffers.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

func getBuf() *[]byte { return bufPool.Get().(*[]byte) }

func putBuf(b *[]byte) {
	if cap(*b) > 4<<20 {
		return // keep no outsized buffer
	}
	*b = (*b)[:0]
	bufPool.Put(b)
}

// getRecord answers GET /cve/{id}: the stored record with its _links.
func (s *Server) getRecord(w http.ResponseWriter, r *http.Request) error {
	id, err := cve.ParseID(r.PathValue("id"))
	if err != nil {
		return err
	}
	buf := getBuf()
	defer putBuf(buf)
	out, err := s.appendRecordJSON(r, *buf, id)
	*buf = out
	if err != nil {
		return err
	}
	if out, err = s.links.addLinks(out, 0, id, r); err != nil {
		return err
	}
	*buf = out
	writeCacheable(w, r, "application/json", cacheRecord, out)
	return nil
}

// recordAppender is a catalog that appends a record's body to a buffer of
// the caller's, sparing the allocation of RecordJSON's body.
type recordAppender interface {
	AppendRecordJSON(ctx context.Context, dst []byte, id string) ([]byte, error)
}

// appendRecordJSON appends the stored body of id's record to dst: read
// into it when the catalog can, so that the response's buffer is the only
// copy of the body.
func (s *Server) appendRecordJSON(r *http.Request, dst []byte, id string) ([]byte, error) {
	if a, ok := s.catalog.(recordAppender); ok {
		return a.AppendRecordJSON(r.Context(), dst, id)
	}
	body, err := s.catalog.RecordJSON(r.Context(), id)
	return append(dst, body...), err
}

// recordVisitor is a catalog that hands the bodies of several records to
// a function in turn, in the order of their ids, sparing the allocation of
// RecordsJSON's bodies.
type recordVisitor interface {
	EachRecordJSON(ctx context.Context, ids []string, fn func(id string, body []byte) error) error
}

// eachRecordJSON calls fn with the body of each of ids that the catalog
// holds, in the order of ids, all from one commit; fn keeps no body.
func (s *Server) eachRecordJSON(r *http.Request, ids []string, fn func(id string, body []byte) error) error {
	if v, ok := s.catalog.(recordVisitor); ok {
		return v.EachRecordJSON(r.Context(), ids, fn)
	}
	return catalog.EachRecordJSON(r.Context(), s.catalog, ids, fn)
}

// getOSV answers GET /cve/{id}/osv: the record as an OSV document.
func (s *Server) getOSV(w http.ResponseWriter, r *http.Request) error {
	id, err := cve.ParseID(r.PathValue("id"))
	if err != nil {
		return err
	}
	rec, err := s.catalog.Record(r.Context(), id)
	if err != nil {
		return err
	}
	body, err := OSVJSON(rec)
	if err != nil {
		return err
	}
	writeCacheable(w, r, "application/json", cacheRecord, append(body, '\n'))
	return nil
}

// decodeBody is httpx.DecodeJSON, with a body over max a 400 as every
// other client mistake of the lookup API.
func decodeBody(w http.ResponseWriter, r *http.Request, max int64, v any) error {
	return tooLargeIsInvalid(httpx.DecodeJSON(w, r, max, v), max)
}

// tooLargeIsInvalid turns the errs.ErrTooLarge of a body over max into an
// errs.ErrInvalid error.
func tooLargeIsInvalid(err error, max int64) error {
	if errors.Is(err, errs.ErrTooLarge) {
		return errs.Invalidf("request body is larger than %d bytes", max)
	}
	return err
}

// batchRequest is the body of POST /cve/batch.
type batchRequest struct {
	IDs *[]string `json:"ids"`
}

// batch answers POST /cve/batch: the records of up to 100 ids in request
// order, each once; unknown and malformed ids in notFound.
func (s *Server) batch(w http.ResponseWriter, r *http.Request) error {
	var req batchRequest
	if err := decodeBody(w, r, maxBatchBody, &req); err != nil {
		return err
	}
	if req.IDs == nil {
		return errs.Invalidf(`request body has no "ids": want {"ids": ["CVE-…", …]}`)
	}
	if n := len(*req.IDs); n > MaxBatch {
		return errs.Invalidf("ids holds %d ids; at most %d are allowed", n, MaxBatch)
	}
	var (
		ids      []string // valid canonical ids, each once, in order
		seen     = map[string]bool{}
		notFound = []string{}
	)
	// order lists every distinct id in request order; the malformed ones
	// keep the spelling they came with.
	type entry struct {
		id    string
		valid bool
	}
	var order []entry
	for _, raw := range *req.IDs {
		id, err := cve.ParseID(raw)
		if err != nil {
			if !seen["\x00"+raw] {
				seen["\x00"+raw] = true
				order = append(order, entry{raw, false})
			}
			continue
		}
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
			order = append(order, entry{id, true})
		}
	}
	buf := getBuf()
	defer putBuf(buf)
	out := append(*buf, `{"results":[`...)
	found := make(map[string]bool, len(ids))
	err := s.eachRecordJSON(r, ids, func(id string, body []byte) error {
		if len(found) > 0 {
			out = append(out, ',')
		}
		found[id] = true
		var err error
		out, err = s.links.appendLinks(out, body, id, r)
		return err
	})
	if err != nil {
		return err
	}
	for _, e := range order {
		if !e.valid || !found[e.id] {
			notFound = append(notFound, e.id)
		}
	}
	out = append(out, `],"notFound":[`...)
	for i, id := range notFound {
		if i > 0 {
			out = append(out, ',')
		}
		out = appendString(out, id)
	}
	out = append(out, "]}\n"...)
	*buf = out
	w.Header().Set("Cache-Control", "no-store")
	httpx.WriteJSONBytes(w, http.StatusOK, out)
	return nil
}

// openAPI serves the OpenAPI description of the API.
func (s *Server) openAPI(w http.ResponseWriter, r *http.Request) error {
	writeCacheable(w, r, "application/json", cacheOpenAPI, OpenAPI())
	return nil
}
