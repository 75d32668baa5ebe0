package wakeup

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pgChannel is the NOTIFY channel of rings.
const pgChannel = "patchline_wakeup"

// maxPayload bounds the agent ids of one notification: PostgreSQL takes
// payloads of less than 8,000 bytes.
const maxPayload = 7000

// PGBell rings agents on every replica that shares a PostgreSQL control
// database: a ring is a NOTIFY on the database, and each replica's Run
// LISTENs and wakes the waits of its Hub.
type PGBell struct {
	hub    *Hub
	dsn    string
	pool   *pgxpool.Pool // sends the notifications
	logger *slog.Logger

	readyOnce sync.Once
	ready     chan struct{}
}

// NewPGBell returns a bell over the PostgreSQL database of dsn that wakes
// the waits of hub. Run must run for rings of other replicas to arrive.
func NewPGBell(ctx context.Context, dsn string, hub *Hub, logger *slog.Logger) (*PGBell, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("wakeup: %w", err)
	}
	cfg.MaxConns = 2
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("wakeup: %w", err)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &PGBell{hub: hub, dsn: dsn, pool: pool, logger: logger, ready: make(chan struct{})}, nil
}

// Ring implements Bell: one NOTIFY per 7,000 bytes of agent ids.
func (b *PGBell) Ring(ctx context.Context, agentIDs []string) {
	for len(agentIDs) > 0 {
		n, size := 0, 0
		for n < len(agentIDs) && (n == 0 || size+len(agentIDs[n])+1 <= maxPayload) {
			size += len(agentIDs[n]) + 1
			n++
		}
		payload := strings.Join(agentIDs[:n], ",")
		agentIDs = agentIDs[n:]
		if _, err := b.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, pgChannel, payload); err != nil {
			b.logger.Warn("wakeup: ring through PostgreSQL failed: the agents take their commands at their next check-in", "err", err)
			return
		}
	}
}

// Ready is closed once Run listens for the first time.
func (b *PGBell) Ready() <-chan struct{} { return b.ready }

// Run listens for the rings of every replica until ctx is done, and wakes
// the waits of the hub they name. When the connection breaks it connects
// again, backing off up to 30 seconds, and then wakes every wait of the
// hub so that each asks again whether a command came meanwhile.
func (b *PGBell) Run(ctx context.Context) {
	backoff := time.Second
	for ctx.Err() == nil {
		listened, err := b.listen(ctx)
		if ctx.Err() != nil {
			return
		}
		if listened {
			backoff = time.Second
		}
		b.logger.Warn("wakeup: listening on PostgreSQL failed: agents get their commands at their check-ins until it is back", "err", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

// listen listens until the connection fails; it reports whether it got
// as far as listening.
func (b *PGBell) listen(ctx context.Context) (bool, error) {
	conn, err := pgx.Connect(ctx, b.dsn)
	if err != nil {
		return false, err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+pgChannel); err != nil {
		return false, err
	}
	// A ring sent while no connection listened is lost: every wait asks
	// the store again.
	b.hub.RingAll()
	b.readyOnce.Do(func() { close(b.ready) })
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true, err
		}
		b.hub.Ring(ctx, strings.Split(n.Payload, ","))
	}
}

// Close closes the connections that send rings.
func (b *PGBell) Close() { b.pool.Close() }
