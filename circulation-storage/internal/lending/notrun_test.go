package lending

import (
	"context"
	"testing"
	"time"

	"github.com/checkoutlock/circulation-storage/internal/pgtest"
	"github.com/checkoutlock/circulation-storage/internal/postgres"
)

// TestACheckOutWriteCutBeforeItRanIsSentAgain: a check-out's write whose
// server process is ended (pg_terminate_backend, as an operator or a
// failover does) while it waits for a row, before its last statement
// answered, ran nothing: its transaction died with the process. Storage
// sends it again on a fresh connection instead of answering 503, and the
// check-out is written once.
func TestACheckOutWriteCutBeforeItRanIsSentAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, err := postgres.Open(ctx, pgtest.Shared(t), postgres.PoolConfig{MaxConns: 4, LockCommit: "off"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	w := waitingWrite(t, db, 0)
	var ended bool
	if err := w.blocker.QueryRow(ctx, `SELECT pg_terminate_backend($1)`, w.writer).Scan(&ended); err != nil || !ended {
		t.Fatalf("terminate the write's server process %d: %v, %v", w.writer, ended, err)
	}
	// The write goes again, and waits for the item once more: the blocker
	// lets it go.
	if err := w.blocker.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	wantWrittenOnce(t, w)
}

// wantWrittenOnce checks that the write w answers that it wrote its loan,
// and that the loan is there once.
func wantWrittenOnce(t *testing.T, w cut) {
	t.Helper()
	select {
	case err := <-w.done:
		if err != nil {
			t.Fatalf("the write whose first run ended uncommitted: %v, want it written again", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the write never answered")
	}
	if n := w.f.Count(t, "loan", "id = $1", w.loanID); n != 1 {
		t.Errorf("%d loans, want the one written again", n)
	}
}

// TestACutWriteWhoseProcessEndedUncommittedIsSentAgain: a check-out write
// whose connection is cut while its server process waits for a row, and
// whose process is then ended before it commits, did not commit: the
// write, sent again at once on a fresh connection with its id, waits for
// that process's transaction, finds the id free when it ends, and is
// written once.
func TestACutWriteWhoseProcessEndedUncommittedIsSentAgain(t *testing.T) {
	t.Parallel()
	w := cutWrite(t, 0)
	ctx := context.Background()
	var ended bool
	if err := w.blocker.QueryRow(ctx, `SELECT pg_terminate_backend($1)`, w.writer).Scan(&ended); err != nil || !ended {
		t.Fatalf("terminate the cut write's server process %d: %v, %v", w.writer, ended, err)
	}
	if err := w.blocker.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	wantWrittenOnce(t, w)
}
