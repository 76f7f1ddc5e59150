package lending

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/checkoutlock/circulation-storage/internal/dbtest"
	"github.com/checkoutlock/circulation-storage/internal/locks"
	"github.com/checkoutlock/circulation-storage/internal/sample"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
	"github.com/google/uuid"

	storage "github.com/checkoutlock/circulation-storage"
)

// testPolicy is how the tests' storage applies the rules: as storage does
// by default.
var testPolicy = Policy{EnforceUnscopedItemLimit: true}

// setItemLimit makes the circulation rules give patrons of group a limit
// of n items that can circulate, beside the sample rules.
func setItemLimit(t *testing.T, f dbtest.Fixture, group string, n int) {
	t.Helper()
	ctx := context.Background()
	lib := newLibrary(f.DB, testPolicy)
	policy := uuid.NewString()
	if _, err := lib.Create(ctx, f.Tenant, storage.LoanPolicies, policy, json.RawMessage(fmt.Sprintf(
		`{"name":"limit %d %s","loanable":true,"loansPolicy":{"profileId":"Rolling","period":{"duration":1,"intervalId":"Weeks"},"itemLimit":%d}}`,
		n, policy, n))); err != nil {
		t.Fatal(err)
	}
	rules := sample.Rules
	rules.Rules = append(slices.Clone(rules.Rules), storage.CirculationRule{PatronGroupID: group, LoanTypeID: sample.LoanTypeCanCirculate, LoanPolicyID: policy})
	if err := NewRules(f.DB, testPolicy).SetRules(ctx, f.Tenant, rules); err != nil {
		t.Fatal(err)
	}
}

func loanDoc(userID, itemID string) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"userId":%q,"itemId":%q,"loanDate":"2026-01-01T10:00:00.000Z","action":"checkedout","status":{"name":"Open"}}`,
		userID, itemID))
}

func TestLoanUnderLiveLockIsCreated(t *testing.T) {
	t.Parallel()
	f := dbtest.SetupLibrary(t, sample.LoadData)
	ctx := context.Background()
	lib := newLibrary(f.DB, testPolicy)
	user, item := sample.ID("1001"), sample.ID("book-001")
	lock, _, err := locks.NewLocks(f.DB).Acquire(ctx, f.Tenant, user, "", dbtest.TTL, storage.Holder{})
	if err != nil {
		t.Fatal(err)
	}
	id := uuid.NewString()
	if _, err := lib.CreateCheckOutLoan(ctx, f.Tenant, storage.CheckOutWrite{LoanID: id, UserID: user, Loan: loanDoc(user, item), LockID: lock.ID, ItemVersion: 1}); err != nil {
		t.Fatalf("create under a live lock: %v", err)
	}
	if n := f.Count(t, "loan", "id = $1", id); n != 1 {
		t.Errorf("%d loans, want 1", n)
	}
	if n := f.Count(t, "item", "id = $1 AND status_name = 'Checked out' AND version = 2", item); n != 1 {
		t.Errorf("the item is not Checked out at _version 2 with its loan")
	}
	// A stale version writes nothing, loan included.
	_, err = lib.CreateCheckOutLoan(ctx, f.Tenant, storage.CheckOutWrite{LoanID: uuid.NewString(),
		UserID: sample.ID("1002"), Loan: loanDoc(sample.ID("1002"), sample.ID("book-003")), ItemVersion: 7})
	if e, ok := errs.As(err); !ok || e.Code != schemas.CodeVersionConflict {
		t.Errorf("stale item version: %v, want %s", err, schemas.CodeVersionConflict)
	}
	if n := f.Count(t, "loan", "item_id = $1", sample.ID("book-003")); n != 0 {
		t.Errorf("%d loans written with a stale item version", n)
	}
	// A second open loan for the item fails the whole write: the item stays.
	_, err = lib.CreateCheckOutLoan(ctx, f.Tenant, storage.CheckOutWrite{LoanID: uuid.NewString(),
		UserID: sample.ID("1002"), Loan: loanDoc(sample.ID("1002"), item), ItemVersion: 2})
	if e, ok := errs.As(err); !ok || e.Code != schemas.CodeItemHasOpenLoan {
		t.Errorf("second open loan: %v, want %s", err, schemas.CodeItemHasOpenLoan)
	}
	if n := f.Count(t, "item", "id = $1 AND version = 2", item); n != 1 {
		t.Errorf("a refused second loan changed the item")
	}
}

// TestLoanUnderLostLockIsRefused is the fence: a lock that expired, was
// taken over, released, or belongs to another patron covers no loan.
func TestLoanUnderLostLockIsRefused(t *testing.T) {
	t.Parallel()
	f := dbtest.SetupLibrary(t, sample.LoadData)
	ctx := context.Background()
	lib := newLibrary(f.DB, testPolicy)
	alice, bob, item := sample.ID("1001"), sample.ID("1002"), sample.ID("book-002")

	// Expired and still there: nobody took it over yet.
	lapsed, _, err := locks.NewLocks(f.DB).Acquire(ctx, f.Tenant, alice, "", dbtest.TTL, storage.Holder{})
	if err != nil {
		t.Fatal(err)
	}
	dbtest.Expire(t, f, lapsed.ID)
	_, err = lib.CreateCheckOutLoan(ctx, f.Tenant, storage.CheckOutWrite{LoanID: uuid.NewString(), UserID: alice, Loan: loanDoc(alice, item), LockID: lapsed.ID, ItemVersion: 1})
	if e, ok := errs.As(err); !ok || e.Code != schemas.CodeLockLost {
		t.Errorf("expired lock not yet taken over: %v, want %s", err, schemas.CodeLockLost)
	}
	expired := lapsed
	released, _, err := locks.NewLocks(f.DB).Acquire(ctx, f.Tenant, alice, "", dbtest.TTL, storage.Holder{}) // takes the expired one over
	if err != nil {
		t.Fatal(err)
	}
	if err := locks.NewLocks(f.DB).Release(ctx, f.Tenant, released.ID, storage.Caller{}, false); err != nil {
		t.Fatal(err)
	}
	bobs, _, err := locks.NewLocks(f.DB).Acquire(ctx, f.Tenant, bob, "", dbtest.TTL, storage.Holder{})
	if err != nil {
		t.Fatal(err)
	}
	for name, lockID := range map[string]string{
		"expired and taken over": expired.ID, "released": released.ID, "another patron's": bobs.ID, "never existed": uuid.NewString(),
	} {
		_, err := lib.CreateCheckOutLoan(ctx, f.Tenant, storage.CheckOutWrite{LoanID: uuid.NewString(), UserID: alice, Loan: loanDoc(alice, item), LockID: lockID, ItemVersion: 1})
		e, ok := errs.As(err)
		if !ok || e.Code != schemas.CodeLockLost || e.Kind != errs.KindConflict {
			t.Errorf("%s lock: %v, want %s", name, err, schemas.CodeLockLost)
		}
	}
	if n := f.Count(t, "loan", fmt.Sprintf("user_id = '%s'", alice)); n != 0 {
		t.Errorf("%d loans written under lost locks, want 0", n)
	}
}

// TestOneOpenLoanPerItemUnderConcurrency races open loans for one item
// straight at the database layer: exactly one wins, every round.
func TestOneOpenLoanPerItemUnderConcurrency(t *testing.T) {
	t.Parallel()
	f := dbtest.SetupLibrary(t, sample.LoadData)
	ctx := context.Background()
	lib := newLibrary(f.DB, testPolicy)
	for round := range 10 {
		item := sample.ID(fmt.Sprintf("book-%03d", 100+round))
		var wg sync.WaitGroup
		var mu sync.Mutex
		created, refused := 0, 0
		var other []error
		for range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := lib.Create(ctx, f.Tenant, storage.Loans, uuid.NewString(), loanDoc(sample.ID("1002"), item))
				mu.Lock()
				defer mu.Unlock()
				switch e, _ := errs.As(err); {
				case err == nil:
					created++
				case e != nil && e.Code == schemas.CodeItemHasOpenLoan:
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
		if n := f.Count(t, "loan", "item_id = $1 AND status_name = 'Open'", item); n != 1 {
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
	f := dbtest.SetupLibrary(t, sample.LoadData)
	ctx := context.Background()
	user, item := sample.ID("1004"), sample.ID("book-140")
	lock, _, err := locks.NewLocks(f.DB).Acquire(ctx, f.Tenant, user, "", dbtest.TTL, storage.Holder{})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := f.DB.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	b, r := newLibrary(f.DB, testPolicy).checkOutBatch(ctx, f.Tenant, storage.CheckOutWrite{LoanID: uuid.NewString(), UserID: user, Loan: loanDoc(user, item), LockID: lock.ID, ItemVersion: 1}, false, nil)
	if err := tx.SendBatch(ctx, b).Close(); err != nil || r.Stored == nil {
		t.Fatalf("fenced insert: %v (written: %v)", err, r.Stored != nil)
	}

	released := make(chan error, 1)
	go func() { released <- locks.NewLocks(f.DB).Release(ctx, f.Tenant, lock.ID, storage.Caller{}, false) }()
	// Wait until the release is blocked on the lock row, by the database's
	// own account.
	waitForLockWait(t, f, "%DELETE FROM %check_out_lock%", released, "release")
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-released; err != nil {
		t.Errorf("release after the loan committed: %v", err)
	}
	if n := f.Count(t, "loan", "user_id = $1 AND status_name = 'Open'", user); n != 1 {
		t.Errorf("%d open loans, want the fenced one", n)
	}
}

// TestAWriteUnderALockCountsAfterTheWriteBeforeIt: two check-out writes
// under one lock, the second sent while the first is uncommitted, with the
// patron one loan below the limit. The second must wait for the lock row
// and count the first's loan: counted before the row was locked (the
// statement's snapshot taken first), both would see room for one more and
// the patron would end above the limit.
func TestAWriteUnderALockCountsAfterTheWriteBeforeIt(t *testing.T) {
	t.Parallel()
	f := dbtest.SetupLibrary(t, sample.LoadData)
	ctx := context.Background()
	user := sample.ID("1004")
	open := f.Count(t, "loan", "user_id = $1 AND status_name = 'Open'", user)
	setItemLimit(t, f, sample.GroupFaculty, open+1)
	lock, _, err := locks.NewLocks(f.DB).Acquire(ctx, f.Tenant, user, "", dbtest.TTL, storage.Holder{})
	if err != nil {
		t.Fatal(err)
	}
	write := func(item string) storage.CheckOutWrite {
		return storage.CheckOutWrite{LoanID: uuid.NewString(), UserID: user, Loan: loanDoc(user, sample.ID(item)), LockID: lock.ID, ItemVersion: 1}
	}
	tx, err := f.DB.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	b, r := newLibrary(f.DB, testPolicy).checkOutBatch(ctx, f.Tenant, write("book-140"), false, nil)
	if err := tx.SendBatch(ctx, b).Close(); err != nil || r.Stored == nil {
		t.Fatalf("first write: %v (written: %v, open loans counted %v)", err, r.Stored != nil, r.Open)
	}

	second := make(chan error, 1)
	go func() {
		_, err := newLibrary(f.DB, testPolicy).CreateCheckOutLoan(ctx, f.Tenant, write("book-141"))
		second <- err
	}()
	waitForLockWait(t, f, "%FOR UPDATE%", second, "the second write")
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	err = <-second
	if e, ok := errs.As(err); !ok || e.Code != schemas.CodeItemLimitReached {
		t.Errorf("second write: %v, want %s", err, schemas.CodeItemLimitReached)
	}
	if n := f.Count(t, "loan", "user_id = $1 AND status_name = 'Open'", user); n != open+1 {
		t.Errorf("%d open loans, want %d: the limit", n, open+1)
	}
}

// TestConcurrentWritesUnderOneLockKeepTheLimit: twenty check-out writes
// under one lock at once, round after round, for a patron with room for
// three more loans: exactly three are written, the others refused at the
// limit, and the database holds no more.
func TestConcurrentWritesUnderOneLockKeepTheLimit(t *testing.T) {
	t.Parallel()
	raceToTheLimit(t, true)
}

// raceToTheLimit fires twenty check-out writes at once for a fresh
// undergraduate (who may borrow three items that can circulate, by the
// sample rules), under one lock or none, five rounds: exactly three must
// be written, every other refused at the limit, and no more open loans in
// the database: on the sample library, whose request makes its writes run
// in full, and on the same without it, whose writes are lean (gate.go).
func raceToTheLimit(t *testing.T, locked bool) {
	t.Helper()
	raceWrites(t, dbtest.SetupLibrary(t, sample.LoadData), sample.GroupUndergrad, locked, schemas.CodeItemLimitReached)
	lean := setupLeanLibrary(t)
	raceWrites(t, lean, sample.GroupUndergrad, locked, schemas.CodeItemLimitReached)
	if lean.DB.Gates.Has(lean.Tenant) {
		t.Errorf("tenant %s without a gate row was written in full", lean.Tenant)
	}
}

// raceWrites fires twenty check-out writes at once for a fresh patron of
// group, who has room for three loans, under one lock or none, five
// rounds: exactly three must be written, every other refused with
// refusal, and no more open loans in the database.
func raceWrites(t *testing.T, f dbtest.Fixture, group string, locked bool, refusal string) {
	t.Helper()
	ctx := context.Background()
	lib := newLibrary(f.DB, testPolicy)
	const rounds, writers, room = 5, 20, 3
	for round := range rounds {
		user := uuid.NewString()
		if _, err := lib.Create(ctx, f.Tenant, storage.Patrons, user, json.RawMessage(fmt.Sprintf(
			`{"barcode":"writers-%d","active":true,"patronGroup":%q,"personal":{"lastName":"Writer"}}`, round, group))); err != nil {
			t.Fatal(err)
		}
		var lockID string
		if locked {
			lock, _, err := locks.NewLocks(f.DB).Acquire(ctx, f.Tenant, user, "", dbtest.TTL, storage.Holder{})
			if err != nil {
				t.Fatal(err)
			}
			lockID = lock.ID
		}
		errs := atOnce(writers, func(i int) error {
			// Books 21 on: book-020 is held for Bob.
			item := sample.ID(fmt.Sprintf("book-%03d", 21+round*writers+i))
			_, err := lib.CreateCheckOutLoan(ctx, f.Tenant, storage.CheckOutWrite{LoanID: uuid.NewString(),
				UserID: user, Loan: loanDoc(user, item), LockID: lockID, ItemVersion: 1})
			return err
		})
		wantRoomFilled(t, f, round, user, errs, room, refusal)
	}
}

// atOnce runs write(i) for i from 0 to n-1, all let go together, and
// returns their answers, write i's at i.
func atOnce(n int, write func(i int) error) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs[i] = write(i)
		}()
	}
	close(start)
	wg.Wait()
	return errs
}

// wantRoomFilled checks a round of writes at once for user, who had room
// for room loans: errs, their answers, are room successes and refusals
// with the code refusal, nothing else, and the database holds room open
// loans of the user's.
func wantRoomFilled(t *testing.T, f dbtest.Fixture, round int, user string, errs []error, room int, refusal string) {
	t.Helper()
	written, refused := 0, 0
	for _, err := range errs {
		switch {
		case err == nil:
			written++
		case dbtest.IsCode(err, refusal):
			refused++
		default:
			t.Errorf("round %d: %v", round, err)
		}
	}
	if written != room || refused != len(errs)-room {
		t.Fatalf("round %d: %d written, %d refused with %s; want %d and %d", round, written, refused, refusal, room, len(errs)-room)
	}
	if n := f.Count(t, "loan", "user_id = $1 AND status_name = 'Open'", user); n != room {
		t.Fatalf("round %d: %d open loans, want %d", round, n, room)
	}
}

// waitForLockWait waits until a statement like query waits for a lock, by
// the database's own account, failing the test if what (whose outcome done
// carries) finishes first or nothing waits within 10 s.
func waitForLockWait(t *testing.T, f dbtest.Fixture, query string, done <-chan error, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var waiting bool
		err := f.DB.Pool.QueryRow(context.Background(), `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE $1)`, query).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		if waiting {
			return
		}
		select {
		case err := <-done:
			t.Fatalf("%s finished (%v) while what it must wait for was uncommitted", what, err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never waited", what)
		}
		time.Sleep(5 * time.Millisecond) // polling the database's view, with a deadline
	}
}
