package lookupapi

import (
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/errs"
	"github.com/patchline/patchline/internal/httpx"
)

// Content types of the streams.
const (
	contentTypeNDJSON = "application/x-ndjson"
	contentTypeCSV    = "text/csv"
)

// streamBuffer is the size of the buffer between the catalog and the client.
const streamBuffer = 64 << 10

// Time limits of a stream: each write to the client must be done within
// streamWriteTimeout, so that a client that stops reading gives its slot
// back soon, and the whole stream within streamMaxDuration. (Variables for
// the tests.)
var (
	streamWriteTimeout = 30 * time.Second
	streamMaxDuration  = 30 * time.Minute
)

// streamRetryAfter is the Retry-After, in seconds, of a stream request
// refused because every slot is taken.
const streamRetryAfter = 5

// bulk answers GET /cve/bulk.jsonl: one lean summary per line for every
// record after `after`, in CVE id order, rejected records included and
// marked so.
func (s *Server) bulk(w http.ResponseWriter, r *http.Request) error {
	return s.stream(w, r, "bulk", contentTypeNDJSON, nil, func(dst []byte, sum *cve.Summary) []byte {
		dst = append(dst, `{"cveId":`...)
		dst = appendString(dst, sum.CVEID)
		dst = append(dst, `,"severity":`...)
		dst = appendOptString(dst, sum.Severity)
		dst = append(dst, `,"cvss":`...)
		dst = appendOptFloat(dst, sum.CVSS)
		dst = append(dst, `,"epss":`...)
		dst = appendOptFloat(dst, sum.EPSS)
		dst = append(dst, `,"isKev":`...)
		dst = strconv.AppendBool(dst, sum.IsKEV)
		dst = append(dst, `,"hasRemediation":`...)
		dst = strconv.AppendBool(dst, sum.HasRemediation)
		dst = append(dst, `,"publishedAt":`...)
		dst = appendOptTime(dst, sum)
		dst = append(dst, `,"modifiedAt":`...)
		if sum.ModifiedAt != nil {
			dst = appendTime(dst, *sum.ModifiedAt)
		} else {
			dst = append(dst, "null"...)
		}
		dst = append(dst, `,"rejected":`...)
		dst = strconv.AppendBool(dst, sum.Rejected)
		return append(dst, "}\n"...)
	})
}

func appendOptTime(dst []byte, sum *cve.Summary) []byte {
	if sum.PublishedAt == nil {
		return append(dst, "null"...)
	}
	return appendTime(dst, *sum.PublishedAt)
}

// modified answers GET /cve/modified.csv: cve_id,modified for every record
// after `after`, in CVE id order, after a header line.
func (s *Server) modified(w http.ResponseWriter, r *http.Request) error {
	header := []byte("cve_id,modified\n")
	return s.stream(w, r, "modified", contentTypeCSV, header, func(dst []byte, sum *cve.Summary) []byte {
		dst = append(dst, sum.CVEID...)
		dst = append(dst, ',')
		if sum.ModifiedAt != nil {
			dst = sum.ModifiedAt.UTC().AppendFormat(dst, "2006-01-02T15:04:05Z07:00")
		}
		return append(dst, '\n')
	})
}

// stream writes a line per record of the catalog after the request's
// `after` id, holding one line in memory at a time, gzip-compressed when
// the client accepts it. Errors before the first byte are problem+json;
// after it, the response is cut short so that the client sees a broken
// transfer rather than a shorter catalog.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, name, contentType string, header []byte,
	line func([]byte, *cve.Summary) []byte) error {
	after, err := parseAfter(r)
	if err != nil {
		return err
	}
	stats, err := s.catalog.Stats(r.Context())
	if err != nil {
		return err
	}
	h := w.Header()
	gz := acceptsGzip(r)
	etag := streamETag(name, after, gz, stats)
	h.Set("ETag", etag)
	h.Set("Cache-Control", cacheStream)
	h.Set("Vary", "Accept-Encoding")
	if notModified(r, etag) {
		w.WriteHeader(http.StatusNotModified)
		return nil
	}
	if r.Method != http.MethodHead {
		select {
		case s.streams <- struct{}{}:
			s.metrics.streams.Inc()
			defer func() {
				<-s.streams
				s.metrics.streams.Dec()
			}()
		default:
			s.metrics.streamsRefused.Inc()
			h.Set("Retry-After", strconv.Itoa(streamRetryAfter))
			httpx.WriteProblem(w, http.StatusServiceUnavailable, fmt.Sprintf(
				"this server is serving %d bulk streams, as many as it allows at once; retry in %d seconds",
				cap(s.streams), streamRetryAfter))
			return nil
		}
	}
	h.Set("Content-Type", contentType)
	h.Set("X-Content-Type-Options", "nosniff")
	if gz {
		h.Set("Content-Encoding", "gzip")
	}
	if r.Method == http.MethodHead {
		w.WriteHeader(http.StatusOK)
		return nil
	}
	rend, start := s.rendered(r, name, after, line)
	if rend != nil {
		defer rend.release()
		if !gz {
			h.Set("Content-Length", strconv.FormatInt(int64(len(header))+rend.size-start, 10))
		}
	}
	var out io.Writer = &deadlineWriter{
		w:   w,
		rc:  http.NewResponseController(w),
		end: time.Now().Add(streamMaxDuration),
	}
	var zw *gzip.Writer
	if gz {
		zw, _ = gzip.NewWriterLevel(out, gzip.BestSpeed)
		out = zw
	}
	bw := bufio.NewWriterSize(out, streamBuffer)
	bw.Write(header)
	if rend != nil {
		_, err = bw.ReadFrom(rend.reader(start))
	} else {
		var cur cve.Summary // outside the closure: one of them, not one a row
		err = s.catalog.Walk(r.Context(), after, func(sum cve.Summary) error {
			cur = sum
			// The line is written in the writer's own buffer when it fits.
			_, err := bw.Write(line(bw.AvailableBuffer(), &cur))
			return err
		})
	}
	if err == nil {
		err = bw.Flush()
	}
	if err == nil && zw != nil {
		err = zw.Close()
	}
	if err != nil {
		if r.Context().Err() == nil && !errors.Is(err, context.Canceled) {
			s.logger.ErrorContext(r.Context(), "stream failed", "stream", name, "after", after, "err", err)
		}
		panic(http.ErrAbortHandler)
	}
	return nil
}

// rendered returns the rendition of the stream at the catalog's version
// and the offset of its first line after `after`; nil when the catalog
// has no versions or the rendition failed (logged): the stream is then
// encoded as it is sent.
func (s *Server) rendered(r *http.Request, name, after string, line func([]byte, *cve.Summary) []byte) (*rendition, int64) {
	rend, err := s.acquire(r.Context(), name, line)
	if err == nil && rend != nil {
		start, err := rend.start(after)
		if err == nil {
			return rend, start
		}
		rend.release()
	}
	if err != nil {
		s.logger.WarnContext(r.Context(), "stream rendition failed: encoding the stream as it is sent", "stream", name, "err", err)
	}
	return nil, 0
}

// deadlineWriter gives the writes to the client a deadline about
// streamWriteTimeout ahead, but never past end. It moves the deadline at
// most every thirtieth of the timeout (once a second): the compressor
// writes in small pieces. Writers that cannot set deadlines (test
// recorders) write without.
type deadlineWriter struct {
	w     io.Writer
	rc    *http.ResponseController
	end   time.Time
	moved time.Time // when the deadline was last set
}

// Write implements io.Writer.
func (d *deadlineWriter) Write(p []byte) (int, error) {
	if now := time.Now(); now.Sub(d.moved) >= streamWriteTimeout/30 {
		d.moved = now
		dl := now.Add(streamWriteTimeout)
		if dl.After(d.end) {
			dl = d.end
		}
		d.rc.SetWriteDeadline(dl)
	}
	return d.w.Write(p)
}

// parseAfter reads the `after` parameter of the streams: a CVE id in any
// case, or nothing.
func parseAfter(r *http.Request) (string, error) {
	v, err := queryValues(r)
	if err != nil {
		return "", err
	}
	for name, vals := range v {
		if name != "after" {
			return "", errs.Invalidf("unknown query parameter %q", truncate(name))
		}
		if len(vals) > 1 {
			return "", errs.Invalidf(`query parameter "after" is given more than once`)
		}
	}
	s := v.Get("after")
	if s == "" {
		return "", nil
	}
	id, err := cve.ParseID(s)
	if err != nil {
		return "", errs.Invalidf("after %q: want a CVE id such as CVE-2021-44228", truncate(s))
	}
	if _, ok := cve.Key(id); !ok {
		return "", errs.Invalidf("after %q: want a CVE id such as CVE-2021-44228", truncate(s))
	}
	return id, nil
}

// acceptsGzip reports whether the request's Accept-Encoding allows gzip.
func acceptsGzip(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept-Encoding") {
		for part := range strings.SplitSeq(v, ",") {
			coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
			if !strings.EqualFold(strings.TrimSpace(coding), "gzip") {
				continue
			}
			q := strings.TrimSpace(params)
			if qv, ok := strings.CutPrefix(q, "q="); ok {
				if f, err := strconv.ParseFloat(qv, 64); err == nil && f == 0 {
					return false
				}
			}
			return true
		}
	}
	return false
}

// streamETag is a weak tag of a stream: it changes whenever an ingest run
// changes the catalog.
func streamETag(name, after string, gz bool, st cve.Stats) string {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s\x00%s\x00%v\x00%d\x00%d\x00%d\x00%d", name, after, gz, st.Records, st.Rejected, st.Facts, st.Updated.UnixNano())
	return `W/"` + strconv.FormatUint(h.Sum64(), 36) + `"`
}
