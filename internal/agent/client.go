package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/patchline/patchline/internal/agentproto"
)

// Client speaks the agent protocol (package agentproto) to one control
// service. The real agent and the simulated fleet share it.
type Client struct {
	// BaseURL is the control service, e.g. http://127.0.0.1:8081.
	BaseURL string
	// HTTP sends the requests; nil means a client of the system's
	// roots. Requests are bounded by RequestTimeout and UploadTimeout
	// besides any timeout of HTTP itself.
	HTTP *http.Client
	// RequestTimeout bounds a request of the protocol; zero means 30
	// seconds.
	RequestTimeout time.Duration
	// UploadTimeout bounds the upload of a log bundle (32 MiB at most);
	// zero means 15 minutes, which a link of about 300 kbit/s needs.
	UploadTimeout time.Duration
	// UserAgent names the agent in requests.
	UserAgent string

	mu         sync.Mutex
	credential string
}

// SetCredential sets the bearer credential "<agentId>.<plat_…>" of the
// requests that follow.
func (c *Client) SetCredential(credential string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.credential = credential
}

// Credential returns the bearer credential, "" before enrollment.
func (c *Client) Credential() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.credential
}

var defaultHTTP = &http.Client{}

// Default timeouts of a Client.
const (
	DefaultRequestTimeout = 30 * time.Second
	DefaultUploadTimeout  = 15 * time.Minute
)

// StatusError is an answer of the server other than success.
type StatusError struct {
	Op     string // "enroll", "check in", …
	Status int
	Detail string // the problem's detail
	// Removed is set on a 401 that says the agent was removed
	// (agentproto.HeaderAgentState).
	Removed bool
}

// Error says what failed and how the server answered.
func (e *StatusError) Error() string {
	if e.Detail == "" {
		return fmt.Sprintf("%s: %d %s", e.Op, e.Status, http.StatusText(e.Status))
	}
	return fmt.Sprintf("%s: %d %s: %s", e.Op, e.Status, http.StatusText(e.Status), e.Detail)
}

// StatusOf returns the HTTP status of a StatusError in err's chain, 0 for
// any other error (the server could not be reached, or answered nonsense).
func StatusOf(err error) int {
	var se *StatusError
	if errors.As(err, &se) {
		return se.Status
	}
	return 0
}

// IsRemoved reports whether err says the agent was removed by an
// administrator.
func IsRemoved(err error) bool {
	var se *StatusError
	return errors.As(err, &se) && se.Removed
}

// Transient reports whether a request that failed with err may succeed
// later unchanged: the server was unreachable, overloaded or failing.
func Transient(err error) bool {
	switch s := StatusOf(err); {
	case s == 0, s == http.StatusRequestTimeout, s == http.StatusTooManyRequests, s >= 500:
		return true
	}
	return false
}

// Enroll enrolls the endpoint. The answer's credential becomes the
// client's.
func (c *Client) Enroll(ctx context.Context, req *agentproto.EnrollRequest) (*agentproto.EnrollResponse, error) {
	var resp agentproto.EnrollResponse
	if err := c.do(ctx, "enroll", http.MethodPost, agentproto.PathEnroll, req, &resp, false); err != nil {
		return nil, err
	}
	if resp.AgentID == "" || !strings.HasPrefix(resp.Credential, resp.AgentID+".") {
		return nil, errors.New("enroll: the server answered without a usable credential")
	}
	c.SetCredential(resp.Credential)
	return &resp, nil
}

// CheckIn reports the endpoint's state and returns the commands to run.
func (c *Client) CheckIn(ctx context.Context, req *agentproto.CheckInRequest) (*agentproto.CheckInResponse, error) {
	var resp agentproto.CheckInResponse
	if err := c.do(ctx, "check in", http.MethodPost, agentproto.PathCheckIn, req, &resp, true); err != nil {
		return nil, err
	}
	return &resp, nil
}

// Wait holds a long poll until the server has commands for the agent
// (true) or timeout passes (false). A server older than the long poll
// answers 404.
func (c *Client) Wait(ctx context.Context, timeout time.Duration) (bool, error) {
	secs := max(1, int(timeout/time.Second))
	var resp agentproto.WaitResponse
	// The request may take the whole timeout, and then the answer its
	// usual time.
	err := c.doWithin(ctx, timeout+c.requestTimeout(), "wait", http.MethodPost, agentproto.PathWait,
		&agentproto.WaitRequest{TimeoutSeconds: secs}, &resp, true)
	return resp.Commands, err
}

// Report reports the state of a command.
func (c *Client) Report(ctx context.Context, commandID string, r *agentproto.Report) error {
	path := strings.Replace(agentproto.PathReport, "{id}", url.PathEscape(commandID), 1)
	return c.do(ctx, "report "+commandID, http.MethodPost, path, r, &agentproto.ReportResponse{}, true)
}

// UploadLogBundle uploads the log bundle of a collect-logs command.
func (c *Client) UploadLogBundle(ctx context.Context, commandID, contentType string, bundle []byte) error {
	path := strings.Replace(agentproto.PathLogBundle, "{id}", url.PathEscape(commandID), 1)
	timeout := c.UploadTimeout
	if timeout <= 0 {
		timeout = DefaultUploadTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, strings.TrimRight(c.BaseURL, "/")+path, bytes.NewReader(bundle))
	if err != nil {
		return fmt.Errorf("upload log bundle of %s: %w", commandID, err)
	}
	req.Header.Set("Content-Type", contentType)
	return c.send(req, "upload log bundle of "+commandID, true, &agentproto.LogBundleResponse{})
}

func (c *Client) do(ctx context.Context, op, method, path string, body, out any, auth bool) error {
	return c.doWithin(ctx, c.requestTimeout(), op, method, path, body, out, auth)
}

func (c *Client) requestTimeout() time.Duration {
	if c.RequestTimeout <= 0 {
		return DefaultRequestTimeout
	}
	return c.RequestTimeout
}

func (c *Client) doWithin(ctx context.Context, timeout time.Duration, op, method, path string, body, out any, auth bool) error {
	b, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.BaseURL, "/")+path, bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	req.Header.Set("Content-Type", "application/json")
	return c.send(req, op, auth, out)
}

func (c *Client) send(req *http.Request, op string, auth bool, out any) error {
	if auth {
		req.Header.Set("Authorization", "Bearer "+c.Credential())
	}
	if c.UserAgent != "" {
		req.Header.Set("User-Agent", c.UserAgent)
	}
	hc := c.HTTP
	if hc == nil {
		hc = defaultHTTP
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("%s: reading the answer: %w", op, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		se := &StatusError{Op: op, Status: resp.StatusCode,
			Removed: resp.StatusCode == http.StatusUnauthorized && resp.Header.Get(agentproto.HeaderAgentState) == agentproto.AgentStateRemoved}
		var p struct {
			Detail string `json:"detail"`
		}
		if json.Unmarshal(body, &p) == nil {
			se.Detail = p.Detail
		}
		return se
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("%s: the answer is not the expected JSON: %w", op, err)
	}
	return nil
}
