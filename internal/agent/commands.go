package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/patchline/patchline/internal/agentproto"
	"github.com/patchline/patchline/internal/device"
)

// worker runs commands one at a time, in the order they arrived.
func (a *Agent) worker(ctx context.Context, work <-chan Command) {
	for {
		select {
		case <-ctx.Done():
			return
		case cmd := <-work:
			a.execute(ctx, cmd)
			if err := a.flush(ctx); err != nil && ctx.Err() == nil {
				a.log.Debug("results wait for the next check-in", "err", err)
			}
			if cmd.Type == device.Remove {
				return
			}
		}
	}
}

// execute runs one command and stores its final result.
func (a *Agent) execute(ctx context.Context, cmd Command) {
	log := a.log.With("command", cmd.ID, "type", cmd.Type)
	var out Outcome
	switch {
	case IsDestructive(cmd.Type) && !a.allowed(cmd.Type):
		log.Warn("refused: not in --allow")
		out = Outcome{Failed: true, Message: agentproto.NotAllowedMessage}
	default:
		// The start is news, not a result: it is not kept for later.
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if err := a.client.Report(rctx, cmd.ID, &agentproto.Report{State: agentproto.StateRunning}); err != nil {
			log.Debug("reporting the start", "err", err)
		}
		cancel()
		log.Info("running")
		switch cmd.Type {
		case device.Remove:
			out = Outcome{Message: "the agent removed itself: it deleted its state and stopped"}
		case device.ApplyPolicy:
			out = a.applyPolicy(ctx, cmd)
		case device.CollectLogs, device.InstallUpdates, device.Reboot, device.FinishFeatureUpgrade:
			if cmd.Type == device.Reboot {
				// If the restart takes the agent down before it can say
				// so, this is what the server hears.
				a.cfg.State.PutResult(&PendingResult{CommandID: cmd.ID, Run: a.run, Created: a.now().UTC(),
					Report: agentproto.Report{State: agentproto.StateSucceeded, Result: &agentproto.Result{Message: "restart requested"}}})
			}
			out = a.cfg.Endpoint.Execute(ctx, cmd)
		default:
			out = Failf("this agent does not know command type %q", cmd.Type)
		}
	}
	r := &PendingResult{CommandID: cmd.ID, Final: true, Run: a.run, Created: a.now().UTC(), Bundle: out.Bundle, BundleType: out.BundleType}
	r.Report = agentproto.Report{State: agentproto.StateSucceeded, Result: &agentproto.Result{Message: out.Message, ExitCode: out.ExitCode}}
	if out.Failed {
		r.Report.State = agentproto.StateFailed
	}
	if len(out.Data) > 0 {
		b, err := json.Marshal(out.Data)
		if err == nil {
			r.Report.Result.Data = b
		}
	}
	if len(r.Report.Result.Message) > 4000 {
		r.Report.Result.Message = r.Report.Result.Message[:4000]
	}
	if err := a.cfg.State.PutResult(r); err != nil {
		log.Error("saving the result", "err", err)
	}
	log.Info("done", "state", r.Report.State, "message", out.Message)
	if cmd.Type == device.Remove {
		a.remove.Do(func() { close(a.removed) })
	}
}

func (a *Agent) allowed(t device.CommandType) bool {
	for _, x := range a.cfg.Allow {
		if x == t {
			return true
		}
	}
	return false
}

// applyPolicy records a policy version and checks it at once.
func (a *Agent) applyPolicy(ctx context.Context, cmd Command) Outcome {
	var p device.ApplyPolicyParams
	if err := json.Unmarshal(cmd.Params, &p); err != nil || p.PolicyID == "" || p.Version < 1 {
		return Failf("the apply-policy command carries no usable policy")
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(p.Settings, &obj); err != nil || obj == nil {
		return Failf("the settings of policy %s version %d are not a JSON object", p.PolicyID, p.Version)
	}
	if pa, ok := a.cfg.Endpoint.(PolicyApplier); ok {
		if err := pa.ApplyPolicy(ctx, p.Settings); err != nil {
			return Failf("policy %s version %d: %v", p.PolicyID, p.Version, err)
		}
	}
	if err := a.cfg.State.SavePolicy(&Policy{ID: p.PolicyID, Version: p.Version, Settings: p.Settings, AppliedAt: a.now().UTC()}); err != nil {
		return Failf("saving the policy: %v", err)
	}
	snap, err := a.cfg.Endpoint.Snapshot(ctx)
	if err != nil {
		return Outcome{Message: fmt.Sprintf("policy %s version %d applied; compliance is checked at the next check-in", p.PolicyID, p.Version)}
	}
	compliant, msg := a.checkPolicy(p.Settings, snap)
	verdict := "compliance unknown"
	switch {
	case compliant == nil:
	case *compliant:
		verdict = "compliant"
	default:
		verdict = "not compliant"
	}
	text := fmt.Sprintf("policy %s version %d applied: %s", p.PolicyID, p.Version, verdict)
	if msg != "" {
		text += ": " + msg
	}
	return Outcome{Message: text, Data: map[string]any{"policyId": p.PolicyID, "version": p.Version, "compliant": compliant}}
}

// flush delivers the stored results, oldest first. It stops at the first
// one the server cannot take now, so that results arrive in order.
func (a *Agent) flush(ctx context.Context) error {
	a.flushMu.Lock()
	defer a.flushMu.Unlock()
	results, err := a.cfg.State.Results()
	if err != nil {
		return stateErr(err)
	}
	for _, r := range results {
		if !r.Final && r.Run == a.run {
			continue // still running
		}
		if err := a.deliver(ctx, r); err != nil {
			if Transient(err) || StatusOf(err) == http.StatusUnauthorized {
				return err
			}
			// The server will never take it (the command is over, or not
			// this agent's): drop it.
			a.log.Warn("the server refused a result: dropping it", "command", r.CommandID, "err", err)
		}
		if err := a.cfg.State.DeleteResult(r.CommandID); err != nil {
			return stateErr(err)
		}
	}
	return nil
}

func (a *Agent) deliver(ctx context.Context, r *PendingResult) error {
	if len(r.Bundle) > 0 && !r.BundleUploaded {
		err := a.client.UploadLogBundle(ctx, r.CommandID, r.BundleType, r.Bundle)
		switch {
		case err == nil, StatusOf(err) == http.StatusConflict: // already there
		case StatusOf(err) == http.StatusRequestEntityTooLarge:
			r.Report = agentproto.Report{State: agentproto.StateFailed, Result: &agentproto.Result{Message: fmt.Sprintf("the log bundle (%d bytes) is larger than the server accepts", len(r.Bundle))}}
		default:
			return err
		}
		r.BundleUploaded, r.Bundle = true, nil
		if err := a.cfg.State.PutResult(r); err != nil {
			return stateErr(err)
		}
	}
	return a.client.Report(ctx, r.CommandID, &r.Report)
}

// finishRemoval reports the remove command, deletes the state and leaves
// the removal mark.
func (a *Agent) finishRemoval(ctx context.Context) error {
	// The remove command's own result goes out first, given a few tries.
	bo := &Backoff{Base: time.Second, Max: 5 * time.Second, Rand: a.cfg.Rand}
	for i := 0; i < 5; i++ {
		err := a.flush(ctx)
		if err == nil || !Transient(err) {
			break
		}
		if !sleep(ctx, bo.Next()) {
			break
		}
	}
	if err := a.cfg.State.Remove(a.now()); err != nil {
		return err
	}
	a.log.Warn("this endpoint was removed from Patchline: the agent deleted its state and stops")
	return ErrRemoved
}
