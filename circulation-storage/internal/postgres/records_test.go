package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	storage "github.com/checkoutlock/circulation-storage"
)

// setupLibrary loads the sample library into the fixture's tenant.
func setupLibrary(t *testing.T) fixture {
	t.Helper()
	f := setup(t)
	tenants := NewTenants(f.db, discard, LoadData)
	if _, err := tenants.Init(context.Background(), f.tenant, storage.TenantAttributes{ModuleTo: "m",
		Parameters: []storage.Parameter{{Key: "loadSample", Value: "true"}}}); err != nil {
		t.Fatalf("load sample: %v", err)
	}
	return f
}

func loanDoc(userID, itemID string) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"userId":%q,"itemId":%q,"loanDate":"2026-01-01T10:00:00.000Z","action":"checkedout","status":{"name":"Open"}}`,
		userID, itemID))
}

func TestLoanUnderLiveLockIsCreated(t *testing.T) {
	t.Parallel()
	f := setupLibrary(t)
	ctx := context.Background()
	records := NewRecords(f.db)
	user, item := SampleID("1001"), SampleID("book-001")
	lock, _, err := f.locks.Acquire(ctx, f.tenant, user, "", ttl, storage.Holder{})
	if err != nil {
		t.Fatal(err)
	}
	id := uuid.NewString()
	if _, err := records.CreateCheckOutLoan(ctx, f.tenant, storage.CheckOutWrite{LoanID: id, Loan: loanDoc(user, item), LockID: lock.ID, ItemVersion: 1}); err != nil {
		t.Fatalf("create under a live lock: %v", err)
	}
	if n := f.count(t, "loan", "id = $1", id); n != 1 {
		t.Errorf("%d loans, want 1", n)
	}
	if n := f.count(t, "item", "id = $1 AND status_name = 'Checked out' AND version = 2", item); n != 1 {
		t.Errorf("the item is not Checked out at _version 2 with its loan")
	}
	// A stale version writes nothing, loan included.
	_, err = records.CreateCheckOutLoan(ctx, f.tenant, storage.CheckOutWrite{LoanID: uuid.NewString(),
		Loan: loanDoc(SampleID("1002"), SampleID("book-003")), ItemVersion: 7})
	if e, ok := storage.AsError(err); !ok || e.Code != storage.CodeVersionConflict {
		t.Errorf("stale item version: %v, want %s", err, storage.CodeVersionConflict)
	}
	if n := f.count(t, "loan", "item_id = $1", SampleID("book-003")); n != 0 {
		t.Errorf("%d loans written with a stale item version", n)
	}
	// A second open loan for the item fails the whole write: the item stays.
	_, err = records.CreateCheckOutLoan(ctx, f.tenant, storage.CheckOutWrite{LoanID: uuid.NewString(),
		Loan: loanDoc(SampleID("1002"), item), ItemVersion: 2})
	if e, ok := storage.AsError(err); !ok || e.Code != storage.CodeOpenLoanExists {
		t.Errorf("second open loan: %v, want %s", err, storage.CodeOpenLoanExists)
	}
	if n := f.count(t, "item", "id = $1 AND version = 2", item); n != 1 {
		t.Errorf("a refused second loan changed the item")
	}
}

// TestLoanUnderLostLockIsRefused is the fence: a lock that expired, was
// taken over, released, or belongs to another patron covers no loan.
func TestLoanUnderLostLockIsRefused(t *testing.T) {
	t.Parallel()
	f := setupLibrary(t)
	ctx := context.Background()
	records := NewRecords(f.db)
	alice, bob, item := SampleID("1001"), SampleID("1002"), SampleID("book-002")

	// Expired and still there: nobody took it over yet.
	lapsed, _, err := f.locks.Acquire(ctx, f.tenant, alice, "", ttl, storage.Holder{})
	if err != nil {
		t.Fatal(err)
	}
	expire(t, f, lapsed.ID)
	_, err = records.CreateCheckOutLoan(ctx, f.tenant, storage.CheckOutWrite{LoanID: uuid.NewString(), Loan: loanDoc(alice, item), LockID: lapsed.ID, ItemVersion: 1})
	if e, ok := storage.AsError(err); !ok || e.Code != storage.CodeLockLost {
		t.Errorf("expired lock not yet taken over: %v, want %s", err, storage.CodeLockLost)
	}
	expired := lapsed
	released, _, err := f.locks.Acquire(ctx, f.tenant, alice, "", ttl, storage.Holder{}) // takes the expired one over
	if err != nil {
		t.Fatal(err)
	}
	if err := f.locks.Release(ctx, f.tenant, released.ID, ""); err != nil {
		t.Fatal(err)
	}
	bobs, _, err := f.locks.Acquire(ctx, f.tenant, bob, "", ttl, storage.Holder{})
	if err != nil {
		t.Fatal(err)
	}
	for name, lockID := range map[string]string{
		"expired and taken over": expired.ID, "released": released.ID, "another patron's": bobs.ID, "never existed": uuid.NewString(),
	} {
		_, err := records.CreateCheckOutLoan(ctx, f.tenant, storage.CheckOutWrite{LoanID: uuid.NewString(), Loan: loanDoc(alice, item), LockID: lockID, ItemVersion: 1})
		e, ok := storage.AsError(err)
		if !ok || e.Code != storage.CodeLockLost || e.Kind != storage.KindConflict {
			t.Errorf("%s lock: %v, want %s", name, err, storage.CodeLockLost)
		}
	}
	if n := f.count(t, "loan", ""); n != 0 {
		t.Errorf("%d loans written under lost locks, want 0", n)
	}
}

// TestOneOpenLoanPerItemUnderConcurrency races open loans for one item
// straight at the database layer: exactly one wins, every round.
func TestOneOpenLoanPerItemUnderConcurrency(t *testing.T) {
	t.Parallel()
	f := setupLibrary(t)
	ctx := context.Background()
	records := NewRecords(f.db)
	for round := range 10 {
		item := SampleID(fmt.Sprintf("book-%03d", 100+round))
		var wg sync.WaitGroup
		var mu sync.Mutex
		created, refused := 0, 0
		var other []error
		for range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := records.Create(ctx, f.tenant, storage.Loans, uuid.NewString(), loanDoc(SampleID("1002"), item))
				mu.Lock()
				defer mu.Unlock()
				switch e, _ := storage.AsError(err); {
				case err == nil:
					created++
				case e != nil && e.Code == storage.CodeOpenLoanExists:
					refused++
				default:
					other = append(other, err)
				}
			}()
		}
		wg.Wait()
		if created != 1 || refused != 19 || len(other) > 0 {
			t.Fatalf("round %d: %d created, %d refused, other errors %v; want 1 and 19", round, created, refused, other)
		}
		if n := f.count(t, "loan", "item_id = $1 AND status_name = 'Open'", item); n != 1 {
			t.Fatalf("round %d: %d open loans for the item, want 1", round, n)
		}
	}
}

// TestFencedLoanHoldsTheLockUntilCommit: while a loan is being created under
// a lock, releasing (or taking over) that lock waits until the loan commits,
// so the next holder's recount sees it. The fenced insert runs here inside an
// open transaction; the release must be seen waiting for it.
func TestFencedLoanHoldsTheLockUntilCommit(t *testing.T) {
	t.Parallel()
	f := setupLibrary(t)
	ctx := context.Background()
	user, item := SampleID("1004"), SampleID("book-140")
	lock, _, err := f.locks.Acquire(ctx, f.tenant, user, "", ttl, storage.Holder{})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := f.db.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var stored json.RawMessage
	var fenced, notified bool
	var open *int
	var releasedUser *string
	if err := tx.QueryRow(ctx, checkOutStatement(f.tenant), uuid.NewString(), loanDoc(user, item), lock.ID, 1, nil, nil, nil, nil, false, string(f.tenant)).
		Scan(&stored, &fenced, &open, &releasedUser, &notified); err != nil || stored == nil {
		t.Fatalf("fenced insert: %v (written: %v)", err, stored != nil)
	}

	released := make(chan error, 1)
	go func() { released <- f.locks.Release(ctx, f.tenant, lock.ID, "") }()
	// Wait until the release is blocked on the lock row, by the database's
	// own account.
	deadline := time.Now().Add(10 * time.Second)
	for {
		var waiting bool
		err := f.db.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE '%DELETE FROM %check_out_lock%')`).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		if waiting {
			break
		}
		select {
		case err := <-released:
			t.Fatalf("release finished (%v) while the fenced loan was uncommitted", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("release never waited for the fenced loan")
		}
		time.Sleep(5 * time.Millisecond) // polling the database's view, with a deadline
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-released; err != nil {
		t.Errorf("release after the loan committed: %v", err)
	}
	if n := f.count(t, "loan", "user_id = $1 AND status_name = 'Open'", user); n != 1 {
		t.Errorf("%d open loans, want the fenced one", n)
	}
}
