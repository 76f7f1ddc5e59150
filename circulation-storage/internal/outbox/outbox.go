// Package outbox delivers what happened in circulation-storage: the
// relay's store (Outbox: leading, numbering the committed events in commit
// order, reading and trimming them). The lock releases' listener is
// package waiting's.
package outbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/circulation-storage/relay"
	"github.com/jackc/pgx/v5"
)

// OutboxChannel is the channel instances wake the relay on when they have
// written events.
const OutboxChannel = "checkout_outbox"

// relayLockKey is the advisory lock the relay holds: one instance of all
// those on the database publishes at a time.
const relayLockKey = 0x6f7574626f78 // "outbox"

// Outbox is the relay's store (relay.Store) on the shared tables. Leading
// takes a connection of its own, outside the pools: the relay's advisory
// lock lives as long as that session, so an instance that loses its
// connection loses the lead with it, and another takes over. The session
// lives only while it is used: PostgreSQL ends it once it has been idle for
// the lead timeout (idle_session_timeout, and
// idle_in_transaction_session_timeout within a transaction), so a leader
// that stops answering without closing its connection (frozen, paused,
// swapping) loses the lead too. An instance that does not lead keeps its
// connection for its next try.
type Outbox struct {
	connString  string
	leadTimeout time.Duration
	idle        *pgx.Conn
}

var _ relay.Store = (*Outbox)(nil)

// NewOutbox returns the relay's store on the database at connString, whose
// sessions end after leadTimeout idle.
func NewOutbox(connString string, leadTimeout time.Duration) *Outbox {
	return &Outbox{connString: connString, leadTimeout: leadTimeout}
}

// Lead implements relay.Store.
func (o *Outbox) Lead(ctx context.Context) (relay.Leader, bool, error) {
	conn := o.idle
	o.idle = nil
	if conn == nil || conn.IsClosed() {
		var err error
		if conn, err = o.connect(ctx); err != nil {
			return nil, false, err
		}
	}
	var leading bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, int64(relayLockKey)).Scan(&leading); err != nil {
		conn.Close(context.Background())
		return nil, false, err
	}
	if !leading {
		o.idle = conn
		return nil, false, nil
	}
	if _, err := conn.Exec(ctx, `LISTEN `+OutboxChannel); err != nil {
		conn.Close(context.Background())
		return nil, false, err
	}
	return &outboxLeader{conn: conn}, true, nil
}

// Behind implements relay.Store: what the leader's Waiting and Oldest say
// together, read by an instance that does not lead, from the published
// marks the leader stored (at most a round behind what it published). A
// leader that fell silent publishes nothing and stores no mark: the age
// every other instance reports grows.
func (o *Outbox) Behind(ctx context.Context) (int64, time.Time, error) {
	conn := o.idle
	if conn == nil || conn.IsClosed() {
		var err error
		if conn, err = o.connect(ctx); err != nil {
			return 0, time.Time{}, err
		}
		o.idle = conn
	}
	var n int64
	var oldest *time.Time
	if err := conn.QueryRow(ctx, behindSQL).Scan(&n, &oldest); err != nil {
		o.Close()
		return 0, time.Time{}, notSetUp(err)
	}
	if oldest == nil {
		return n, time.Time{}, nil
	}
	return n, *oldest, nil
}

// Close closes the connection kept between tries to lead.
func (o *Outbox) Close() {
	if o.idle != nil {
		_ = o.idle.Close(context.Background())
		o.idle = nil
	}
}

// connect opens the relay's session.
func (o *Outbox) connect(ctx context.Context) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(o.connString)
	if err != nil {
		return nil, fmt.Errorf("parse database connection string: %w", postgres.Redact(err))
	}
	cfg.RuntimeParams["application_name"] = "circulation-storage-relay"
	// As the pools: plans made for every tenant at once go by the indexes,
	// whatever the statistics of the shared tables say.
	cfg.RuntimeParams["enable_seqscan"] = "off"
	// Its statements are the same every round, each by one index: planned
	// once, not again for each round's arrays of commits.
	cfg.RuntimeParams["plan_cache_mode"] = "force_generic_plan"
	// The relay's published marks and trims need not wait for the disk:
	// a mark lost in a crash only has events published again, which the
	// broker drops. Its numbers given must be on disk before they are
	// published: Number waits for that (durable), without a flush of its
	// own while the writes' commits flush the WAL.
	cfg.RuntimeParams["synchronous_commit"] = "off"
	// The lead lasts while the session is used; see Outbox.
	timeout := strconv.FormatInt(o.leadTimeout.Milliseconds(), 10)
	cfg.RuntimeParams["idle_session_timeout"] = timeout
	cfg.RuntimeParams["idle_in_transaction_session_timeout"] = timeout
	cfg.ConnectTimeout = postgres.ConnectTimeout(cfg.ConnectTimeout)
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, postgres.Redact(err)
	}
	return conn, nil
}

// outboxLeader is the store as the leading relay uses it, on the session
// that holds the lead. Its statements each go by one index, with no join
// the planner could order badly: the shared tables grow from empty, and a
// plan made while they were small is kept by the session.
type outboxLeader struct {
	conn *pgx.Conn
}

var (
	progressSQL   = postgres.WithTables(`SELECT tenant_id, numbered, published FROM %s`, postgres.TableOutboxTenant)
	unnumberedSQL = postgres.WithTables(`SELECT pos, tenant_id, events FROM %s WHERE seq IS NULL ORDER BY pos LIMIT $1`, postgres.TableOutboxCommit)
	// numberSQL gives the commits at @positions their first numbers
	// (@firsts), and stores the @tenants' last numbers given (@lasts);
	// when @read, it returns the commits' events, numbered, in
	// eventsSQL's columns, in no order (Number sorts them, where sorting
	// costs the database a work area every round). Its commit does not wait for the disk (the
	// session's synchronous_commit is off): Number waits for it after
	// (durableSQL), as numbers published and then lost in a crash could be
	// given again to other events.
	numberSQL = postgres.WithTables(`
WITH given AS (
    INSERT INTO %[3]s AS t (tenant_id, numbered) SELECT * FROM unnest(@tenants::text[], @lasts::bigint[])
    ON CONFLICT (tenant_id) DO UPDATE SET numbered = EXCLUDED.numbered
), numbered AS (
    UPDATE %[2]s SET seq = (@firsts::bigint[])[array_position(@positions::bigint[], pos)]
     WHERE seq IS NULL AND pos = ANY(@positions::bigint[])
    RETURNING tenant_id, xid, seq, committed_at, payload
)
SELECT n.tenant_id, n.seq + e.k - 1, e.id, e.kind, e.type, e.at, e.old, e.new
  FROM numbered n
 CROSS JOIN LATERAL (`+commitEventsSQL+`) e
 WHERE @read::boolean`,
		postgres.TableOutbox, postgres.TableOutboxCommit, postgres.TableOutboxTenant)
	// firstCommitSQL is the number of the tenant's ($1) commit holding
	// the event numbered after $2.
	firstCommitSQL = `coalesce((SELECT max(seq) FROM %[2]s WHERE tenant_id = $1 AND seq <= $2 + 1), 1)`
	// eventsSQL reads up to $3 of the tenant's events numbered after $2:
	// the commits from the one holding the next event on, each one's
	// events in the order they were recorded.
	eventsSQL = postgres.WithTables(`
SELECT n.tenant_id, n.seq + e.k - 1, e.id, e.kind, e.type, e.at, e.old, e.new
  FROM (SELECT tenant_id, seq, xid, committed_at, payload FROM %[2]s
         WHERE tenant_id = $1 AND seq >= `+firstCommitSQL+` ORDER BY seq LIMIT $3) n
 CROSS JOIN LATERAL (`+commitEventsSQL+`) e
 WHERE n.seq + e.k - 1 > $2
 ORDER BY 2 LIMIT $3`, postgres.TableOutbox, postgres.TableOutboxCommit)
	oldestSQL = postgres.WithTables(`SELECT committed_at FROM %[2]s WHERE tenant_id = $1 AND seq >= `+firstCommitSQL+` ORDER BY seq LIMIT 1`,
		postgres.TableOutbox, postgres.TableOutboxCommit)
	waitingSQL = postgres.WithTables(`SELECT coalesce(sum(events), 0), min(committed_at) FROM %s WHERE seq IS NULL`, postgres.TableOutboxCommit)
	// behindSQL is waitingSQL, plus each tenant's events numbered and not
	// published, and the oldest of those (oldestSQL's, tenant by tenant).
	behindSQL = postgres.WithTables(`
WITH behind AS (
    SELECT t.numbered - t.published AS events,
           (SELECT c.committed_at FROM %[2]s c
             WHERE c.tenant_id = t.tenant_id
               AND c.seq >= coalesce((SELECT max(seq) FROM %[2]s WHERE tenant_id = t.tenant_id AND seq <= t.published + 1), 1)
             ORDER BY c.seq LIMIT 1) AS oldest
      FROM %[1]s t WHERE t.numbered > t.published
), waiting AS (
    SELECT coalesce(sum(events), 0) AS events, min(committed_at) AS oldest FROM %[2]s WHERE seq IS NULL
)
SELECT (w.events + coalesce((SELECT sum(events) FROM behind), 0))::bigint, least(w.oldest, (SELECT min(oldest) FROM behind))
  FROM waiting w`, postgres.TableOutboxTenant, postgres.TableOutboxCommit)
	// markSQL stores the tenants' ($1) published marks ($2).
	markSQL = postgres.WithTables(`
UPDATE %s t SET published = m.published FROM unnest($1::text[], $2::bigint[]) AS m (tenant_id, published)
 WHERE t.tenant_id = m.tenant_id`, postgres.TableOutboxTenant)
	// oldCommitsSQL reads the tenant's oldest commits.
	oldCommitsSQL = postgres.WithTables(`SELECT seq, events, committed_at FROM %s WHERE tenant_id = $1 AND seq IS NOT NULL ORDER BY seq LIMIT $2`,
		postgres.TableOutboxCommit)
	// trimSQL deletes the tenant's commits numbered before $2, and the
	// events of those that kept them in rows of their own.
	trimSQL = postgres.WithTables(`
WITH gone AS (DELETE FROM %[2]s WHERE tenant_id = $1 AND seq < $2 RETURNING xid, payload IS NULL AS apart)
DELETE FROM %[1]s WHERE tenant_id = $1 AND xid = ANY(ARRAY(SELECT xid FROM gone WHERE apart))`, postgres.TableOutbox, postgres.TableOutboxCommit)
)

// The relay's numbering is on disk once the WAL is flushed past its
// commit. Under load the writes' own commits have often flushed it by the
// time the relay asks; when they have not, or when a synchronous standby
// must have it too (synchronous_standby_names set: only a commit that
// waits for it knows), the relay commits a transaction of its own that
// waits for the disk and the standbys, and so for everything before it, at
// once: waiting for a write to flush it instead costs an event the time
// between two writes, where a flush of its own costs one flush, shared
// with any write flushing meanwhile (PostgreSQL's group commit).
//
// durableSQL does both in one round trip. Only a transaction that wrote
// to the WAL waits for the disk at its commit (one that was merely given
// an id does not), so the one that must wait writes a logical message
// (prefix checkout_outbox, empty; logical decoding sees it, nothing else
// does); it does so only when the WAL is not on disk up to its end, which
// is past the session's last commit.
const durableSQL = `SELECT CASE WHEN pg_current_wal_flush_lsn() >= pg_current_wal_insert_lsn()
                        AND current_setting('synchronous_standby_names') = '' THEN 'on disk'
                   ELSE set_config('synchronous_commit', 'on', true) || ' ' ||
                        pg_logical_emit_message(true, '` + OutboxChannel + `', '')::text END`

// commitEventsSQL is a commit's (n: tenant_id, xid, committed_at,
// payload) events, each with its place k among them: from its payload
// when it recorded them there (a check-out's write), else from its rows
// of the outbox (%[1]s), in the order they were recorded. Columns: id,
// kind, type, at, old, new, k.
const commitEventsSQL = `
    SELECT e.id::text AS id, e.kind, e.type, n.committed_at AS at, e.old, e.new, e.k
      FROM unnest(n.payload) WITH ORDINALITY AS e (id, kind, type, old, new, k)
     WHERE n.payload IS NOT NULL
    UNION ALL
    SELECT o.id::text, o.kind, o.type, o.created_at, o.data -> 'old', o.data -> 'new', row_number() OVER (ORDER BY o.pos)
      FROM %[1]s o
     WHERE n.payload IS NULL AND o.tenant_id = n.tenant_id AND o.xid = n.xid`

// trimBatch is the most commits one trimming statement deletes.
const trimBatch = 1000

// Progress implements relay.Leader.
func (l *outboxLeader) Progress(ctx context.Context) (map[string]relay.Progress, error) {
	rows, err := l.conn.Query(ctx, progressSQL)
	if err != nil {
		return nil, notSetUp(err)
	}
	out := map[string]relay.Progress{}
	var tenant string
	var p relay.Progress
	_, err = pgx.ForEachRow(rows, []any{&tenant, &p.Numbered, &p.Published}, func() error { out[tenant] = p; return nil })
	return out, notSetUp(err)
}

// notSetUp is err, marked relay.ErrNotSetUp when it is the shared tables'
// absence: no tenant was initialised on this database yet.
func notSetUp(err error) error {
	if postgres.TablesMissing(err) {
		return fmt.Errorf("%w: %w", relay.ErrNotSetUp, err)
	}
	return err
}

// Unnumbered implements relay.Leader: the marks and the read go in one
// round trip, and one transaction.
func (l *outboxLeader) Unnumbered(ctx context.Context, limit int, published map[string]int64) ([]relay.Commit, error) {
	b := &pgx.Batch{}
	if len(published) > 0 {
		tenants, marks := splitMarks(published)
		b.Queue(markSQL, tenants, marks)
	}
	var commits []relay.Commit
	b.Queue(unnumberedSQL, limit).Query(func(rows pgx.Rows) error {
		var err error
		commits, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (relay.Commit, error) {
			var c relay.Commit
			err := row.Scan(&c.Pos, &c.Tenant, &c.Events)
			return c, err
		})
		return err
	})
	return commits, l.conn.SendBatch(ctx, b).Close()
}

// splitMarks is the tenants and their numbers, in two arrays.
func splitMarks(m map[string]int64) ([]string, []int64) {
	tenants, numbers := make([]string, 0, len(m)), make([]int64, 0, len(m))
	for t, n := range m {
		tenants, numbers = append(tenants, t), append(numbers, n)
	}
	return tenants, numbers
}

// Number implements relay.Leader.
func (l *outboxLeader) Number(ctx context.Context, commits []relay.Commit, numbered map[string]int64, read bool) ([]relay.Event, error) {
	tenants, lasts := splitMarks(numbered)
	positions, firsts := make([]int64, len(commits)), make([]int64, len(commits))
	for i, c := range commits {
		positions[i], firsts[i] = c.Pos, c.Seq
	}
	rows, err := l.conn.Query(ctx, numberSQL, pgx.StrictNamedArgs{"tenants": tenants, "lasts": lasts, "positions": positions,
		"firsts": firsts, "read": read})
	if err != nil {
		return nil, err
	}
	// The rows are read before the commit; CollectRows returns after it,
	// with its error if it failed.
	events, err := pgx.CollectRows(rows, scanEvent)
	if err != nil {
		return nil, err
	}
	if err := l.durable(ctx); err != nil {
		return nil, fmt.Errorf("wait for the numbers to reach the disk: %w", err)
	}
	slices.SortFunc(events, func(a, b relay.Event) int {
		return cmp.Or(strings.Compare(a.Tenant, b.Tenant), cmp.Compare(a.Seq, b.Seq))
	})
	return events, nil
}

// durable returns once the session's last commit is on disk (and with the
// synchronous standbys, when there are any).
func (l *outboxLeader) durable(ctx context.Context) error {
	var how string
	return l.conn.QueryRow(ctx, durableSQL).Scan(&how)
}

// Events implements relay.Leader.
func (l *outboxLeader) Events(ctx context.Context, tenant string, after int64, limit int) ([]relay.Event, error) {
	rows, err := l.conn.Query(ctx, eventsSQL, tenant, after, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, scanEvent)
}

// scanEvent reads an event in eventsSQL's columns. The states are taken
// as the database sends them (a json.RawMessage would be parsed whole, to
// be checked, for every event).
func scanEvent(row pgx.CollectableRow) (relay.Event, error) {
	var e relay.Event
	var old, new []byte
	err := row.Scan(&e.Tenant, &e.Seq, &e.ID, &e.Kind, &e.Type, &e.At, &old, &new)
	e.Old, e.New = old, new
	return e, err
}

// Published implements relay.Leader.
func (l *outboxLeader) Published(ctx context.Context, marks map[string]int64) error {
	tenants, numbers := splitMarks(marks)
	_, err := l.conn.Exec(ctx, markSQL, tenants, numbers)
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

// Waiting implements relay.Leader.
func (l *outboxLeader) Waiting(ctx context.Context) (int64, time.Time, error) {
	var n int64
	var oldest *time.Time
	if err := l.conn.QueryRow(ctx, waitingSQL).Scan(&n, &oldest); err != nil || oldest == nil {
		return n, time.Time{}, err
	}
	return n, *oldest, nil
}

// Trim implements relay.Leader: the oldest commits go while they are
// published and committed before before (a tenant's commits are numbered
// about in the order of their commit times; one committed later than a
// younger one stays until the next trim reaches it).
func (l *outboxLeader) Trim(ctx context.Context, tenant string, upTo int64, before time.Time) (int64, error) {
	var total int64
	for limit := 1; ; limit = trimBatch {
		rows, err := l.conn.Query(ctx, oldCommitsSQL, tenant, limit)
		if err != nil {
			return total, err
		}
		var seq, events int64
		var at time.Time
		var until int64 // the first commit that stays
		read, stop := 0, false
		if _, err := pgx.ForEachRow(rows, []any{&seq, &events, &at}, func() error {
			read++
			if !stop && (seq+events-1 > upTo || !at.Before(before)) {
				stop = true
			}
			if !stop {
				until = seq + events
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
		if stop || read < limit {
			return total, nil
		}
	}
}

// Wait implements relay.Leader: until an instance announces events, or d,
// or ctx ends (which is not an error unless the relay's own context ended:
// the relay wakes itself that way when this instance wrote events).
func (l *outboxLeader) Wait(ctx context.Context, d time.Duration) error {
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	if _, err := l.conn.WaitForNotification(wctx); err != nil && (wctx.Err() == nil || l.conn.IsClosed()) {
		return err
	}
	return nil
}

// Alive implements relay.Leader: the session still holds the lead, and its
// idle time starts again.
func (l *outboxLeader) Alive(ctx context.Context) error {
	_, err := l.conn.Exec(ctx, `SELECT`)
	return err
}

// Close implements relay.Leader: the session ends, and the lead with it.
func (l *outboxLeader) Close() { _ = l.conn.Close(context.Background()) }

// Announce wakes the leading relay, wherever it runs: this instance
// committed events. The notification is a statement of its own, after
// the writes' commits, so that they take no part in PostgreSQL's
// serialising of notifying commits.
func Announce(ctx context.Context, db *postgres.DB) error {
	_, err := db.LockPool.Exec(ctx, `SELECT pg_notify('`+OutboxChannel+`', '')`)
	return err
}

// Led reports whether a relay leads on this database: whether a session
// holds the relay's advisory lock (a bigint key is PostgreSQL's lock of
// class id its high 32 bits, object id its low, object sub-id 1).
func Led(ctx context.Context, db *postgres.DB) (bool, error) {
	var led bool
	err := db.LockPool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
		AND classid = $1::bigint::oid AND objid = $2::bigint::oid AND objsubid = 1)`,
		int64(relayLockKey)>>32, int64(relayLockKey)&0xffffffff).Scan(&led)
	return led, err
}
