// TestHostileInputEndToEnd, with the tools only it uses: a raw HTTP
// client that sends what net/http would refuse to, a reader of the routes
// and parameters of both OpenAPI documents, and the hostile cases made
// from them for every route. This file is over 600 lines because the test
// and its tools are one piece, used nowhere else.

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

// The hostile-input test sends every route of both services, as their
// OpenAPI documents list them, the requests an attacker or a broken
// client sends: wrong methods, oversized and deeply nested bodies, invalid
// UTF-8, huge query strings, numbers out of every range, CR/LF meant to
// split a response header, and path traversal in ids. Each must get a
// clear 4xx (problem+json on the API routes) within a few seconds, never a
// 500 or a hang, and the server must stay healthy.

// hostileTimeout is how long a hostile request may take, answer included.
const hostileTimeout = 5 * time.Second

// hostileResponse is what a raw request got back.
type hostileResponse struct {
	status int
	header http.Header
	body   []byte
}

// rawRequest sends one HTTP/1.1 request as written, bytes and all (a Go
// client would refuse some of them), with a body of bodyLen bytes read
// from body, and reads the answer. The body is written while the answer
// is read: a server that refuses a body answers before taking all of it.
func rawRequest(base, method, target string, header http.Header, body io.Reader, bodyLen int64) (*hostileResponse, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, err
	}
	conn, err := net.DialTimeout("tcp", u.Host, hostileTimeout)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(hostileTimeout))
	var head bytes.Buffer
	fmt.Fprintf(&head, "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n", method, target, u.Host)
	keys := make([]string, 0, len(header))
	for k := range header {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		for _, v := range header[k] {
			fmt.Fprintf(&head, "%s: %s\r\n", k, v)
		}
	}
	if body != nil {
		fmt.Fprintf(&head, "Content-Length: %d\r\n", bodyLen)
	}
	head.WriteString("\r\n")
	written := make(chan struct{})
	go func() {
		defer close(written)
		if _, err := conn.Write(head.Bytes()); err != nil || body == nil {
			return
		}
		io.Copy(conn, body) // fails once the server has had enough
	}()
	defer func() { conn.Close(); <-written }()
	resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: method})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("read the answer: %w", err)
	}
	return &hostileResponse{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

// repeatReader reads one byte forever.
type repeatReader byte

func (r repeatReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r)
	}
	return len(p), nil
}

// openAPIRoute is one operation of an OpenAPI document.
type openAPIRoute struct {
	method, path string         // path with {param} templates, as served
	query        []openAPIParam // query parameters
	body         bool           // has a request body
	bodyType     string         // its media type, application/json when it may be
	bodyNumbers  []string       // numeric properties of the JSON body, dotted
}

type openAPIParam struct {
	Name   string         `json:"name"`
	In     string         `json:"in"`
	Ref    string         `json:"$ref"`
	Schema *openAPISchema `json:"schema"`
}

// numeric reports whether the parameter takes numbers, one or several.
func (p openAPIParam) numeric() bool {
	if p.Schema == nil {
		return false
	}
	return p.Schema.is("integer", "number") || (p.Schema.is("array") && p.Schema.Items != nil && p.Schema.Items.is("integer", "number"))
}

// openAPIDocument is the part of an OpenAPI 3.1 document the test reads.
type openAPIDocument struct {
	Servers []struct {
		URL string `json:"url"`
	} `json:"servers"`
	Paths      map[string]map[string]json.RawMessage `json:"paths"`
	Components struct {
		Parameters map[string]openAPIParam   `json:"parameters"`
		Schemas    map[string]*openAPISchema `json:"schemas"`
	} `json:"components"`
}

type openAPISchema struct {
	Ref        string                    `json:"$ref"`
	Type       any                       `json:"type"` // a name or, in 3.1, a list of names
	Items      *openAPISchema            `json:"items"`
	Properties map[string]*openAPISchema `json:"properties"`
	OneOf      []*openAPISchema          `json:"oneOf"`
	AnyOf      []*openAPISchema          `json:"anyOf"`
	AllOf      []*openAPISchema          `json:"allOf"`
}

// is reports whether the schema's type is one of types.
func (s *openAPISchema) is(types ...string) bool {
	switch t := s.Type.(type) {
	case string:
		return slices.Contains(types, t)
	case []any:
		for _, x := range t {
			if name, ok := x.(string); ok && slices.Contains(types, name) {
				return true
			}
		}
	}
	return false
}

func (d *openAPIDocument) resolve(s *openAPISchema) *openAPISchema {
	for i := 0; s != nil && s.Ref != "" && i < 10; i++ {
		s = d.Components.Schemas[strings.TrimPrefix(s.Ref, "#/components/schemas/")]
	}
	return s
}

// numbers lists the numeric properties of a body schema, those of nested
// objects included, as dotted paths.
func (d *openAPIDocument) numbers(s *openAPISchema, prefix string, depth int) []string {
	s = d.resolve(s)
	if s == nil || depth > 4 {
		return nil
	}
	var out []string
	for _, sub := range slices.Concat(s.OneOf, s.AnyOf, s.AllOf) {
		out = append(out, d.numbers(sub, prefix, depth+1)...)
	}
	for name, p := range s.Properties {
		if p = d.resolve(p); p == nil {
			continue
		}
		if p.is("integer", "number") {
			out = append(out, prefix+name)
		}
		out = append(out, d.numbers(p, prefix+name+".", depth+1)...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// loadRoutes reads the OpenAPI document a server serves and returns its
// operations, paths as served (the server URL of the document in front).
func loadRoutes(t *testing.T, base, docPath string) []openAPIRoute {
	t.Helper()
	status, body, _ := get(t, base+docPath)
	if status != http.StatusOK {
		t.Fatalf("GET %s: %d", docPath, status)
	}
	doc := &openAPIDocument{}
	if err := json.Unmarshal(body, doc); err != nil {
		t.Fatalf("%s: %v", docPath, err)
	}
	prefix := ""
	if len(doc.Servers) > 0 && strings.HasPrefix(doc.Servers[0].URL, "/") {
		prefix = strings.TrimSuffix(doc.Servers[0].URL, "/")
	}
	var routes []openAPIRoute
	for path, item := range doc.Paths {
		var shared []openAPIParam
		if raw, ok := item["parameters"]; ok {
			json.Unmarshal(raw, &shared)
		}
		for method, raw := range item {
			switch method {
			case "get", "post", "put", "patch", "delete":
			default:
				continue
			}
			var op struct {
				Parameters  []openAPIParam `json:"parameters"`
				RequestBody *struct {
					Content map[string]struct {
						Schema *openAPISchema `json:"schema"`
					} `json:"content"`
				} `json:"requestBody"`
			}
			if err := json.Unmarshal(raw, &op); err != nil {
				t.Fatalf("%s %s %s: %v", docPath, method, path, err)
			}
			rt := openAPIRoute{method: strings.ToUpper(method), path: prefix + path}
			for _, p := range slices.Concat(shared, op.Parameters) {
				if p.Ref != "" {
					p = doc.Components.Parameters[strings.TrimPrefix(p.Ref, "#/components/parameters/")]
				}
				if p.In == "query" {
					rt.query = append(rt.query, p)
				}
			}
			if op.RequestBody != nil {
				rt.body, rt.bodyType = true, "application/json"
				if c, ok := op.RequestBody.Content["application/json"]; ok {
					rt.bodyNumbers = doc.numbers(c.Schema, "", 0)
				} else {
					for t := range op.RequestBody.Content {
						rt.bodyType = t
						break
					}
				}
			}
			routes = append(routes, rt)
		}
	}
	sort.Slice(routes, func(i, j int) bool {
		return routes[i].path+" "+routes[i].method < routes[j].path+" "+routes[j].method
	})
	return routes
}

// hostileCase is one hostile request and what it may get.
type hostileCase struct {
	name   string
	method string
	target string // path and query, as sent
	header http.Header
	body   func() (io.Reader, int64)
	// allow2xx: the input may be legitimate (CR/LF in a search), only its
	// echo is checked.
	allow2xx bool
	// protocol: the request is refused by the HTTP server itself (a
	// header too large or malformed), before any route, so its answer is
	// not a problem document.
	protocol bool
	// want, when set, is the one status the case may get.
	want int
}

// withParam fills the {param} templates of a path.
func withParam(path string, fill func(name string) string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(path, '{')
		j := strings.IndexByte(path, '}')
		if i < 0 || j < i {
			b.WriteString(path)
			return b.String()
		}
		b.WriteString(path[:i])
		b.WriteString(fill(path[i+1 : j]))
		path = path[j+1:]
	}
}

func bytesBody(s string) func() (io.Reader, int64) {
	return func() (io.Reader, int64) { return strings.NewReader(s), int64(len(s)) }
}

// hugeBody is a JSON document of n bytes: one long string.
func hugeBody(n int64) func() (io.Reader, int64) {
	return func() (io.Reader, int64) {
		return io.MultiReader(strings.NewReader(`{"x":"`), io.LimitReader(repeatReader('a'), n-8), strings.NewReader(`"}`)), n
	}
}

// deepBody is 100,000 nested arrays.
var deepBody = bytesBody(strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000))

// setNested returns {"a":{"b":v}} for the dotted path a.b.
func setNested(path, v string) string {
	parts := strings.Split(path, ".")
	var b strings.Builder
	for _, p := range parts {
		fmt.Fprintf(&b, "{%q:", p)
	}
	b.WriteString(v)
	b.WriteString(strings.Repeat("}", len(parts)))
	return b.String()
}

// hostileCases returns the hostile requests for one route; fill gives a
// real value of each path parameter.
func hostileCases(rt openAPIRoute, methods []string, fill func(string) string, auth http.Header) []hostileCase {
	real := withParam(rt.path, fill)
	var cs []hostileCase
	add := func(c hostileCase) {
		if c.method == "" {
			c.method = rt.method
		}
		if c.header == nil {
			c.header = http.Header{}
		}
		for k, v := range auth {
			if c.header.Get(k) == "" {
				c.header[k] = v
			}
		}
		cs = append(cs, c)
	}
	for _, m := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
		if !slices.Contains(methods, m) {
			add(hostileCase{name: "wrong method " + m, method: m, target: real})
		}
	}
	if strings.Contains(rt.path, "{") {
		for _, c := range []struct{ name, value string }{
			{"encoded path traversal", "..%2F..%2Fetc%2Fpasswd"},
			{"invalid UTF-8 id", "%ff%fe%fd"},
			{"CR/LF in id", "x%0d%0aX-Injected:%201"},
			{"NUL in id", "x%00y"},
			{"huge id", strings.Repeat("9", 10_000)},
		} {
			add(hostileCase{name: c.name, target: withParam(rt.path, func(string) string { return c.value }), body: emptyJSON(rt)})
		}
		// A literal traversal: the server must not route it elsewhere.
		i := strings.IndexByte(rt.path, '{')
		add(hostileCase{name: "path traversal", target: rt.path[:i] + "../../x", body: emptyJSON(rt)})
	}
	// The HTTP server refuses these before any route: they carry no
	// body, which it would leave unread (and answer with a reset).
	add(hostileCase{name: "huge query string", target: real + "?q=" + strings.Repeat("a", 1<<20+100), protocol: true})
	add(hostileCase{name: "bare CR in a header", target: real, header: http.Header{"If-None-Match": {"\"a\"\rX-Injected: 1"}}, protocol: true})
	// Routes without parameters may ignore a query (a cache buster);
	// routes with parameters refuse what they do not know.
	noQuery := len(rt.query) == 0
	add(hostileCase{name: "CR/LF in an unknown parameter", target: real + "?x=%0d%0aX-Injected:%201", body: emptyJSON(rt), allow2xx: noQuery})
	add(hostileCase{name: "malformed query string", target: real + "?limit=%zz;x", body: emptyJSON(rt), allow2xx: noQuery})
	for _, p := range rt.query {
		if p.numeric() {
			for _, v := range []string{"-1", "99999999999999999999", "1e309", "NaN", "-0x1p63", "1%00"} {
				add(hostileCase{name: p.Name + "=" + v, target: real + "?" + p.Name + "=" + v})
			}
			continue
		}
		add(hostileCase{name: p.Name + " not UTF-8", target: real + "?" + p.Name + "=%ff%fe"})
		add(hostileCase{name: p.Name + " with CR/LF", target: real + "?" + p.Name + "=a%0d%0aX-Injected:%201", allow2xx: p.Name == "q"})
	}
	if rt.body {
		ct := http.Header{"Content-Type": {rt.bodyType}}
		add(hostileCase{name: "oversized body (40 MiB)", target: real, header: ct, body: hugeBody(40 << 20)})
		add(hostileCase{name: "100,000 nested arrays", target: real, header: ct, body: deepBody})
		add(hostileCase{name: "body not UTF-8", target: real, header: ct, body: bytesBody("{\"ids\":[\"\xff\xfe\"],\"name\":\"\xff\",\"hostname\":\"\xc3\x28\"}")})
		add(hostileCase{name: "body not JSON", target: real, header: ct, body: bytesBody("\x00\x01\x02")})
		add(hostileCase{name: "two JSON values", target: real, header: ct, body: bytesBody(`{} {}`)})
		if rt.method == "POST" && rt.path == "/agent/v1/checkin" {
			// What an agent says about its endpoint is checked before it
			// is stored: each of these is a 400 that names the field.
			for _, c := range []struct{ name, field, value string }{
				{"capability 0", "capability", `0`},
				{"IP that is a host name", "ips", `["10.0.0.7","evil.example"]`},
				{"IP with CR/LF", "ips", `["10.0.0.7\r\nX-Injected: 1"]`},
				{"257 IPs", "ips", "[" + strings.TrimSuffix(strings.Repeat(`"10.0.0.1",`, 257), ",") + "]"},
				{"unknown architecture", "arch", `"pdp11"`},
				{"hostname with an escape sequence", "hostname", `"host\u001b[2J"`},
				{"hostname of 300 bytes", "hostname", `"` + strings.Repeat("h", 300) + `"`},
				{"os name with a C1 control", "os", `{"platform":"linux","name":"Debian\u0085","version":"12","build":"6.1"}`},
				{"agent version with a newline", "agentVersion", `"1.0\nlevel=ERROR"`},
				{"agent version of 100 bytes", "agentVersion", `"` + strings.Repeat("1", 100) + `"`},
			} {
				fields := map[string]string{"capability": "2", "hostname": `"hostile-01"`, "arch": `"amd64"`, "agentVersion": `"1.0.0"`,
					"os": `{"platform":"linux","name":"Debian GNU/Linux","version":"12","build":"6.1"}`, "ips": `["10.0.0.7"]`}
				fields[c.field] = c.value
				var b strings.Builder
				b.WriteString("{")
				for _, k := range []string{"capability", "hostname", "arch", "agentVersion", "os", "ips"} {
					if b.Len() > 1 {
						b.WriteString(",")
					}
					fmt.Fprintf(&b, "%q:%s", k, fields[k])
				}
				b.WriteString("}")
				add(hostileCase{name: "check-in with " + c.name, target: real, header: ct, body: bytesBody(b.String()), want: http.StatusBadRequest})
			}
		}
		for _, n := range rt.bodyNumbers {
			for _, v := range []string{"99999999999999999999", "1e309", "-1e309"} {
				add(hostileCase{name: "body " + n + "=" + v, target: real, header: ct, body: bytesBody(setNested(n, v))})
			}
		}
	}
	return cs
}

// emptyJSON is an empty body for routes that take one, so that a refusal
// is about what the case changed.
func emptyJSON(rt openAPIRoute) func() (io.Reader, int64) {
	if !rt.body {
		return nil
	}
	return bytesBody("{}")
}

// checkHostile fails the test unless resp is a clear refusal of c.
func checkHostile(t *testing.T, listener string, c hostileCase, resp *hostileResponse, err error) {
	t.Helper()
	what := fmt.Sprintf("%s %s %.120s (%s)", listener, c.method, c.target, c.name)
	if err != nil {
		t.Errorf("%s: no answer within %v: %v", what, hostileTimeout, err)
		return
	}
	for k, vs := range resp.header {
		if strings.EqualFold(k, "X-Injected") {
			t.Errorf("%s: the response carries an injected header %s", what, k)
		}
		for _, v := range vs {
			if strings.ContainsAny(v, "\r\n") {
				t.Errorf("%s: header %s has CR/LF: %q", what, k, v)
			}
		}
	}
	switch {
	case c.want != 0 && resp.status != c.want:
		t.Errorf("%s: status %d, want %d: %.300s", what, resp.status, c.want, resp.body)
		return
	case resp.status >= 500:
		t.Errorf("%s: status %d: %.300s", what, resp.status, resp.body)
		return
	case resp.status < 400 && !(c.allow2xx && resp.status < 300):
		t.Errorf("%s: status %d, want a 4xx: %.300s", what, resp.status, resp.body)
		return
	case resp.status < 400:
		return
	}
	path := c.target
	if i := strings.IndexByte(path, '?'); i >= 0 {
		path = path[:i]
	}
	api := strings.HasPrefix(path, "/api/") || strings.HasPrefix(path, "/agent/")
	if !api || (c.protocol && strings.HasPrefix(resp.header.Get("Content-Type"), "text/plain")) {
		return
	}
	if ct := resp.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("%s: status %d with Content-Type %q, want application/problem+json: %.300s", what, resp.status, ct, resp.body)
		return
	}
	var p struct {
		Title  string `json:"title"`
		Status int    `json:"status"`
		Detail string `json:"detail"`
	}
	if err := json.Unmarshal(resp.body, &p); err != nil || p.Status != resp.status || p.Title == "" || p.Detail == "" {
		t.Errorf("%s: not a clear problem document: %s (%v)", what, resp.body, err)
	}
}

func TestHostileInputEndToEnd(t *testing.T) {
	e2e(t)
	data := t.TempDir()
	d := []string{"--data", data}
	if res := runCLI(t, "", nil, "ingest", "--data", data,
		"cvelist="+filepath.Join(sampleData, "cvelist/CVE-2021-44228.json"),
		"kev="+filepath.Join(sampleData, "kev/known_exploited_vulnerabilities.json")); res.Code != 0 {
		t.Fatalf("ingest: %s%s", res.Stdout, res.Stderr)
	}
	priv := mustControlCLI(t, append([]string{"keys", "create", "--name", "hostile", "--privileged", "--expires", "1h"}, d...)...)
	enrollSecret := mustControlCLI(t, append([]string{"enroll", "create", "--expires", "1h"}, d...)...)
	srv := startServe(t, data, []string{"PATCHLINE_CONTROL_DB=", "PATCHLINE_CATALOG_DB="}, "--rate-limit", "100000/1m")

	// A real agent and a real command, so that the routes get past "not
	// found" to the checks of their input.
	c := &controlClient{t: t, base: srv.ControlURL, http: &http.Client{Timeout: 30 * time.Second}}
	var agent struct{ AgentID, Credential string }
	status, body := c.raw("POST", "/agent/v1/enroll", "", "", map[string]any{
		"enrollSecret": enrollSecret, "capability": 2, "hostname": "hostile-01",
		"os": map[string]string{"platform": "linux", "name": "Debian GNU/Linux", "version": "12", "build": "6.1"},
	})
	c.expect("enroll", status, body, http.StatusCreated, &agent)
	var cmd struct{ ID string }
	status, body = c.raw("POST", "/api/agents/"+agent.AgentID+"/collect-logs", priv, "", nil)
	c.expect("collect logs", status, body, http.StatusAccepted, &cmd)
	status, body = c.raw("POST", "/api/rings", priv, "", map[string]any{"name": "pilot", "position": 10})
	c.expect("ring", status, body, http.StatusCreated, nil)
	fill := func(path string) func(string) string {
		return func(name string) string {
			switch {
			case strings.HasPrefix(path, "/api/v1/cve/"), strings.HasPrefix(path, "/cve/"):
				return "CVE-2021-44228"
			case strings.Contains(path, "/agents/"):
				return agent.AgentID
			case strings.Contains(path, "/commands/"):
				return cmd.ID
			case strings.Contains(path, "/rings/"):
				return "pilot"
			}
			return "x_0000000000000000000000000"
		}
	}

	type listener struct {
		name, base, doc string
		extra           []openAPIRoute // routes outside the API documents
	}
	listeners := []listener{
		{"lookup", srv.LookupURL, "/api/v1/openapi.json", []openAPIRoute{
			{method: "GET", path: "/"}, {method: "GET", path: "/cve/{id}"},
		}},
		{"control", srv.ControlURL, "/api/openapi.json", []openAPIRoute{
			{method: "GET", path: "/sign-in"}, {method: "POST", path: "/sign-in", body: true, bodyType: "application/x-www-form-urlencoded"},
			{method: "GET", path: "/agents/{id}"},
		}},
	}
	total := 0
	for _, l := range listeners {
		routes := loadRoutes(t, l.base, l.doc)
		if len(routes) < 5 {
			t.Fatalf("%s: only %d routes in %s", l.name, len(routes), l.doc)
		}
		// The search page takes the query parameters of the list.
		for i := range l.extra {
			if l.extra[i].path == "/" {
				for _, rt := range routes {
					if rt.path == "/api/v1/cve" && rt.method == "GET" {
						l.extra[i].query = rt.query
					}
				}
			}
		}
		routes = append(routes, l.extra...)
		methods := map[string][]string{}
		for _, rt := range routes {
			methods[rt.path] = append(methods[rt.path], rt.method, "HEAD", "OPTIONS")
		}
		for _, rt := range routes {
			auth := http.Header{}
			switch {
			case strings.HasPrefix(rt.path, "/agent/") && rt.path != "/agent/v1/enroll":
				auth.Set("Authorization", "Bearer "+agent.Credential)
			case strings.HasPrefix(rt.path, "/api/") && l.name == "control" && !strings.HasSuffix(rt.path, "/openapi.json"):
				auth.Set("X-API-Key", priv)
			}
			page := !strings.HasPrefix(rt.path, "/api/") && !strings.HasPrefix(rt.path, "/agent/")
			for _, hc := range hostileCases(rt, methods[rt.path], fill(rt.path), auth) {
				switch {
				case page && l.name == "control" && !hc.protocol:
					// The console answers people: a sign-in redirect or a
					// refused form is as good as a 4xx.
					hc.allow2xx = true
				case page && hc.name == "CR/LF in an unknown parameter":
					// The search page ignores what its form does not send.
					hc.allow2xx = true
				}
				var body io.Reader
				var n int64
				if hc.body != nil {
					body, n = hc.body()
				}
				resp, err := rawRequest(l.base, hc.method, hc.target, hc.header, body, n)
				if page && l.name == "control" && err == nil && resp.status >= 300 && resp.status < 400 {
					resp.status = http.StatusOK // a redirect to sign in
				}
				checkHostile(t, l.name, hc, resp, err)
				total++
			}
		}
	}
	t.Logf("%d hostile requests", total)

	// Still healthy, nothing logged as an internal error, and the audit
	// chain over all those hostile paths verifies.
	for _, u := range []string{srv.LookupURL, srv.ControlURL} {
		if status, body, _ := get(t, u+"/healthz"); status != http.StatusOK {
			t.Errorf("%s/healthz after the hostile requests: %d %s", u, status, body)
		}
	}
	for _, line := range strings.Split(srv.Log(), "\n") {
		if strings.Contains(line, "level=ERROR") || strings.Contains(line, "panic") {
			t.Errorf("server log: %s", line)
		}
	}
	if r := controlCLI(t, "", append([]string{"audit", "verify"}, d...)...); r.Code != 0 {
		t.Errorf("audit verify: exit %d: %s%s", r.Code, r.Stdout, r.Stderr)
	}
}
