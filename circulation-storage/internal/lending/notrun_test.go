package lending

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/circulation-storage/internal/dbtest"
	"github.com/checkoutlock/circulation-storage/internal/locks"
	"github.com/checkoutlock/circulation-storage/internal/pgtest"
	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/circulation-storage/internal/records"
	"github.com/checkoutlock/circulation-storage/internal/tenants"
	"github.com/checkoutlock/schemas/errs"
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
	f := dbtest.SetupTenant(t, db)
	if _, err := tenants.NewTenants(db, dbtest.Discard, records.LoadData).Init(ctx, f.Tenant, storage.TenantAttributes{ModuleTo: "m",
		Parameters: []errs.Parameter{{Key: "loadSample", Value: "true"}}}); err != nil {
		t.Fatalf("load sample: %v", err)
	}
	user, item := records.SampleID("1001"), records.SampleID("book-150")
	lock, _, err := locks.NewLocks(f.DB).Acquire(ctx, f.Tenant, user, "", dbtest.TTL, storage.Holder{})
	if err != nil {
		t.Fatal(err)
	}
	other, err := pgx.Connect(ctx, pgtest.Shared(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Close(context.Background()) })
	blocker, err := other.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = blocker.Rollback(context.Background()) })
	if _, err := blocker.Exec(ctx, `SELECT 1 FROM `+dbtest.View(f.Tenant, "item")+` WHERE id = $1 FOR UPDATE`, item); err != nil {
		t.Fatal(err)
	}
	loanID := uuid.NewString()
	result := make(chan error, 1)
	db.Gates.Found(f.Tenant) // the sample library has a request: written in full
	go func() {
		_, err := newLibrary(db, testPolicy).CreateCheckOutLoan(ctx, f.Tenant, storage.CheckOutWrite{LoanID: loanID,
			UserID: user, Loan: loanDoc(user, item), LockID: lock.ID, ItemVersion: 1, ReleaseLock: true})
		result <- err
	}()
	var writer int
	for deadline := time.Now().Add(10 * time.Second); writer == 0; {
		if err := blocker.QueryRow(ctx, `SELECT coalesce(max(pid), 0) FROM pg_stat_activity
			WHERE $1 = ANY (pg_blocking_pids(pid))`, other.PgConn().PID()).Scan(&writer); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the write never waited for the held item")
		}
		time.Sleep(5 * time.Millisecond) // polling the database's view, with a deadline
	}
	var ended bool
	if err := blocker.QueryRow(ctx, `SELECT pg_terminate_backend($1)`, writer).Scan(&ended); err != nil || !ended {
		t.Fatalf("terminate the write's server process %d: %v, %v", writer, ended, err)
	}
	// The write goes again, and waits for the item once more: the blocker
	// lets it go.
	if err := blocker.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-result:
		if err != nil {
			t.Fatalf("the write whose first run was ended before it ran: %v, want it written", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the write never answered")
	}
	if n := f.Count(t, "loan", "id = $1", loanID); n != 1 {
		t.Errorf("%d loans, want the one written", n)
	}
	if n := f.Count(t, "loan", "jsonb ->> 'itemId' = $1", item); n != 1 {
		t.Errorf("%d loans of the item, want 1", n)
	}
}

// TestACutWriteWhoseProcessEndedUncommittedIsSentAgain: a check-out write
// whose connection is cut while its server process waits for a row, and
// whose process is then ended before it commits, did not commit: once
// that process has ended (settled) and the loan is not there, storage
// sends the write again on a fresh connection, and it is written once.
func TestACutWriteWhoseProcessEndedUncommittedIsSentAgain(t *testing.T) {
	t.Parallel()
	w := cutWrite(t)
	ctx := context.Background()
	var ended bool
	if err := w.blocker.QueryRow(ctx, `SELECT pg_terminate_backend($1)`, w.writer).Scan(&ended); err != nil || !ended {
		t.Fatalf("terminate the cut write's server process %d: %v, %v", w.writer, ended, err)
	}
	if err := w.blocker.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-w.done:
		if err != nil {
			t.Fatalf("the cut write whose process ended uncommitted: %v, want it written again", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the write never answered")
	}
	if n := w.f.Count(t, "loan", "id = $1", w.loanID); n != 1 {
		t.Errorf("%d loans, want the one written again", n)
	}
}
