package lending

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/checkoutlock/circulation-storage/internal/dbtest"
	"github.com/checkoutlock/circulation-storage/internal/locks"
	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/circulation-storage/internal/sample"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
	"github.com/google/uuid"

	storage "github.com/checkoutlock/circulation-storage"
)

// What storage keeps whoever calls, at the database layer: the lock and
// its owner, the lock feature read from the tenant's setting, the limit
// without a lock, and what plain writes of loans and items may not do.

// as is ctx acting for user through module.
func as(user, module string) context.Context {
	return storage.WithCaller(context.Background(), storage.Caller{User: user, Module: module})
}

// TestALockIsItsOwners: only the caller that acquired a lock renews it,
// writes under it or releases it; anyone else naming its id is refused
// and the lock stays, unless it may release others' locks, and then the
// history names who released it.
func TestALockIsItsOwners(t *testing.T) {
	t.Parallel()
	f := dbtest.SetupLibrary(t, sample.LoadData)
	lib := newLibrary(f.DB, testPolicy)
	alice := sample.ID("1001")
	kiosk, operator := as("kiosk-1", "circulation"), as("operator-1", "circulation")
	owner := storage.Caller{User: "kiosk-1", Module: "circulation"}
	lock, _, err := locks.NewLocks(f.DB).Acquire(kiosk, f.Tenant, alice, uuid.NewString(), dbtest.TTL, owner.Holder())
	if err != nil {
		t.Fatal(err)
	}
	// Another caller naming the id: refused as any acquirer, not renewed.
	for _, other := range []storage.Caller{{User: "kiosk-1"}, {User: "kiosk-2", Module: "circulation"}, {}} {
		if _, _, err := locks.NewLocks(f.DB).Acquire(context.Background(), f.Tenant, alice, lock.ID, dbtest.TTL*100, other.Holder()); !errs.IsKind(err, errs.KindLocked) {
			t.Errorf("renewal by %+v: %v, want held", other, err)
		}
	}
	// A write under it by another: the fence refuses, nothing written.
	_, err = lib.CreateCheckOutLoan(operator, f.Tenant, storage.CheckOutWrite{LoanID: uuid.NewString(),
		UserID: alice, Loan: loanDoc(alice, sample.ID("book-001")), LockID: lock.ID, ItemVersion: 1, ReleaseLock: true})
	if !dbtest.IsCode(err, schemas.CodeLockLost) {
		t.Errorf("a write under another's lock: %v, want %s", err, schemas.CodeLockLost)
	}
	// A release by another without the permission: forbidden, kept.
	if err := locks.NewLocks(f.DB).Release(context.Background(), f.Tenant, lock.ID, storage.Caller{User: "operator-1", Module: "circulation"}, false); !errs.IsKind(err, errs.KindForbidden) {
		t.Errorf("release by another: %v, want forbidden", err)
	}
	if _, err := locks.NewLocks(f.DB).Get(context.Background(), f.Tenant, lock.ID); err != nil {
		t.Fatalf("the lock after refused attempts: %v", err)
	}
	if n := f.Count(t, "check_out_lock_event", ""); n != 0 {
		t.Errorf("%d events after refused attempts, want none", n)
	}
	// The owner renews it.
	if _, outcome, err := locks.NewLocks(f.DB).Acquire(kiosk, f.Tenant, alice, lock.ID, dbtest.TTL, owner.Holder()); err != nil || outcome != storage.Renewed {
		t.Errorf("renewal by its owner: %v %v, want renewed", outcome, err)
	}
	// Another with the permission releases it, and is named.
	if err := locks.NewLocks(f.DB).Release(context.Background(), f.Tenant, lock.ID, storage.Caller{User: "operator-1", Module: "circulation"}, true); err != nil {
		t.Fatalf("release with the permission: %v", err)
	}
	events, _, err := locks.NewLocks(f.DB).History(context.Background(), f.Tenant, storage.HistoryFilter{Limit: 10})
	if err != nil || len(events) != 1 || events[0].Type != storage.EventReleasedByOther || events[0].By.AcquiredBy != "operator-1" ||
		events[0].By.AcquiredByModule != "circulation" || events[0].Holder.AcquiredBy != "kiosk-1" {
		t.Errorf("history %+v (%v), want released_by_other by operator-1 through circulation", events, err)
	}
}

// TestTheLockFeatureIsReadFromTheTenantsSetting: a write without a lock
// is refused while the tenant's setting (or, with none stored, the
// environment's default) says the lock is on, in the object form and in
// FOLIO's string form; a malformed value reads as not saying.
func TestTheLockFeatureIsReadFromTheTenantsSetting(t *testing.T) {
	t.Parallel()
	f := dbtest.SetupLibrary(t, sample.LoadData)
	ctx := context.Background()
	alice := sample.ID("1001")
	settingID := uuid.NewString()
	put := func(value string) {
		t.Helper()
		doc := json.RawMessage(`{"scope":"mod-circulation","key":"checkoutLockFeature","value":` + value + `}`)
		lib := newLibrary(f.DB, testPolicy)
		if _, err := lib.Get(ctx, f.Tenant, storage.Settings, settingID); err != nil {
			if _, err := lib.Create(ctx, f.Tenant, storage.Settings, settingID, doc); err != nil {
				t.Fatal(err)
			}
			return
		}
		if err := lib.Update(ctx, f.Tenant, storage.Settings, settingID, 0, doc); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	write := func(def bool) error {
		n++
		_, err := newLibrary(f.DB, Policy{LockFeatureDefault: def, EnforceUnscopedItemLimit: true}).CreateCheckOutLoan(ctx, f.Tenant,
			storage.CheckOutWrite{LoanID: uuid.NewString(), UserID: alice, Loan: loanDoc(alice, sample.ID(fmt.Sprintf("book-%03d", 20+n))), ItemVersion: 1})
		if err == nil {
			// Check it back in, so the patron stays below her limit.
			f.Exec(t, `UPDATE `+dbtest.View(f.Tenant, "loan")+` SET jsonb = jsonb_set(jsonb, '{status,name}', '"Closed"') WHERE user_id = $1`, alice)
		}
		return err
	}
	for _, c := range []struct {
		stored   string // "" for no setting
		def      bool
		required bool
	}{
		{"", false, false},
		{"", true, true},
		{`{"checkOutLockFeatureEnabled":true}`, false, true},
		{`{"checkOutLockFeatureEnabled":false}`, true, false},
		{`"{\"checkOutLockFeatureEnabled\":true,\"lockTtl\":3000}"`, false, true},
		{`"{\"checkOutLockFeatureEnabled\": false}"`, true, false},
		{`{"lockTtl":3000}`, true, true},                             // says nothing: the default
		{`{"checkOutLockFeatureEnabled":"false"}`, true, true},       // not a boolean: the default
		{`"not json {\"checkOutLockFeatureEnabled\""`, false, false}, // malformed: the default
	} {
		if c.stored != "" {
			put(c.stored)
		}
		err := write(c.def)
		if got := dbtest.IsCode(err, schemas.CodeLockRequired); got != c.required || (!c.required && err != nil) {
			t.Errorf("setting %s, default %v: %v, want lock required %v", c.stored, c.def, err, c.required)
		}
	}
}

// TestUnlockedWritesKeepTheLimit: with no lock at all, twenty check-out
// writes for one patron at once, round after round: the patron's writes
// wait for one another (her row), each counts the ones before, and exactly
// the limit the rules set is written.
func TestUnlockedWritesKeepTheLimit(t *testing.T) {
	t.Parallel()
	raceToTheLimit(t, false)
}

// TestPlainWritesKeepLoansAndItemsAsCirculationLeavesThem: a plain update
// of a loan keeps its status and, while open, its borrower and item; an
// open loan is not deleted; an item goes Checked out only with a loan, and
// leaves it only without an open one; a check-in closes only an open loan.
func TestPlainWritesKeepLoansAndItemsAsCirculationLeavesThem(t *testing.T) {
	t.Parallel()
	f := dbtest.SetupLibrary(t, sample.LoadData)
	ctx := context.Background()
	lib := newLibrary(f.DB, testPolicy)
	alice, bob, item := sample.ID("1001"), sample.ID("1002"), sample.ID("book-050")
	loanID := uuid.NewString()
	if _, err := lib.CreateCheckOutLoan(ctx, f.Tenant, storage.CheckOutWrite{LoanID: loanID, UserID: alice, Loan: loanDoc(alice, item), ItemVersion: 1}); err != nil {
		t.Fatal(err)
	}
	doc := func(user, status string) json.RawMessage {
		return json.RawMessage(fmt.Sprintf(`{"userId":%q,"itemId":%q,"loanDate":"2026-01-01T10:00:00.000Z","action":"x","status":{"name":%q}}`,
			user, item, status))
	}
	itemDoc := func(status string) json.RawMessage {
		return json.RawMessage(fmt.Sprintf(`{"title":"t","barcode":"book-050","status":{"name":%q},"materialTypeId":%q,"permanentLoanTypeId":%q}`,
			status, sample.MaterialBook, sample.LoanTypeCanCirculate))
	}
	for _, c := range []struct {
		name string
		err  error
		code string
	}{
		{"close without a check-in", lib.Update(ctx, f.Tenant, storage.Loans, loanID, 1, doc(alice, "Closed")), schemas.CodeCheckInRequired},
		{"move to another borrower", lib.Update(ctx, f.Tenant, storage.Loans, loanID, 1, doc(bob, "Open")), schemas.CodeCheckInRequired},
		{"delete while open", lib.Delete(ctx, f.Tenant, storage.Loans, loanID), schemas.CodeCheckInRequired},
		{"item back to Available with its loan open", lib.Update(ctx, f.Tenant, storage.Items, item, 2, itemDoc("Available")),
			schemas.CodeItemStatusByCirculation},
		{"another item put Checked out", lib.Update(ctx, f.Tenant, storage.Items, sample.ID("book-051"), 1,
			json.RawMessage(fmt.Sprintf(`{"title":"t","barcode":"book-051","status":{"name":"Checked out"},"materialTypeId":%q,"permanentLoanTypeId":%q}`,
				sample.MaterialBook, sample.LoanTypeCanCirculate))), schemas.CodeItemStatusByCirculation},
		{"check in with another borrower", errOf(lib.CheckInLoan(ctx, f.Tenant, storage.CheckInWrite{LoanID: loanID, Loan: doc(bob, "Closed"),
			ItemVersion: 2, LoanVersion: 1})), schemas.CodeCheckInRequired},
	} {
		if !dbtest.IsCode(c.err, c.code) {
			t.Errorf("%s: %v, want %s", c.name, c.err, c.code)
		}
	}
	if n := f.Count(t, "loan", "id = $1 AND status_name = 'Open' AND user_id = $2", loanID, alice); n != 1 {
		t.Errorf("the loan changed")
	}
	if n := f.Count(t, "item", "id = $1 AND status_name = 'Checked out' AND version = 2", item); n != 1 {
		t.Errorf("the item changed")
	}
	// A renewal keeps everything but the due date: fine.
	renewed := json.RawMessage(fmt.Sprintf(`{"userId":%q,"itemId":%q,"loanDate":"2026-01-01T10:00:00.000Z","dueDate":"2026-02-01T10:00:00.000Z",
		"action":"renewed","status":{"name":"Open"}}`, alice, item))
	if err := lib.Update(ctx, f.Tenant, storage.Loans, loanID, 1, renewed); err != nil {
		t.Errorf("renewal: %v", err)
	}
	// The check-in closes it; a second one finds nothing open.
	if err := errOf(lib.CheckInLoan(ctx, f.Tenant, storage.CheckInWrite{LoanID: loanID, Loan: doc(alice, "Closed"), ItemVersion: 2, LoanVersion: 2})); err != nil {
		t.Fatalf("check-in: %v", err)
	}
	if err := errOf(lib.CheckInLoan(ctx, f.Tenant, storage.CheckInWrite{LoanID: loanID, Loan: doc(alice, "Closed"), ItemVersion: 3, LoanVersion: 3})); !dbtest.IsCode(err, "NO_OPEN_LOAN") {
		t.Errorf("a second check-in: %v, want NO_OPEN_LOAN", err)
	}
	// Closed, it may go, and its item may change status freely.
	if err := lib.Update(ctx, f.Tenant, storage.Items, item, 3, itemDoc("Missing")); err != nil {
		t.Errorf("item without an open loan to Missing: %v", err)
	}
	if err := lib.Delete(ctx, f.Tenant, storage.Loans, loanID); err != nil {
		t.Errorf("delete a closed loan: %v", err)
	}
}

// TestLoanWritesAreMadeAtTheVersionRead: a check-in, a renewal and a loan
// action each write the loan only at the _version it read. Once a claim
// returned has moved the loan on, a renewal and a check-in that read it
// before are refused LOAN_CHANGED and change nothing, not the loan, the
// item or the outbox; a write that names no version is refused before
// anything is read.
func TestLoanWritesAreMadeAtTheVersionRead(t *testing.T) {
	t.Parallel()
	f := dbtest.SetupLibrary(t, sample.LoadData)
	ctx := context.Background()
	lib := newLibrary(f.DB, testPolicy)
	alice, item := sample.ID("1001"), sample.ID("book-052")
	// A policy that renews without a limit: only the version and the count
	// read stand between a renewal and the loan.
	renewingPolicy(t, f, lib, 0)
	loanID := uuid.NewString()
	written, err := lib.CreateCheckOutLoan(ctx, f.Tenant, storage.CheckOutWrite{LoanID: loanID, UserID: alice, Loan: loanDoc(alice, item), ItemVersion: 1})
	if err != nil {
		t.Fatal(err)
	}
	var stored struct {
		Version int `json:"_version"`
	}
	if err := json.Unmarshal(written.Loan, &stored); err != nil || stored.Version != 1 {
		t.Fatalf("a new loan's _version: %d (%v), want 1", stored.Version, err)
	}
	loan := func(fields string) json.RawMessage {
		return json.RawMessage(fmt.Sprintf(`{"userId":%q,"itemId":%q,"loanDate":"2026-01-01T10:00:00.000Z","status":{"name":%q},%s}`,
			alice, item, "Open", fields))
	}
	claimed := loan(`"action":"claimedReturned","claimedReturnedDate":"2026-01-02T10:00:00.000Z"`)
	renewed := loan(`"action":"renewed","renewalCount":1,"dueDate":"2026-03-01T10:00:00.000Z"`)
	closed := json.RawMessage(fmt.Sprintf(`{"userId":%q,"itemId":%q,"loanDate":"2026-01-01T10:00:00.000Z","status":{"name":"Closed"},"action":"checkedin"}`,
		alice, item))
	for _, c := range []struct {
		name string
		err  error
	}{
		{"renewal", func() error {
			_, err := lib.RenewLoan(ctx, f.Tenant, storage.RenewalWrite{LoanID: loanID, Loan: renewed})
			return err
		}()},
		{"check-in", errOf(lib.CheckInLoan(ctx, f.Tenant, storage.CheckInWrite{LoanID: loanID, Loan: closed, ItemVersion: 2}))},
		{"claim", lib.ActOnLoan(ctx, f.Tenant, storage.LoanActionWrite{LoanID: loanID, Loan: claimed, ItemVersion: 2})},
	} {
		if !dbtest.IsCode(c.err, schemas.CodeValidation) {
			t.Errorf("a %s naming no version: %v, want %s", c.name, c.err, schemas.CodeValidation)
		}
	}
	// At the version read but not at the renewal count read: nothing.
	_, err = lib.RenewLoan(ctx, f.Tenant, storage.RenewalWrite{LoanID: loanID, LoanVersion: 1, RenewalCount: 5,
		Loan: loan(`"action":"renewed","renewalCount":6,"dueDate":"2026-03-01T10:00:00.000Z"`)})
	if !dbtest.IsCode(err, schemas.CodeLoanChanged) {
		t.Errorf("a renewal at a count other than the loan's: %v, want %s", err, schemas.CodeLoanChanged)
	}
	// Another write of the loan (a plain replacement, its due date moved)
	// moves its version on: a renewal that read it before writes nothing.
	if err := lib.Update(ctx, f.Tenant, storage.Loans, loanID, 1, loan(`"action":"dueDateChanged","dueDate":"2026-02-01T10:00:00.000Z"`)); err != nil {
		t.Fatalf("the due date's change: %v", err)
	}
	_, err = lib.RenewLoan(ctx, f.Tenant, storage.RenewalWrite{LoanID: loanID, Loan: renewed, LoanVersion: 1})
	if !dbtest.IsCode(err, schemas.CodeLoanChanged) {
		t.Errorf("a renewal that read the loan before another write: %v, want %s", err, schemas.CodeLoanChanged)
	}
	if err := lib.ActOnLoan(ctx, f.Tenant, storage.LoanActionWrite{LoanID: loanID, Loan: claimed, ItemVersion: 2, LoanVersion: 2}); err != nil {
		t.Fatalf("the claim: %v", err)
	}
	events := f.Count(t, postgres.TableOutbox, "")
	_, err = lib.RenewLoan(ctx, f.Tenant, storage.RenewalWrite{LoanID: loanID, Loan: renewed, LoanVersion: 2})
	if !dbtest.IsCode(err, schemas.CodeLoanChanged) {
		t.Errorf("a renewal that read the loan before the claim: %v, want %s", err, schemas.CodeLoanChanged)
	}
	err = errOf(lib.CheckInLoan(ctx, f.Tenant, storage.CheckInWrite{LoanID: loanID, Loan: closed, ItemVersion: 3, LoanVersion: 2}))
	if !dbtest.IsCode(err, schemas.CodeLoanChanged) {
		t.Errorf("a check-in that read the loan before the claim: %v, want %s", err, schemas.CodeLoanChanged)
	}
	if n := f.Count(t, postgres.TableLoan, "id = $1 AND version = 3 AND status_name = 'Open' AND jsonb ->> 'action' = 'claimedReturned' AND NOT jsonb ? 'renewalCount'", loanID); n != 1 {
		t.Error("the loan is not as the claim left it")
	}
	if n := f.Count(t, postgres.TableItem, "id = $1 AND status_name = 'Claimed returned' AND version = 3", item); n != 1 {
		t.Error("the item is not as the claim left it")
	}
	if n := f.Count(t, postgres.TableOutbox, ""); n != events {
		t.Errorf("%d events announced by the refused writes, want none", n-events)
	}
}

// errOf is the error of a write that answers what it wrote.
func errOf[T any](_ T, err error) error { return err }
