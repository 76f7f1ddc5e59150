package outbox

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/checkoutlock/circulation-storage/internal/pgtest"
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
