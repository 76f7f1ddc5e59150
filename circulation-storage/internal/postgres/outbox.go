package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/checkoutlock/circulation-storage/relay"
)

// OutboxChannel is the channel a commit's events are announced on.
const OutboxChannel = "checkout_outbox"

// relayLockKey is the advisory lock the relay holds: one instance of all
// those on the database publishes at a time.
const relayLockKey = 0x6f7574626f78 // "outbox"

// Outbox is the relay's store (relay.Store) on the shared tables. Leading
// takes a connection of its own, outside the pools: the relay's advisory
// lock lives as long as that session, so an instance that loses its
// connection loses the lead with it, and another takes over.
type Outbox struct {
	connString string
}

var _ relay.Store = (*Outbox)(nil)

// NewOutbox returns the relay's store on the database at connString.
func NewOutbox(connString string) *Outbox { return &Outbox{connString: connString} }

// Lead implements relay.Store.
func (o *Outbox) Lead(ctx context.Context) (relay.Leader, bool, error) {
	cfg, err := pgx.ParseConfig(o.connString)
	if err != nil {
		return nil, false, fmt.Errorf("parse database connection string: %w", redact(err))
	}
	cfg.RuntimeParams["application_name"] = "circulation-storage-relay"
	cfg.ConnectTimeout = connectTimeout(cfg.ConnectTimeout)
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, false, redact(err)
	}
	var leading bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, int64(relayLockKey)).Scan(&leading); err != nil {
		conn.Close(context.Background())
		return nil, false, err
	}
	if !leading {
		conn.Close(context.Background())
		return nil, false, nil
	}
	if _, err := conn.Exec(ctx, `LISTEN `+OutboxChannel); err != nil {
		conn.Close(context.Background())
		return nil, false, err
	}
	return &outboxLeader{conn: conn}, true, nil
}

// outboxLeader is the store as the leading relay uses it, on the session
// that holds the lead.
type outboxLeader struct {
	conn *pgx.Conn
}

var (
	pendingSQL = withTables(`SELECT tenant_id, seq, id::text, kind, type, created_at, data FROM %s
 WHERE published_at IS NULL AND seq IS NOT NULL ORDER BY tenant_id, seq LIMIT $1`, tableOutbox)
	markSQL = withTables(`UPDATE %s SET published_at = now()
 WHERE tenant_id = $1 AND seq <= $2 AND published_at IS NULL`, tableOutbox)
	backlogSQL = withTables(`SELECT count(*), min(created_at) FROM %s WHERE published_at IS NULL AND seq IS NOT NULL`, tableOutbox)
	trimSQL    = withTables(`DELETE FROM %s WHERE published_at < $1`, tableOutbox)
)

// Pending implements relay.Leader.
func (l *outboxLeader) Pending(ctx context.Context, limit int) ([]relay.Event, error) {
	rows, err := l.conn.Query(ctx, pendingSQL, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (relay.Event, error) {
		var e relay.Event
		var data json.RawMessage
		err := row.Scan(&e.Tenant, &e.Seq, &e.ID, &e.Kind, &e.Type, &e.At, &data)
		e.Data = data
		return e, err
	})
}

// Published implements relay.Leader.
func (l *outboxLeader) Published(ctx context.Context, tenant string, upTo int64) error {
	_, err := l.conn.Exec(ctx, markSQL, tenant, upTo)
	return err
}

// Backlog implements relay.Leader.
func (l *outboxLeader) Backlog(ctx context.Context) (int, time.Time, error) {
	var n int
	var oldest *time.Time
	if err := l.conn.QueryRow(ctx, backlogSQL).Scan(&n, &oldest); err != nil {
		return 0, time.Time{}, err
	}
	if oldest == nil {
		return n, time.Time{}, nil
	}
	return n, *oldest, nil
}

// Trim implements relay.Leader.
func (l *outboxLeader) Trim(ctx context.Context, before time.Time) (int64, error) {
	tag, err := l.conn.Exec(ctx, trimSQL, before)
	return tag.RowsAffected(), err
}

// Wait implements relay.Leader: until a commit announces events, or d.
func (l *outboxLeader) Wait(ctx context.Context, d time.Duration) error {
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	_, err := l.conn.WaitForNotification(wctx)
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		return nil
	}
	return err
}

// Close implements relay.Leader: the session ends, and the lead with it.
func (l *outboxLeader) Close() { _ = l.conn.Close(context.Background()) }
