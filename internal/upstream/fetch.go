package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"time"
)

// userAgent names Patchline to the upstreams, as their terms ask.
const userAgent = "patchline-sync (+https://github.com/patchline/patchline)"

// request is one GET of a sync.
type request struct {
	url    string
	accept string
	header map[string]string
	// etag and lastModified, when set, make the request conditional.
	etag, lastModified string
	// limiter, when set, is waited on before each attempt.
	limiter *TokenBucket
	// retryForbidden retries 403 answers, which the NVD gives a client
	// over its rate limit.
	retryForbidden bool
}

func (r request) conditional() bool { return r.etag != "" || r.lastModified != "" }

// response is what a request got besides its body.
type response struct {
	notModified  bool
	etag         string
	lastModified string
	header       http.Header
}

// StatusError is an HTTP status that ended a request.
type StatusError struct {
	URL    string // the URL requested
	Code   int    // the status code
	Status string // the status line: "503 Service Unavailable"
}

// Error says which request got which status.
func (e *StatusError) Error() string { return fmt.Sprintf("GET %s: HTTP %s", e.URL, e.Status) }

// isNotFound reports whether err is a 404 or 410 answer.
func isNotFound(err error) bool {
	var se *StatusError
	return errors.As(err, &se) && (se.Code == http.StatusNotFound || se.Code == http.StatusGone)
}

// get sends r and hands the body of a 200 answer to consume. A network
// error, a retryable status (429, 5xx; 403 when r.retryForbidden) or a
// body cut short is retried, after the answer's Retry-After or a doubling
// wait, up to Retry.Attempts tries; consume then starts again from the
// beginning of the new body. An error of consume that is not a transfer
// error is returned as it is. A 304 answer to a conditional request
// returns notModified without calling consume.
func (j *job) get(ctx context.Context, r request, consume func(body io.Reader) error) (response, error) {
	cfg := &j.s.cfg
	var lastErr error
	for attempt := 0; attempt < cfg.Retry.Attempts; attempt++ {
		if attempt > 0 {
			wait := cfg.Retry.Base << (attempt - 1)
			var ra *retryAfterError
			if errors.As(lastErr, &ra) {
				wait = ra.wait
			}
			if err := sleep(ctx, min(wait, cfg.Retry.MaxWait)); err != nil {
				return response{}, err
			}
		}
		if r.limiter != nil {
			if err := r.limiter.Wait(ctx); err != nil {
				return response{}, err
			}
		}
		resp, retry, err := j.try(ctx, r, consume)
		if err == nil {
			return resp, nil
		}
		if !retry || ctx.Err() != nil {
			return resp, err
		}
		lastErr = err
		j.log.Debug("retrying", "url", r.url, "attempt", attempt+1, "err", err)
	}
	return response{}, fmt.Errorf("%w (after %d tries)", lastErr, cfg.Retry.Attempts)
}

// retryAfterError is a retryable answer that said when to come back.
type retryAfterError struct {
	err  error
	wait time.Duration
}

func (e *retryAfterError) Error() string { return e.err.Error() }
func (e *retryAfterError) Unwrap() error { return e.err }

// try sends r once. retry says whether a failure is worth another try.
func (j *job) try(ctx context.Context, r request, consume func(io.Reader) error) (response, bool, error) {
	// A transfer that stalls is cut after IdleTimeout without a byte, and
	// tried again; a slow one that keeps going is left alone.
	idle := j.s.cfg.IdleTimeout
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	watchdog := time.AfterFunc(idle, cancel)
	defer watchdog.Stop()
	stalled := func(err error) error {
		if ctx.Err() == nil && rctx.Err() != nil {
			return fmt.Errorf("GET %s: no data for %s: %w", r.url, idle, err)
		}
		return fmt.Errorf("GET %s: %w", r.url, err)
	}
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, r.url, nil)
	if err != nil {
		return response{}, false, err
	}
	req.Header.Set("User-Agent", userAgent)
	if r.accept != "" {
		req.Header.Set("Accept", r.accept)
	}
	for k, v := range r.header {
		req.Header.Set(k, v)
	}
	if r.etag != "" {
		req.Header.Set("If-None-Match", r.etag)
	}
	if r.lastModified != "" {
		req.Header.Set("If-Modified-Since", r.lastModified)
	}
	resp, err := j.s.cfg.Client.Do(req)
	if err != nil {
		j.count(0, 0)
		var ue *url.Error // says the URL again
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return response{}, true, stalled(err)
	}
	defer resp.Body.Close()
	out := response{etag: resp.Header.Get("ETag"), lastModified: resp.Header.Get("Last-Modified"), header: resp.Header}
	switch code := resp.StatusCode; {
	case code == http.StatusOK:
	case code == http.StatusNotModified && r.conditional():
		j.count(code, 0)
		out.notModified = true
		return out, false, nil
	default:
		j.count(code, 0)
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		err := error(&StatusError{URL: r.url, Code: code, Status: resp.Status})
		retry := code == http.StatusTooManyRequests || code >= 500 ||
			(code == http.StatusForbidden && (r.retryForbidden || resp.Header.Get("Retry-After") != ""))
		if d, ok := parseRetryAfter(resp.Header.Get("Retry-After"), time.Now()); ok && retry {
			err = &retryAfterError{err: err, wait: d}
		}
		return out, retry, err
	}
	body := &countingReader{r: resp.Body, progress: func() { watchdog.Reset(idle) }}
	err = consume(body)
	j.count(resp.StatusCode, body.n)
	if body.err != nil {
		return out, true, stalled(fmt.Errorf("body cut short after %d bytes: %w", body.n, body.err))
	}
	if err != nil {
		return out, false, err
	}
	return out, false, nil
}

// download fetches r into the file at path. The file is written whole or
// not at all: a body shorter than its Content-Length is retried, and fails
// the request when it stays short.
func (j *job) download(ctx context.Context, r request, path string) (response, error) {
	return j.get(ctx, r, func(body io.Reader) error {
		tmp := path + ".part"
		f, err := os.Create(tmp)
		if err != nil {
			return err
		}
		_, err = io.Copy(f, body)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(tmp)
			return err
		}
		return os.Rename(tmp, path)
	})
}

// count records one answer (code 0 for none) and the bytes of its body.
func (j *job) count(code int, n int64) {
	j.mu.Lock()
	j.requests++
	j.bytes += n
	j.mu.Unlock()
	j.s.cfg.Metrics.request(j.src.Name, code, n)
}

// countingReader counts the bytes read and remembers a read error other
// than io.EOF: the transfer failed, whatever the consumer made of it.
type countingReader struct {
	r        io.Reader
	n        int64
	err      error
	progress func() // called after each read that returned bytes
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if n > 0 && c.progress != nil {
		c.progress()
	}
	if err != nil && !errors.Is(err, io.EOF) && c.err == nil {
		c.err = err
	}
	return n, err
}

// parseRetryAfter reads a Retry-After header: seconds, or an HTTP date.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if s, err := strconv.Atoi(v); err == nil {
		if s < 0 {
			return 0, false
		}
		return time.Duration(s) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
