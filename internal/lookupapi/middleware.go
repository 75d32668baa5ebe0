package lookupapi

import (
	"bufio"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/patchline/patchline/internal/errs"
	"github.com/patchline/patchline/internal/httpx"
	"github.com/patchline/patchline/internal/ratelimit"
)

// Cache lifetimes of the responses, for browsers and CDNs.
const (
	cacheRecord  = "public, max-age=300"
	cacheList    = "public, max-age=60"
	cacheStream  = "public, max-age=300"
	cacheOpenAPI = "public, max-age=3600"
	cachePage    = "public, max-age=300"
)

// Header keys in canonical form, so that the hot paths can set headers
// without canonicalizing the key on every request (Header.Set does).
const (
	keyACAllowOrigin   = "Access-Control-Allow-Origin"
	keyACExposeHeaders = "Access-Control-Expose-Headers"
	keyCacheControl    = "Cache-Control"
	keyContentLength   = "Content-Length"
	keyContentType     = "Content-Type"
	keyETag            = "Etag"
	keyNoSniff         = "X-Content-Type-Options"
	keyRateLimit       = "X-Ratelimit-Limit"
	keyRateRemaining   = "X-Ratelimit-Remaining"
	keyRateReset       = "X-Ratelimit-Reset"
)

// Values of constant headers, shared by every response: net/http only
// reads them.
var (
	valAnyOrigin = []string{"*"}
	valExposed   = []string{corsExposed}
	valNoSniff   = []string{"nosniff"}
)

// metrics are the Prometheus metrics of the service.
type metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	limited  prometheus.Counter
	// streams counts the bulk streams being served, refused those
	// refused for want of a free slot.
	streams        prometheus.Gauge
	streamsRefused prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "patchline_lookup_requests_total",
			Help: "Requests of the lookup listener by route and status code.",
		}, []string{"route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "patchline_lookup_request_duration_seconds",
			Help:    "Time to answer a request of the lookup listener, by route.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1, 5, 30},
		}, []string{"route"}),
		limited: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "patchline_lookup_rate_limited_total",
			Help: "Requests refused with 429 by the rate limit.",
		}),
	}
	m.streams = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "patchline_lookup_streams",
		Help: "Bulk and modification streams being served.",
	})
	m.streamsRefused = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "patchline_lookup_streams_refused_total",
		Help: "Stream requests refused with 503 because as many streams as allowed were being served.",
	})
	for _, c := range []prometheus.Collector{m.requests, m.duration, m.limited, m.streams, m.streamsRefused} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register lookup metrics: %w", err)
		}
	}
	return m, nil
}

// statusWriter records the status code a handler writes.
type statusWriter struct {
	http.ResponseWriter
	status int
}

// WriteHeader implements http.ResponseWriter.
func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

// Write implements http.ResponseWriter.
func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush implements http.Flusher.
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Hijack implements http.Hijacker.
func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("hijack not supported")
	}
	return h.Hijack()
}

// instrument counts the requests of a route and times them.
func (s *Server) instrument(route string, next http.Handler) http.Handler {
	duration := s.metrics.duration.WithLabelValues(route)
	// The counters of the route by status code, looked up once each.
	var counters [600]atomic.Pointer[prometheus.Counter]
	counter := func(code int) prometheus.Counter {
		if code < 100 || code >= len(counters) {
			return s.metrics.requests.WithLabelValues(route, strconv.Itoa(code))
		}
		if c := counters[code].Load(); c != nil {
			return *c
		}
		c := s.metrics.requests.WithLabelValues(route, strconv.Itoa(code))
		counters[code].Store(&c)
		return c
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			duration.Observe(time.Since(start).Seconds())
			code := sw.status
			if code == 0 {
				code = http.StatusOK
			}
			counter(code).Inc()
		}()
		next.ServeHTTP(sw, r)
	})
}

// corsExposed are the response headers a browser client may read.
const corsExposed = "ETag, Retry-After, X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset"

// cors lets browser pages of any origin read the API: it is public and
// keyless, and takes no credentials.
func (s *Server) cors(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h[keyACAllowOrigin] = valAnyOrigin
		h[keyACExposeHeaders] = valExposed
		next.ServeHTTP(w, r)
	})
}

// preflight answers CORS preflight requests.
func preflight(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Access-Control-Allow-Methods", "GET, HEAD, POST, OPTIONS")
	h.Set("Access-Control-Allow-Headers", "Content-Type, If-None-Match, Accept-Encoding")
	h.Set("Access-Control-Max-Age", "86400")
	h.Set("Allow", "GET, HEAD, POST, OPTIONS")
	h.Set("Cache-Control", "public, max-age=86400")
	w.WriteHeader(http.StatusNoContent)
}

// limit applies the rate limit of the client: X-RateLimit-* headers on every
// response, 429 with Retry-After beyond the quota. When the limiter cannot
// decide (its shared store is down) the request goes through.
func (s *Server) limit(next http.Handler) http.Handler {
	if s.limiter == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := ratelimit.Key(s.proxies.ClientAddr(r))
		res, err := s.limiter.Allow(r.Context(), key)
		if err != nil {
			s.logger.WarnContext(r.Context(), "rate limit unavailable", "err", err)
			next.ServeHTTP(w, r)
			return
		}
		h := w.Header()
		h[keyRateLimit] = []string{strconv.Itoa(res.Limit)}
		h[keyRateRemaining] = []string{strconv.Itoa(res.Remaining)}
		h[keyRateReset] = []string{strconv.FormatInt(ceilUnix(res.Reset), 10)}
		if !res.Allowed {
			s.metrics.limited.Inc()
			retry := int64(math.Ceil(res.RetryAfter.Seconds()))
			retry = max(retry, 1)
			h.Set("Retry-After", strconv.FormatInt(retry, 10))
			httpx.WriteError(w, &errs.Error{Kind: errs.ErrTooMany, Message: fmt.Sprintf(
				"rate limit exceeded: %d requests per client; retry in %d seconds", res.Limit, retry)})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// ceilUnix returns t in Unix seconds, rounded up.
func ceilUnix(t time.Time) int64 {
	sec := t.Unix()
	if t.Nanosecond() > 0 {
		sec++
	}
	return sec
}

// etagOf returns a strong entity tag for a body: its CRC-32C and length.
func etagOf(body []byte) string {
	sum := crc32.Checksum(body, castagnoli)
	b := make([]byte, 0, 24)
	b = append(b, '"')
	b = strconv.AppendUint(b, uint64(sum), 36)
	b = append(b, '-')
	b = strconv.AppendInt(b, int64(len(body)), 36)
	b = append(b, '"')
	return string(b)
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// notModified reports whether the request's If-None-Match names etag (weak
// comparison, RFC 9110 section 13.1.2).
func notModified(r *http.Request, etag string) bool {
	inm := r.Header.Get("If-None-Match")
	if inm == "" {
		return false
	}
	want := strings.TrimPrefix(etag, "W/")
	for t := range strings.SplitSeq(inm, ",") {
		t = strings.TrimSpace(t)
		if t == "*" || strings.TrimPrefix(t, "W/") == want {
			return true
		}
	}
	return false
}

// writeCacheable writes a complete response body of a public read with its
// ETag and Cache-Control, or 304 when the client has it already.
func writeCacheable(w http.ResponseWriter, r *http.Request, contentType, cacheControl string, body []byte) {
	etag := etagOf(body)
	h := w.Header()
	h[keyETag] = []string{etag}
	h[keyCacheControl] = []string{cacheControl}
	if notModified(r, etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h[keyContentType] = []string{contentType}
	h[keyContentLength] = []string{strconv.Itoa(len(body))}
	h[keyNoSniff] = valNoSniff
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write(body)
	}
}
