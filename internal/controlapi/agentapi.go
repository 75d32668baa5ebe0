package controlapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/patchline/patchline/internal/agentproto"
	"github.com/patchline/patchline/internal/apikey"
	"github.com/patchline/patchline/internal/audit"
	"github.com/patchline/patchline/internal/device"
	"github.com/patchline/patchline/internal/errs"
	"github.com/patchline/patchline/internal/httpx"
)

// decodeAgentJSON decodes an agent's JSON body of at most max bytes. Unlike
// the API it ignores unknown fields: newer agents may send more. A body
// that is not UTF-8 is refused rather than stored with U+FFFD in place of
// what the agent sent.
func decodeAgentJSON(w http.ResponseWriter, r *http.Request, max int64, v any) error {
	return httpx.DecodeJSONLenient(w, r, max, v)
}

// Bounds of what an agent reports about itself.
const (
	maxOSField       = 200 // bytes of os.name, os.version, os.build
	maxAgentVersion  = 64  // bytes of agentVersion
	maxFeatureTarget = 200 // bytes of featureUpgrade.target
)

// checkText refuses a reported string longer than max bytes or holding a
// control character (C0, DEL, C1), which would end up in pages, logs and
// terminals as it was sent.
func checkText(field, v string, max int) error {
	if len(v) > max {
		return errs.Invalidf("%s must have at most %d bytes, got %d", field, max, len(v))
	}
	if strings.ContainsFunc(v, unicode.IsControl) {
		return errs.Invalidf("%s must not contain control characters", field)
	}
	return nil
}

func checkOS(os agentproto.OS) error {
	if !device.ValidPlatform(os.Platform) {
		return errs.Invalidf("os.platform must be windows, macos or linux, got %q", truncate(os.Platform))
	}
	for _, f := range []struct{ name, v string }{{"os.name", os.Name}, {"os.version", os.Version}, {"os.build", os.Build}} {
		if err := checkText(f.name, f.v, maxOSField); err != nil {
			return err
		}
	}
	return nil
}

// checkIdentity checks what both enrollment and check-in say about the
// endpoint: hostname, operating system, architecture, agent version and
// the protocol version.
func checkIdentity(capability int, hostname string, os agentproto.OS, arch, agentVersion string) error {
	if capability < agentproto.MinCapabilityVersion {
		return errs.Invalidf("capability %d is not supported: this server speaks protocol versions %d to %d",
			capability, agentproto.MinCapabilityVersion, agentproto.CapabilityVersion)
	}
	if err := device.CheckHostname(hostname); err != nil {
		return err
	}
	if err := checkText("hostname", hostname, 255); err != nil {
		return err // a C1 control, which CheckHostname lets through
	}
	if err := checkOS(os); err != nil {
		return err
	}
	if arch != "" && !agentproto.KnownArch(arch) {
		return errs.Invalidf("arch %q is not a known architecture: want one of %s", truncate(arch), strings.Join(agentproto.Architectures, ", "))
	}
	return checkText("agentVersion", agentVersion, maxAgentVersion)
}

// checkIPs refuses addresses that are not IP addresses, and more of them
// than agentproto.MaxIPs.
func checkIPs(ips []string) error {
	if len(ips) > agentproto.MaxIPs {
		return errs.Invalidf("ips may list at most %d addresses, got %d", agentproto.MaxIPs, len(ips))
	}
	for i, ip := range ips {
		if _, err := netip.ParseAddr(ip); err != nil {
			return errs.Invalidf("ips[%d] %q is not an IP address", i, truncate(ip))
		}
	}
	return nil
}

// validEnrollmentID reports whether id is an enrollment id an agent may
// send: 16 to 64 characters of a URL-safe alphabet.
func validEnrollmentID(id string) bool {
	if len(id) < 16 || len(id) > 64 {
		return false
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// truncate shortens a client's value quoted in a message.
func truncate(s string) string {
	if len(s) <= 64 {
		return s
	}
	n := 64
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func (s *Server) enroll(w http.ResponseWriter, r *http.Request) error {
	var req agentproto.EnrollRequest
	if err := decodeAgentJSON(w, r, 64<<10, &req); err != nil {
		return err
	}
	if !apikey.CheckSecret(device.EnrollSecretPrefix, req.EnrollSecret) {
		s.failedSecret(r)
		return errs.Unauthorizedf("malformed enrollment secret")
	}
	if err := checkIdentity(req.Capability, req.Hostname, req.OS, req.Arch, req.AgentVersion); err != nil {
		return err
	}
	if req.EnrollmentID != "" && !validEnrollmentID(req.EnrollmentID) {
		return errs.Invalidf("enrollmentId must be 16 to 64 letters, digits, '-' or '_', got %q", truncate(req.EnrollmentID))
	}
	now := s.now().UTC()
	credential := apikey.NewSecret(device.AgentCredentialPrefix)
	a := &device.Agent{
		ID:             device.NewID(device.AgentIDPrefix),
		Hostname:       req.Hostname,
		OS:             device.OS(req.OS),
		Arch:           req.Arch,
		AgentVersion:   req.AgentVersion,
		Capability:     req.Capability,
		CredentialHash: apikey.HashSecret(credential),
		EnrollmentID:   req.EnrollmentID,
		EnrolledAt:     now,
		LastSeenAt:     now,
		FeatureUpgrade: device.FeatureUpgrade{State: device.FeatureUpgradeNone},
	}
	if err := s.cfg.Agents.EnrollAgent(r.Context(), apikey.HashSecret(req.EnrollSecret), a); err != nil {
		if errors.Is(err, errs.ErrUnauthorized) {
			s.failedSecret(r)
		}
		return err
	}
	e := &audit.Entry{
		Time:          now,
		Actor:         "agent:" + a.ID,
		Method:        r.Method,
		Path:          r.URL.Path,
		Status:        http.StatusCreated,
		ClientAddress: s.clientAddress(r),
	}
	if err := e.SetEvent(audit.AgentEnrolled{AgentID: a.ID, Hostname: a.Hostname, EnrollSecretID: a.EnrollSecretID}); err != nil {
		return err
	}
	if err := s.cfg.Audit.AppendAudit(context.WithoutCancel(r.Context()), e); err != nil {
		return err
	}
	return httpx.WriteJSON(w, http.StatusCreated, agentproto.EnrollResponse{
		AgentID:                a.ID,
		Credential:             a.ID + "." + credential,
		Capability:             capability,
		CheckInIntervalSeconds: checkInterval,
	})
}

func (s *Server) checkIn(w http.ResponseWriter, r *http.Request) error {
	var req agentproto.CheckInRequest
	if err := decodeAgentJSON(w, r, agentproto.MaxRequestBytes, &req); err != nil {
		return err
	}
	if err := checkIdentity(req.Capability, req.Hostname, req.OS, req.Arch, req.AgentVersion); err != nil {
		return err
	}
	if err := checkIPs(req.IPs); err != nil {
		return err
	}
	if err := checkText("featureUpgrade.target", req.FeatureUpgrade.Target, maxFeatureTarget); err != nil {
		return err
	}
	fu := device.FeatureUpgrade(req.FeatureUpgrade)
	if fu.State == "" {
		fu.State = device.FeatureUpgradeNone
	}
	if !device.ValidFeatureUpgradeState(fu.State) {
		return errs.Invalidf("featureUpgrade.state %q is not one of the known states", truncate(fu.State))
	}
	c := device.CheckIn{
		Time:           s.now(),
		Hostname:       req.Hostname,
		OS:             device.OS(req.OS),
		Arch:           req.Arch,
		AgentVersion:   req.AgentVersion,
		Capability:     req.Capability,
		IPs:            req.IPs,
		FeatureUpgrade: fu,
		RebootPending:  req.RebootPending,
		MaxCommands:    100,
	}
	for _, p := range req.AppliedPolicies {
		c.AppliedPolicies = append(c.AppliedPolicies, device.AppliedPolicy(p))
	}
	ri := requestInfoFrom(r.Context())
	switch {
	case req.Inventory != nil && req.InventoryDelta != nil:
		return errs.Invalidf("send either inventory or inventoryDelta")
	case req.Inventory != nil:
		c.Inventory, c.InventoryHash = fromWireInventory(*req.Inventory), agentproto.InventoryHash(*req.Inventory)
	case req.InventoryDelta != nil && ri.agent.RemovedAt == nil:
		inv, err := s.applyInventoryDelta(r.Context(), ri.agent.AgentID, req.InventoryDelta)
		if err != nil {
			return err
		}
		c.Inventory, c.InventoryHash, c.InventoryBase = inv, req.InventoryDelta.Hash, req.InventoryDelta.Base
	}
	cmds, err := s.cfg.Agents.CheckIn(r.Context(), ri.agent.AgentID, c)
	if errors.Is(err, errs.ErrUnauthorized) && ri.agent.RemovedAt != nil {
		w.Header().Set(agentproto.HeaderAgentState, agentproto.AgentStateRemoved)
	}
	if err != nil {
		return err
	}
	if len(cmds) == 0 {
		httpx.WriteJSONBytes(w, http.StatusOK, noCommands())
		return nil
	}
	resp := agentproto.CheckInResponse{Capability: capability, CheckInIntervalSeconds: checkInterval, Commands: []agentproto.Command{}}
	for _, cmd := range cmds {
		resp.Commands = append(resp.Commands, agentproto.Command{
			ID: cmd.ID, Type: string(cmd.Type), Params: cmd.Params, CreatedAt: cmd.CreatedAt, ExpiresAt: cmd.ExpiresAt,
		})
	}
	return httpx.WriteJSON(w, http.StatusOK, resp)
}

// noCommands returns the answer to a check-in that gets no commands, most
// of them, encoded once as httpx.WriteJSON would.
var noCommands = sync.OnceValue(func() []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(agentproto.CheckInResponse{Capability: capability, CheckInIntervalSeconds: checkInterval, Commands: []agentproto.Command{}}); err != nil {
		panic(err) // two integers and an empty list
	}
	return buf.Bytes()
})

// applyInventoryDelta returns the inventory of an agent changed by d. It
// returns errs.ErrConflict when d is not based on the stored inventory or
// does not lead to the inventory it names: the agent then sends the whole
// inventory. The store checks the base again as it writes.
func (s *Server) applyInventoryDelta(ctx context.Context, agentID string, d *agentproto.InventoryDelta) (*device.Inventory, error) {
	a, err := s.cfg.Agents.FindAgentByID(ctx, agentID)
	if err != nil {
		return nil, err
	}
	if a.InventoryHash == "" || a.InventoryHash != d.Base {
		return nil, errs.Conflictf("the inventory delta is based on %q but the server holds %q: send the full inventory", d.Base, a.InventoryHash)
	}
	inv, err := d.Apply(toWireInventory(a.Inventory))
	if err != nil {
		return nil, errs.Conflictf("%v: send the full inventory", err)
	}
	if got := agentproto.InventoryHash(inv); got != d.Hash {
		return nil, errs.Conflictf("the inventory delta leads to %q, not %q: send the full inventory", got, d.Hash)
	}
	return fromWireInventory(inv), nil
}

// toWireInventory converts an inventory to the agent protocol's.
func toWireInventory(in device.Inventory) agentproto.Inventory {
	var out agentproto.Inventory
	for _, sw := range in.Software {
		out.Software = append(out.Software, agentproto.Software(sw))
	}
	for _, u := range in.PendingUpdates {
		out.PendingUpdates = append(out.PendingUpdates, agentproto.Update(u))
	}
	for _, u := range in.InstalledUpdates {
		out.InstalledUpdates = append(out.InstalledUpdates, agentproto.Update(u))
	}
	out.Notes = in.Notes
	return out
}

// fromWireInventory converts an inventory of the agent protocol.
func fromWireInventory(in agentproto.Inventory) *device.Inventory {
	inv := &device.Inventory{Software: make([]device.Software, 0, len(in.Software)), PendingUpdates: []device.Update{}}
	for _, sw := range in.Software {
		inv.Software = append(inv.Software, device.Software(sw))
	}
	for _, u := range in.PendingUpdates {
		inv.PendingUpdates = append(inv.PendingUpdates, device.Update(u))
	}
	for _, u := range in.InstalledUpdates {
		inv.InstalledUpdates = append(inv.InstalledUpdates, device.Update(u))
	}
	inv.Notes = in.Notes
	return inv
}

func (s *Server) reportCommand(w http.ResponseWriter, r *http.Request) error {
	var req agentproto.Report
	if err := decodeAgentJSON(w, r, agentproto.MaxRequestBytes, &req); err != nil {
		return err
	}
	var st device.CommandState
	switch req.State {
	case agentproto.StateRunning, agentproto.StateSucceeded, agentproto.StateFailed:
		st = device.CommandState(req.State)
	default:
		return errs.Invalidf("state must be running, succeeded or failed, got %q", req.State)
	}
	var result *device.Result
	if req.Result != nil {
		if utf8.RuneCountInString(req.Result.Message) > 4096 {
			return errs.Invalidf("result.message must have at most 4096 characters")
		}
		if len(req.Result.Data) > 0 {
			var obj map[string]json.RawMessage
			if err := json.Unmarshal(req.Result.Data, &obj); err != nil || obj == nil {
				return errs.Invalidf("result.data must be a JSON object")
			}
		}
		result = &device.Result{Message: req.Result.Message, ExitCode: req.Result.ExitCode, Data: req.Result.Data}
	}
	if st == device.Failed && result == nil {
		return errs.Invalidf("a failed command needs a result that says why")
	}
	ri := requestInfoFrom(r.Context())
	c, err := s.cfg.Commands.ReportCommand(r.Context(), ri.agent.AgentID, r.PathValue("id"), device.Report{State: st, Result: result, Time: s.now()})
	if err != nil {
		return err
	}
	return httpx.WriteJSON(w, http.StatusOK, agentproto.ReportResponse{ID: c.ID, State: string(c.State)})
}

// logBundleTypes are the media types a log bundle may have.
var logBundleTypes = map[string]bool{
	"application/gzip":         true,
	"application/zip":          true,
	"application/x-tar":        true,
	"application/octet-stream": true,
}

// LogBundleReadTimeout is how long an agent may take to send a log bundle:
// 32 MiB at about 300 kbit/s.
const LogBundleReadTimeout = 15 * time.Minute

func (s *Server) uploadLogBundle(w http.ResponseWriter, r *http.Request) error {
	ri := requestInfoFrom(r.Context())
	if ri.agent.RemovedAt != nil {
		w.Header().Set(agentproto.HeaderAgentState, agentproto.AgentStateRemoved)
		return errs.Unauthorizedf("the agent has been removed")
	}
	ct := "application/octet-stream"
	if v := r.Header.Get("Content-Type"); v != "" {
		mt, _, err := mime.ParseMediaType(v)
		if err != nil || !logBundleTypes[mt] {
			return errs.Invalidf("a log bundle must be application/gzip, application/zip, application/x-tar or application/octet-stream")
		}
		ct = mt
	}
	if r.ContentLength > agentproto.MaxLogBundleBytes {
		return errs.TooLargef("a log bundle may have at most %d bytes", agentproto.MaxLogBundleBytes)
	}
	// The listener reads a request within a minute; a whole bundle over a
	// slow link gets longer, and the answer a moment more after it.
	rc := http.NewResponseController(w)
	if err := rc.SetReadDeadline(time.Now().Add(LogBundleReadTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	if err := rc.SetWriteDeadline(time.Now().Add(LogBundleReadTimeout + time.Minute)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, agentproto.MaxLogBundleBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return errs.TooLargef("a log bundle may have at most %d bytes", agentproto.MaxLogBundleBytes)
		}
		return errs.Invalidf("reading the log bundle: %v", err)
	}
	if len(body) == 0 {
		return errs.Invalidf("the log bundle is empty")
	}
	sum := sha256.Sum256(body)
	b := &device.LogBundle{
		CommandID:   r.PathValue("id"),
		AgentID:     ri.agent.AgentID,
		ContentType: ct,
		Size:        int64(len(body)),
		SHA256:      sum[:],
		Content:     body,
		CreatedAt:   s.now().UTC(),
	}
	if err := s.cfg.Commands.SaveLogBundle(r.Context(), b); err != nil {
		return err
	}
	return httpx.WriteJSON(w, http.StatusCreated, agentproto.LogBundleResponse{CommandID: b.CommandID, Size: b.Size, SHA256: hex.EncodeToString(sum[:])})
}

// waitForCommands holds an agent's long poll until a command is queued
// for it (true) or the time it asked for runs out (false). A ring of the
// hub is a hint: the store says whether a command waits. A full hub, or
// one that is shutting down, answers 503 with Retry-After, and the agent
// goes on checking in on its interval.
func (s *Server) waitForCommands(w http.ResponseWriter, r *http.Request) error {
	var req agentproto.WaitRequest
	if err := decodeAgentJSON(w, r, agentproto.MaxRequestBytes, &req); err != nil {
		return err
	}
	if req.TimeoutSeconds == 0 {
		req.TimeoutSeconds = agentproto.DefaultWaitSeconds
	}
	if req.TimeoutSeconds < 1 || req.TimeoutSeconds > agentproto.MaxWaitSeconds {
		return errs.Invalidf("timeoutSeconds must be from 1 to %d, got %d", agentproto.MaxWaitSeconds, req.TimeoutSeconds)
	}
	if s.cfg.Wakeup == nil {
		return errs.NotFoundf("this server does not hold waits: check in on the interval")
	}
	agentID := requestInfoFrom(r.Context()).agent.AgentID
	hold := time.Duration(req.TimeoutSeconds) * time.Second
	// The listener's read deadline would end the request (and cancel its
	// context) before a long hold does.
	http.NewResponseController(w).SetReadDeadline(time.Now().Add(hold + time.Minute))
	timeout := time.NewTimer(hold)
	defer timeout.Stop()
	for {
		rung, done, err := s.cfg.Wakeup.Wait(agentID)
		if err != nil {
			w.Header().Set("Retry-After", "30")
			httpx.WriteProblem(w, http.StatusServiceUnavailable, err.Error())
			return nil
		}
		queued, err := s.cfg.Commands.FindCommands(r.Context(), device.CommandFilter{
			AgentID: agentID, States: []device.CommandState{device.Queued}, Limit: 1})
		if err != nil || len(queued) > 0 {
			done()
			if err != nil {
				return err
			}
			return httpx.WriteJSON(w, http.StatusOK, agentproto.WaitResponse{Commands: true})
		}
		select {
		case <-rung:
			done()
		case <-timeout.C:
			done()
			return httpx.WriteJSON(w, http.StatusOK, agentproto.WaitResponse{Commands: false})
		case <-r.Context().Done():
			done()
			return nil
		}
	}
}
