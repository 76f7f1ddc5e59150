package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/checkoutlock/circulation-storage/relay"
)

// OutboxChannel is the channel instances wake the relay on when they have
// written events.
const OutboxChannel = "checkout_outbox"

// maxAnnounced bounds the tenants a leader remembers being told of between
// two waits; the relay looks at every tenant every second anyway.
const maxAnnounced = 10000

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
	// As the pools: plans made for every tenant at once go by the indexes,
	// whatever the statistics of the shared tables say.
	cfg.RuntimeParams["enable_seqscan"] = "off"
	// The relay writes its published marks and trims: a mark lost in a
	// crash only has events published again, which the broker drops.
	cfg.RuntimeParams["synchronous_commit"] = "off"
	cfg.ConnectTimeout = connectTimeout(cfg.ConnectTimeout)
	leader := &outboxLeader{}
	cfg.OnNotification = func(_ *pgconn.PgConn, n *pgconn.Notification) {
		if len(leader.announced) < maxAnnounced {
			leader.announced = append(leader.announced, strings.Split(n.Payload, ",")...)
		}
	}
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
	leader.conn = conn
	return leader, true, nil
}

// outboxLeader is the store as the leading relay uses it, on the session
// that holds the lead. Its statements each go by one index, with no join
// the planner could order badly: the shared tables grow from empty, and a
// plan made while they were small is kept by the session.
type outboxLeader struct {
	conn *pgx.Conn
	// announced are the tenants named by notifications not yet waited
	// for (pgx hands them over during any statement).
	announced []string
}

var (
	marksSQL    = withTables(`SELECT tenant_id, published FROM %s`, tableOutboxPublished)
	numberedSQL = withTables(`SELECT tenant_id, numbered FROM %s`, tableOutboxTenant)
	// firstCommitSQL is the number of the tenant's ($1) commit holding
	// the event numbered after $2.
	firstCommitSQL = `coalesce((SELECT max(seq) FROM %[2]s WHERE tenant_id = $1 AND seq <= $2 + 1), 1)`
	// eventsSQL reads up to $3 of the tenant's events numbered after $2:
	// the commits from the one holding the next event on, each one's
	// events in the order they were recorded.
	eventsSQL = withTables(`
SELECT e.tenant_id, c.seq + e.k - 1, e.id::text, e.kind, e.type, e.created_at, e.data
  FROM (SELECT seq, xid FROM %[2]s WHERE tenant_id = $1 AND seq >= `+firstCommitSQL+` ORDER BY seq LIMIT $3) c
 CROSS JOIN LATERAL (SELECT tenant_id, id, kind, type, created_at, data, row_number() OVER (ORDER BY pos) AS k
                       FROM %[1]s WHERE tenant_id = $1 AND xid = c.xid) e
 WHERE c.seq + e.k - 1 > $2
 ORDER BY 2 LIMIT $3`, tableOutbox, tableOutboxCommit)
	oldestSQL = withTables(`SELECT committed_at FROM %[2]s WHERE tenant_id = $1 AND seq >= `+firstCommitSQL+` ORDER BY seq LIMIT 1`,
		tableOutbox, tableOutboxCommit)
	markSQL = withTables(`INSERT INTO %s AS p (tenant_id, published) VALUES ($1, $2)
ON CONFLICT (tenant_id) DO UPDATE SET published = EXCLUDED.published`, tableOutboxPublished)
	// oldCommitsSQL reads the tenant's oldest commits.
	oldCommitsSQL = withTables(`SELECT seq, events, committed_at FROM %s WHERE tenant_id = $1 ORDER BY seq LIMIT $2`, tableOutboxCommit)
	// trimSQL deletes the tenant's commits numbered before $2, and their
	// events.
	trimSQL = withTables(`
WITH gone AS (DELETE FROM %[2]s WHERE tenant_id = $1 AND seq < $2 RETURNING xid)
DELETE FROM %[1]s WHERE tenant_id = $1 AND xid = ANY(ARRAY(SELECT xid FROM gone))`, tableOutbox, tableOutboxCommit)
)

// trimBatch is the most commits one trimming statement deletes.
const trimBatch = 1000

// Marks implements relay.Leader.
func (l *outboxLeader) Marks(ctx context.Context) (map[string]int64, error) {
	return l.perTenant(ctx, marksSQL)
}

// Numbered implements relay.Leader.
func (l *outboxLeader) Numbered(ctx context.Context) (map[string]int64, error) {
	return l.perTenant(ctx, numberedSQL)
}

func (l *outboxLeader) perTenant(ctx context.Context, sql string) (map[string]int64, error) {
	rows, err := l.conn.Query(ctx, sql)
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	var tenant string
	var n int64
	_, err = pgx.ForEachRow(rows, []any{&tenant, &n}, func() error { out[tenant] = n; return nil })
	return out, err
}

// Events implements relay.Leader.
func (l *outboxLeader) Events(ctx context.Context, tenant string, after int64, limit int) ([]relay.Event, error) {
	rows, err := l.conn.Query(ctx, eventsSQL, tenant, after, limit)
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

// Oldest implements relay.Leader.
func (l *outboxLeader) Oldest(ctx context.Context, tenant string, after int64) (time.Time, error) {
	var at time.Time
	err := l.conn.QueryRow(ctx, oldestSQL, tenant, after).Scan(&at)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, nil
	}
	return at, err
}

// Trim implements relay.Leader: the oldest commits go while they are
// published and committed before before (a tenant's commits are numbered
// in the order of their commit times).
func (l *outboxLeader) Trim(ctx context.Context, tenant string, upTo int64, before time.Time) (int64, error) {
	var total int64
	for limit := 1; ; limit = trimBatch {
		rows, err := l.conn.Query(ctx, oldCommitsSQL, tenant, limit)
		if err != nil {
			return total, err
		}
		var seq int64
		var events int32
		var at time.Time
		var until int64 // the first commit that stays
		read, stop := 0, false
		if _, err := pgx.ForEachRow(rows, []any{&seq, &events, &at}, func() error {
			read++
			if !stop && (seq+int64(events)-1 > upTo || !at.Before(before)) {
				stop = true
			}
			if !stop {
				until = seq + int64(events)
			}
			return nil
		}); err != nil {
			return total, err
		}
		if until > 0 && limit == trimBatch {
			tag, err := l.conn.Exec(ctx, trimSQL, tenant, until)
			if err != nil {
				return total, err
			}
			total += tag.RowsAffected()
		}
		if stop || read < limit || (limit == 1 && until == 0) {
			return total, nil
		}
	}
}

// Wait implements relay.Leader: until an instance announces events, or d,
// or ctx ends (which is not an error unless the relay's own context ended:
// the relay wakes itself that way when this instance wrote events).
func (l *outboxLeader) Wait(ctx context.Context, d time.Duration) ([]string, error) {
	if len(l.announced) == 0 {
		wctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		if _, err := l.conn.WaitForNotification(wctx); err != nil && (wctx.Err() == nil || l.conn.IsClosed()) {
			return nil, err
		}
	}
	tenants := l.announced
	l.announced = nil
	return tenants, nil
}

// Close implements relay.Leader: the session ends, and the lead with it.
func (l *outboxLeader) Close() { _ = l.conn.Close(context.Background()) }

// AnnounceOutbox wakes the leading relay, wherever it runs: this instance
// committed the tenants' events. The notification is a statement of its
// own, after the writes' commits, so that they take no part in
// PostgreSQL's serialising of notifying commits.
func (db *DB) AnnounceOutbox(ctx context.Context, tenants []string) error {
	// A notification's payload holds less than 8000 bytes.
	var payloads []string
	var b strings.Builder
	for _, t := range tenants {
		if b.Len() > 0 && b.Len()+1+len(t) > 7000 {
			payloads = append(payloads, b.String())
			b.Reset()
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(t)
	}
	if b.Len() > 0 {
		payloads = append(payloads, b.String())
	}
	if len(payloads) == 0 {
		return nil
	}
	_, err := db.lockPool.Exec(ctx, `SELECT pg_notify('`+OutboxChannel+`', p) FROM unnest($1::text[]) p`, payloads)
	return err
}
