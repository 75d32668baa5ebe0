// Package control names what the control service needs from its store.
//
// The store itself lives in internal/control/sqlstore, one implementation
// over SQLite (one database file, for a single replica) and PostgreSQL (one
// database shared by any number of serve replicas). It passes the suite of
// internal/control/controltest on both.
package control

import (
	"context"
	"time"

	"github.com/patchline/patchline/internal/admin"
	"github.com/patchline/patchline/internal/alert"
	"github.com/patchline/patchline/internal/apikey"
	"github.com/patchline/patchline/internal/audit"
	"github.com/patchline/patchline/internal/device"
	"github.com/patchline/patchline/internal/exposure"
)

// Store is the control store: every store of the control API, the agent
// protocol, the console and the exposure service, in one database.
type Store interface {
	device.AgentStore
	device.CommandStore
	device.RingStore
	device.RolloutStore
	device.PolicyStore
	device.EnrollSecretStore
	apikey.KeyStore
	audit.Log
	admin.Store
	admin.FirstAdminCreator
	admin.SessionStore
	admin.TOTPStore
	exposure.Store
	alert.Store

	// ExpireCommands moves every active command past its expiry to
	// Expired and returns how many it moved.
	ExpireCommands(ctx context.Context, now time.Time) (int, error)

	// Ping checks that the database answers.
	Ping(ctx context.Context) error

	// Close closes the database.
	Close() error
}
