package sqlstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"database/sql"

	"github.com/patchline/patchline/internal/device"
	"github.com/patchline/patchline/internal/errs"
)

// EnrollAgent implements device.AgentStore. It locks the row of the
// enrollment secret, so that a revocation is either before the enrollment
// or after it.
func (s *Store) EnrollAgent(ctx context.Context, secretHash []byte, a *device.Agent) (err error) {
	defer errs.Wrap(&err, "enroll agent %s", a.Hostname)
	ring := a.Ring
	return s.write(ctx, func(tx querier) error {
		a.Ring = ring
		sec, err := findEnrollSecret(ctx, tx, `secret_hash = ? `+s.d.lockRow, secretHash)
		if errors.Is(err, errs.ErrNotFound) {
			return errs.Unauthorizedf("unknown enrollment secret")
		}
		if err != nil {
			return err
		}
		switch {
		case sec.RevokedAt != nil:
			return errs.Unauthorizedf("the enrollment secret has been revoked")
		case !sec.Usable(a.EnrolledAt):
			return errs.Unauthorizedf("the enrollment secret has expired")
		}
		if a.EnrollmentID != "" {
			again, err := s.enrollAgain(ctx, tx, sec.ID, a)
			if err != nil || again {
				return err
			}
		}
		if a.Ring == "" {
			a.Ring = sec.Ring
		}
		a.RingSource = device.RingSourceManual
		if a.Ring == "" {
			rings, err := findRings(ctx, tx)
			if err != nil {
				return err
			}
			a.Ring, a.RingSource = device.RingFor(rings, a.Hostname, a.OS), device.RingSourceRule
		}
		a.EnrollSecretID = sec.ID
		if err := s.insertAgent(ctx, tx, a); err != nil {
			return err
		}
		if a.EnrollmentID != "" {
			_, err := tx.Exec(ctx, `UPDATE agents SET enrollment_id = ? WHERE id = ?`, a.EnrollmentID, a.ID)
			if _, ok := s.d.isUnique(err); ok {
				return errs.Conflictf("enrollment %s is being answered: send it again", a.EnrollmentID)
			}
			if err != nil {
				return err
			}
		}
		_, err = tx.Exec(ctx, `UPDATE enroll_secrets SET uses = uses + 1, last_used_at = ? WHERE id = ?`,
			ms(a.EnrolledAt), sec.ID)
		return err
	})
}

// enrollAgain answers an enrollment sent again, its first answer lost: when
// the agent that a.EnrollmentID created with the same secret has not
// checked in since, it takes a's credential and a becomes that agent. Once
// that agent has checked in, the enrollment id is spent.
func (s *Store) enrollAgain(ctx context.Context, tx querier, secretID string, a *device.Agent) (bool, error) {
	prev, err := scanAgent(tx.QueryRow(ctx, `SELECT `+agentColumns+` FROM agents WHERE enrollment_id = ?`, a.EnrollmentID))
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if prev.RemovedAt != nil || prev.EnrollSecretID != secretID || prev.Hostname != a.Hostname || !prev.LastSeenAt.Equal(prev.EnrolledAt) {
		return false, errs.Conflictf("enrollment %s has already been answered: enroll with a new enrollment id", a.EnrollmentID)
	}
	if _, err := tx.Exec(ctx, `UPDATE agents SET credential_hash = ? WHERE id = ?`, a.CredentialHash, prev.ID); err != nil {
		return false, err
	}
	prev.CredentialHash, prev.EnrollmentID = a.CredentialHash, a.EnrollmentID
	*a = *prev
	return true, nil
}

func (s *Store) insertAgent(ctx context.Context, tx querier, a *device.Agent) error {
	ips, inv, applied, err := agentJSON(a.IPs, &a.Inventory, a.AppliedPolicies)
	if err != nil {
		return err
	}
	fu := a.FeatureUpgrade
	if fu.State == "" {
		fu.State = device.FeatureUpgradeNone
	}
	if a.RingSource == "" {
		a.RingSource = device.RingSourceManual
	}
	_, err = tx.Exec(ctx, `INSERT INTO agents (`+agentColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		a.ID, a.Hostname, a.OS.Platform, a.OS.Name, a.OS.Version, a.OS.Build,
		a.Arch, a.AgentVersion, a.Capability,
		ips, nullString(a.Ring), nullString(a.EnrollSecretID), a.CredentialHash, ms(a.EnrolledAt), ms(a.LastSeenAt), inv,
		fu.State, fu.Target, applied, a.RebootPending, msPtr(a.RemovedAt), a.RingSource, a.InventoryHash)
	if _, ok := s.d.isUnique(err); ok {
		return errs.Conflictf("agent %s exists", a.ID)
	}
	return err
}

// agentJSON encodes the JSON columns of an agent; a nil inventory encodes
// as nil.
func agentJSON(ips []string, inv *device.Inventory, applied []device.AppliedPolicy) (ipsJSON string, invJSON *string, appliedJSON string, err error) {
	if ips == nil {
		ips = []string{}
	}
	if applied == nil {
		applied = []device.AppliedPolicy{}
	}
	b1, err := json.Marshal(ips)
	if err != nil {
		return "", nil, "", err
	}
	b3, err := json.Marshal(applied)
	if err != nil {
		return "", nil, "", err
	}
	if inv != nil {
		i := *inv
		if i.Software == nil {
			i.Software = []device.Software{}
		}
		if i.PendingUpdates == nil {
			i.PendingUpdates = []device.Update{}
		}
		b2, err := json.Marshal(i)
		if err != nil {
			return "", nil, "", err
		}
		v := string(b2)
		invJSON = &v
	}
	// encoding/json writes valid UTF-8, and escapes NUL.
	return string(b1), invJSON, string(b3), nil
}

// FindAgentByID implements device.AgentStore.
func (s *Store) FindAgentByID(ctx context.Context, id string) (_ *device.Agent, err error) {
	defer errs.Wrap(&err, "find agent %s", id)
	return findLiveAgent(ctx, s.rq(), id, "")
}

// findLiveAgent returns an agent that is not removed.
func findLiveAgent(ctx context.Context, q querier, id, lock string) (*device.Agent, error) {
	a, err := findAgent(ctx, q, id, lock)
	if err == nil && a.RemovedAt != nil {
		return nil, notFound("agent", id)
	}
	return a, err
}

// findAgent returns an agent, removed or not; lock is "" or a locking
// clause.
func findAgent(ctx context.Context, q querier, id, lock string) (*device.Agent, error) {
	return findOne(ctx, q, scanAgent, "agent", id, `SELECT `+agentColumns+` FROM agents WHERE id = ? `+lock)
}

// FindAgents implements device.AgentStore.
func (s *Store) FindAgents(ctx context.Context, f device.AgentFilter) (_ []*device.Agent, err error) {
	defer errs.Wrap(&err, "find agents")
	where := []string{`removed_at IS NULL`}
	var a args
	if len(f.IDs) > 0 {
		where = append(where, `id IN `+in(&a, f.IDs))
	}
	switch cutoff := ms(timeOr(f.Now, s.Now).Add(-device.OfflineAfter)); f.Status {
	case device.StatusOnline:
		where = append(where, `last_seen_at > `+a.add(cutoff))
	case device.StatusOffline:
		where = append(where, `last_seen_at <= `+a.add(cutoff))
	}
	if f.Platform != "" {
		where = append(where, `os_platform = `+a.add(f.Platform))
	}
	if f.Ring != "" {
		where = append(where, `ring = `+a.add(f.Ring))
	}
	if f.Text != "" {
		pat := "%" + likeEscape(f.Text) + "%"
		where = append(where, `(hostname `+s.d.ilike+` `+a.add(pat)+` ESCAPE '\' OR id `+s.d.ilike+` `+a.add(pat)+` ESCAPE '\')`)
	}
	if f.FeatureUpgrade != "" {
		where = append(where, `feature_upgrade = `+a.add(f.FeatureUpgrade))
	}
	if f.After != nil {
		where = append(where, `(hostname, id) > (`+a.add(f.After.Hostname)+`, `+a.add(f.After.ID)+`)`)
	}
	query := a.selectWhere(`SELECT `+agentColumns+` FROM agents`, where, `hostname, id`, f.Limit)
	return queryAll(ctx, s.rq(), scanAgent, query, a...)
}

// sqlAgentCredential selects what authenticates an agent: every agent
// request runs it.
const sqlAgentCredential = `SELECT credential_hash, removed_at FROM agents WHERE id = ?`

// FindAgentCredential implements device.AgentStore.
func (s *Store) FindAgentCredential(ctx context.Context, id string) (*device.AgentCredential, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("find agent credential %s: %w", id, err)
	}
	c := device.AgentCredential{AgentID: id}
	var removed *int64
	qctx := ctx
	if s.d.unwatched {
		// One row by its key takes microseconds: it is not worth the two
		// goroutines that watch a context that can end (database/sql's
		// and the driver's), on every agent request.
		qctx = context.WithoutCancel(ctx)
	}
	err := s.rq().QueryRow(qctx, sqlAgentCredential, id).Scan(&c.Hash, &removed)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("agent", id)
	}
	if err != nil {
		return nil, fmt.Errorf("find agent credential %s: %w", id, err)
	}
	c.RemovedAt = fromNullMS(removed)
	return &c, nil
}

// SetAgentRing implements device.AgentStore.
func (s *Store) SetAgentRing(ctx context.Context, id, ring string) (_ *device.Agent, err error) {
	defer errs.Wrap(&err, "set ring of agent %s", id)
	return writeResult(ctx, s, func(tx querier) (*device.Agent, error) {
		a, err := findLiveAgent(ctx, tx, id, s.d.lockRow)
		if err != nil {
			return nil, err
		}
		if ring != "" {
			if _, err := findRing(ctx, tx, ring); errors.Is(err, errs.ErrNotFound) {
				return nil, errs.Invalidf("there is no ring %q", ring)
			} else if err != nil {
				return nil, err
			}
		}
		a.Ring, a.RingSource = ring, device.RingSourceManual
		_, err = tx.Exec(ctx, `UPDATE agents SET ring = ?, ring_source = 'manual' WHERE id = ?`, nullString(ring), a.ID)
		return a, err
	})
}

// SetAgentRingByRule implements device.AgentStore.
func (s *Store) SetAgentRingByRule(ctx context.Context, id string) (_ *device.Agent, err error) {
	defer errs.Wrap(&err, "set ring of agent %s by rule", id)
	return writeResult(ctx, s, func(tx querier) (*device.Agent, error) {
		a, err := findLiveAgent(ctx, tx, id, s.d.lockRow)
		if err != nil {
			return nil, err
		}
		rings, err := findRings(ctx, tx)
		if err != nil {
			return nil, err
		}
		a.Ring, a.RingSource = device.RingFor(rings, a.Hostname, a.OS), device.RingSourceRule
		_, err = tx.Exec(ctx, `UPDATE agents SET ring = ?, ring_source = 'rule' WHERE id = ?`, nullString(a.Ring), a.ID)
		return a, err
	})
}

// reassignRings moves every agent whose ring follows the rules to the ring
// the current rules choose, in id order so that two of them lock rows in
// the same order.
func reassignRings(ctx context.Context, tx querier) error {
	rings, err := findRings(ctx, tx)
	if err != nil {
		return err
	}
	moves := map[string]string{}
	err = eachRow(ctx, tx, func(row scanner) error {
		var id, hostname, ring string
		var os device.OS
		if err := row.Scan(&id, &hostname, &os.Platform, &os.Name, &ring); err != nil {
			return err
		}
		if want := device.RingFor(rings, hostname, os); want != ring {
			moves[id] = want
		}
		return nil
	}, `SELECT id, hostname, os_platform, os_name, coalesce(ring, '') FROM agents WHERE ring_source = 'rule' AND removed_at IS NULL`)
	if err != nil {
		return err
	}
	ids := make([]string, 0, len(moves))
	for id := range moves {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if _, err := tx.Exec(ctx, `UPDATE agents SET ring = ? WHERE id = ?`, nullString(moves[id]), id); err != nil {
			return err
		}
	}
	return nil
}

// RemoveAgent implements device.AgentStore.
func (s *Store) RemoveAgent(ctx context.Context, id string, cmd *device.Command) (err error) {
	defer errs.Wrap(&err, "remove agent %s", id)
	return s.write(ctx, func(tx querier) error {
		now := ms(cmd.CreatedAt)
		tag, err := tx.Exec(ctx, `UPDATE agents SET removed_at = ? WHERE id = ? AND removed_at IS NULL`, now, id)
		if err != nil {
			return err
		}
		if rowsAffected(tag) == 0 {
			return notFound("agent", id)
		}
		result, _ := json.Marshal(device.Result{Message: "canceled: the agent was removed"})
		if _, err := tx.Exec(ctx, `UPDATE commands SET state = 'canceled', result = ?, updated_at = ?
			WHERE agent_id = ? AND state IN ('queued', 'delivered')`, string(result), now, id); err != nil {
			return err
		}
		if err := s.settleRollouts(ctx, tx, "", cmd.CreatedAt); err != nil {
			return err
		}
		return s.insertCommand(ctx, tx, cmd)
	})
}

func scanAgent(row scanner) (*device.Agent, error) {
	var a device.Agent
	var ring, secretID *string
	var enrolled, lastSeen int64
	var removed *int64
	var ips, inv, applied string
	if err := row.Scan(&a.ID, &a.Hostname, &a.OS.Platform, &a.OS.Name, &a.OS.Version, &a.OS.Build, &a.Arch,
		&a.AgentVersion, &a.Capability, &ips, &ring, &secretID, &a.CredentialHash, &enrolled, &lastSeen, &inv,
		&a.FeatureUpgrade.State, &a.FeatureUpgrade.Target, &applied, &a.RebootPending, &removed, &a.RingSource, &a.InventoryHash); err != nil {
		return nil, err
	}
	a.Ring, a.EnrollSecretID = str(ring), str(secretID)
	a.EnrolledAt, a.LastSeenAt = fromMS(enrolled), fromMS(lastSeen)
	a.RemovedAt = fromNullMS(removed)
	if err := json.Unmarshal([]byte(ips), &a.IPs); err != nil {
		return nil, fmt.Errorf("agent %s ips: %w", a.ID, err)
	}
	if err := json.Unmarshal([]byte(inv), &a.Inventory); err != nil {
		return nil, fmt.Errorf("agent %s inventory: %w", a.ID, err)
	}
	if err := json.Unmarshal([]byte(applied), &a.AppliedPolicies); err != nil {
		return nil, fmt.Errorf("agent %s applied policies: %w", a.ID, err)
	}
	return &a, nil
}
