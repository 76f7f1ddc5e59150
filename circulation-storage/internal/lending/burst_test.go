package lending

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/google/uuid"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/circulation-storage/internal/dbtest"
	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/circulation-storage/internal/sample"
	"github.com/checkoutlock/schemas"
)

// TestAPatronsBurstIsJudgedInFewCommits: twenty check-out writes of one
// patron at once, each taking the patron's lock in its write, five rounds,
// for an undergraduate with room for three loans: exactly three written,
// seventeen refused at the limit, no lock left. In one more round the
// first write is held in PostgreSQL (the patron's row locked meanwhile)
// until the other nineteen wait behind it here; they then run as two
// transactions (MaxBurstWrites, then the rest), each judged after the one
// before: the three loans are written by two transactions, not three.
func TestAPatronsBurstIsJudgedInFewCommits(t *testing.T) {
	t.Parallel()
	f := setupLeanLibrary(t)
	lib := newLibrary(f.DB, testPolicy)
	ctx := context.Background()
	const writers, room = 20, 3
	burst := func(round int, user string, hold func(start func(i int))) {
		t.Helper()
		errs := make([]error, writers)
		var wg sync.WaitGroup
		write := func(i int) {
			defer wg.Done()
			item := sample.ID(fmt.Sprintf("book-%03d", 21+round*writers+i))
			_, errs[i] = lib.CreateCheckOutLoan(ctx, f.Tenant, storage.CheckOutWrite{LoanID: uuid.NewString(), UserID: user,
				Loan: loanDoc(user, item), LockID: uuid.NewString(), ItemVersion: 1, ReleaseLock: true,
				AcquireInWrite: &storage.LockTerms{TTL: dbtest.TTL}})
		}
		wg.Add(writers)
		if hold == nil {
			for i := range writers {
				go write(i)
			}
		} else {
			hold(func(i int) { go write(i) })
		}
		wg.Wait()
		wantRoomFilled(t, f, round, user, errs, room, schemas.CodeItemLimitReached)
		if n := f.Count(t, postgres.TableLock, "user_id = $1", user); n != 0 {
			t.Errorf("round %d: %d lock rows left for the patron, want none", round, n)
		}
	}
	patron := func(round int) string {
		user := uuid.NewString()
		if _, err := lib.Create(ctx, f.Tenant, storage.Patrons, user, json.RawMessage(fmt.Sprintf(
			`{"barcode":"burst-%d","active":true,"patronGroup":%q,"personal":{"lastName":"Burst"}}`, round, sample.GroupUndergrad))); err != nil {
			t.Fatal(err)
		}
		return user
	}
	for round := range 5 {
		burst(round, patron(round), nil)
	}

	const held = 5
	user := patron(held)
	burst(held, user, func(start func(i int)) {
		tx, err := f.DB.Pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		if _, err := tx.Exec(ctx, "SELECT 1 FROM "+dbtest.View(f.Tenant, postgres.TablePatron)+" WHERE id = $1 FOR UPDATE", user); err != nil {
			t.Fatal(err)
		}
		key := patronKey{f.Tenant, user}
		waiting := func() int {
			lib.bursts.mu.Lock()
			defer lib.bursts.mu.Unlock()
			if w, ok := lib.bursts.running[key]; ok {
				return len(w)
			}
			return -1
		}
		// The first write runs, and waits for this transaction's lock on
		// the patron's row; the others wait behind it here.
		start(0)
		dbtest.Eventually(t, "the first write running", func() bool { return waiting() == 0 })
		for i := 1; i < writers; i++ {
			start(i)
		}
		dbtest.Eventually(t, "nineteen writes waiting", func() bool { return waiting() == writers-1 })
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
	})
	var commits int
	if err := f.DB.Pool.QueryRow(ctx, "SELECT count(DISTINCT xmin::text) FROM "+postgres.Table(postgres.TableLoan)+" WHERE tenant_id = $2 AND user_id = $1",
		user, string(f.Tenant)).Scan(&commits); err != nil {
		t.Fatal(err)
	}
	if commits != 2 {
		t.Errorf("the held burst's three loans were written by %d transactions, want 2 (the first write, then the next sixteen together)", commits)
	}
}
