package outbox

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/checkoutlock/circulation-storage/internal/pgtest"
	"github.com/checkoutlock/circulation-storage/internal/postgres"
)

// TestNumbersReachTheDiskBeforeTheyArePublished: the relay's session
// commits without waiting for the disk; durable returns only once the WAL
// is on disk past its last commit, whether or not something else flushed
// it meanwhile (PostgreSQL's WAL writer flushes an asynchronous commit
// within wal_writer_delay, so without durable's own flush most rounds
// would find it not yet there).
func TestNumbersReachTheDiskBeforeTheyArePublished(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg, err := pgx.ParseConfig(pgtest.Shared(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["synchronous_commit"] = "off"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	l := &outboxLeader{conn: conn}
	for round := range 50 {
		// A commit of its own (the transaction is given an id), not
		// waited for, as the numbering's is.
		if _, err := conn.Exec(ctx, `SELECT pg_current_xact_id()`); err != nil {
			t.Fatal(err)
		}
		var past string
		if err := conn.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&past); err != nil {
			t.Fatal(err)
		}
		if err := l.durable(ctx); err != nil {
			t.Fatal(err)
		}
		var onDisk bool
		if err := conn.QueryRow(ctx, `SELECT pg_current_wal_flush_lsn() >= $1::pg_lsn`, past).Scan(&onDisk); err != nil {
			t.Fatal(err)
		}
		if !onDisk {
			t.Fatalf("round %d: durable returned with the WAL not on disk up to %s, past the session's last commit", round, past)
		}
	}
}

// TestLedSaysWhetherARelayLeads: Led is false on a database where no
// relay leads, true while one does (a session of another instance), and
// false again once the leader's session is gone.
func TestLedSaysWhetherARelayLeads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.Fresh(t)
	db, err := postgres.Open(ctx, url, postgres.PoolConfig{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	led := func() bool {
		t.Helper()
		ok, err := Led(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if led() {
		t.Fatal("Led says a relay leads on a database where none has taken the lead")
	}
	leader, leading, err := NewOutbox(url, time.Minute).Lead(ctx)
	if err != nil || !leading {
		t.Fatalf("Lead = %v, %v: want the lead", leading, err)
	}
	if !led() {
		t.Error("Led says no relay leads while one holds the lead")
	}
	// Another database's leader is not this one's.
	other, leading, err := NewOutbox(pgtest.Fresh(t), time.Minute).Lead(ctx)
	if err != nil || !leading {
		t.Fatalf("Lead on another database = %v, %v: want the lead", leading, err)
	}
	leader.Close()
	// The server ends the leader's session, and lets its lock go, once it
	// has read the connection's end: polled for, with a deadline.
	for deadline := time.Now().Add(10 * time.Second); led(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("Led says a relay leads 10 s after the leader's session ended (another database's leads)")
		}
	}
	other.Close()
}
