package lending

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/checkoutlock/circulation-storage/internal/dbtest"
	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/circulation-storage/internal/sample"
	"github.com/google/uuid"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/schemas"
)

// TestTheCheckOutWriteJudgesTheBorrowerAndTheItem: storage's check-out
// write, called directly (circulation's validation bypassed), refuses
// what circulation's validation refuses, whoever calls: an inactive or
// expired borrower, an item whose status is not checked out, a policy
// that does not lend, a borrower blocked from borrowing by hand, an item
// another patron's request is first for; every reason at once, nothing
// written. The overrides a librarian may hold
// lift the block and the policy, never the borrower's status or the
// item's. The sample library has a gate row (its manual block): the
// write runs in full; the lean write (a tenant without one) judges the
// borrower, the item and the policy the same way.
func TestTheCheckOutWriteJudgesTheBorrowerAndTheItem(t *testing.T) {
	t.Parallel()
	f := dbtest.SetupLibrary(t, sample.LoadData)
	ctx := context.Background()
	lib := newLibrary(f.DB, testPolicy)
	alice, carol, frank, erin := sample.ID("1001"), sample.ID("1003"), sample.ID("1006"), sample.ID("1005")
	lost := sample.ID("book-110")
	if _, err := f.DB.Pool.Exec(ctx, `UPDATE `+dbtest.View(f.Tenant, postgres.TableItem)+`
		SET jsonb = jsonb_set(jsonb, '{status,name}', '"Declared lost"') WHERE id = $1`, lost); err != nil {
		t.Fatal(err)
	}
	write := func(user, item string, override func(*storage.CheckOutWrite)) error {
		w := storage.CheckOutWrite{LoanID: uuid.NewString(), UserID: user, Loan: loanDoc(user, item), ItemVersion: 1}
		if override != nil {
			override(&w)
		}
		_, err := lib.CreateCheckOutLoan(ctx, f.Tenant, w)
		return err
	}
	reading := sample.ID("reading-01")
	erinBlocked := []string{schemas.CodeUserBlockedManually}
	for _, c := range []struct {
		name       string
		user, item string
		override   func(*storage.CheckOutWrite)
		want       []string
	}{
		{"an inactive borrower", carol, sample.ID("book-111"), nil, []string{schemas.CodeUserInactive}},
		{"an expired borrower", frank, sample.ID("book-112"), nil, []string{schemas.CodeUserInactive}},
		{"an item declared lost", alice, lost, nil, []string{schemas.CodeItemStatusRefused}},
		{"an item its policy does not lend", alice, reading, nil, []string{schemas.CodeItemNotLoanable}},
		{"an inactive borrower and a lost item, both said", carol, lost, nil, []string{schemas.CodeUserInactive, schemas.CodeItemStatusRefused}},
		{"an inactive borrower and an item another patron's request waits for, both said", carol, sample.ID("book-020"), nil,
			[]string{schemas.CodeUserInactive, schemas.CodeItemRequestedByAnotherPatron}},
		{"an inactive borrower, overrides or not", carol, sample.ID("book-111"),
			func(w *storage.CheckOutWrite) { w.OverridePatronBlock, w.OverrideItemNotLoanable = true, true }, []string{schemas.CodeUserInactive}},
		{"a borrower blocked by hand (the full write)", erin, sample.ID("book-113"), nil, erinBlocked},
	} {
		before := f.Count(t, postgres.TableLoan, "true")
		err := write(c.user, c.item, c.override)
		if got := refusedCodes(err); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
		if n := f.Count(t, postgres.TableLoan, "true"); n != before {
			t.Errorf("%s: %d loans after the refusal, %d before", c.name, n, before)
		}
		if n := f.Count(t, postgres.TableItem, "id = $1 AND version = 1", c.item); n != 1 {
			t.Errorf("%s: the item changed", c.name)
		}
	}
	// The overrides a librarian holds lift the policy and the block.
	if err := write(alice, reading, func(w *storage.CheckOutWrite) { w.OverrideItemNotLoanable = true }); err != nil {
		t.Errorf("an item its policy does not lend, overridden: %v", err)
	}
	if err := write(erin, sample.ID("book-113"), func(w *storage.CheckOutWrite) { w.OverridePatronBlock = true }); err != nil {
		t.Errorf("a borrower blocked by hand, overridden: %v", err)
	}

	// The lean write, for a tenant without a gate row (gate.go).
	lean := dbtest.SetupLibrary(t, sample.LoadData)
	lean.Exec(t, `DELETE FROM `+postgres.Table(postgres.TableTenantGate)+` WHERE tenant_id = $1`, string(lean.Tenant))
	leanLib := newLibrary(lean.DB, testPolicy)
	if leanLib.db.Gates.Has(lean.Tenant) {
		t.Fatal("the tenant's gate row is known: the write would not be lean")
	}
	for _, c := range []struct {
		name, user, item string
		want             []string
	}{
		{"an inactive borrower (lean)", carol, sample.ID("book-111"), []string{schemas.CodeUserInactive}},
		{"an item its policy does not lend (lean)", alice, reading, []string{schemas.CodeItemNotLoanable}},
	} {
		before := lean.Count(t, postgres.TableLoan, "true")
		_, err := leanLib.CreateCheckOutLoan(ctx, lean.Tenant, storage.CheckOutWrite{LoanID: uuid.NewString(), UserID: c.user,
			Loan: loanDoc(c.user, c.item), ItemVersion: 1})
		if got := refusedCodes(err); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
		if n := lean.Count(t, postgres.TableLoan, "true"); n != before {
			t.Errorf("%s: %d loans after the refusal, %d before", c.name, n, before)
		}
	}
}

// TestTheRenewalWriteJudgesEveryRule: storage's renewal write, called
// directly (circulation's validation bypassed), renews only what FOLIO
// renews: each rule broken is refused with its code, nothing written
// (the loan at the version it had), and a renewal at a version another
// write moved on is LOAN_CHANGED first, to be read and judged again.
func TestTheRenewalWriteJudgesEveryRule(t *testing.T) {
	t.Parallel()
	f := dbtest.SetupLibrary(t, sample.LoadData)
	ctx := context.Background()
	lib := newLibrary(f.DB, testPolicy)
	// One policy for everything: renewable once, not while a hold waits.
	policy := renewingPolicy(t, f, lib, 1)
	lend := func(user, item string, override bool) string {
		t.Helper()
		id := uuid.NewString()
		doc := json.RawMessage(fmt.Sprintf(`{"userId":%q,"itemId":%q,"loanDate":"2026-01-01T10:00:00.000Z","dueDate":"2026-12-01T10:00:00.000Z",
		  "action":"checkedout","status":{"name":"Open"}}`, user, item))
		if _, err := lib.CreateCheckOutLoan(ctx, f.Tenant, storage.CheckOutWrite{LoanID: id, UserID: user, Loan: doc, ItemVersion: 1,
			OverridePatronBlock: override}); err != nil {
			t.Fatalf("check-out of %s: %v", item, err)
		}
		return id
	}
	renew := func(id, user, item string, version, count int, due string) error {
		doc := json.RawMessage(fmt.Sprintf(`{"userId":%q,"itemId":%q,"loanDate":"2026-01-01T10:00:00.000Z","dueDate":%q,
		  "action":"renewed","renewalCount":%d,"status":{"name":"Open"}}`, user, item, due, count+1))
		_, err := lib.RenewLoan(ctx, f.Tenant, storage.RenewalWrite{LoanID: id, Loan: doc, LoanVersion: version, RenewalCount: count})
		return err
	}
	alice, bob, dave, erin := sample.ID("1001"), sample.ID("1002"), sample.ID("1004"), sample.ID("1005")
	later := "2026-12-22T10:00:00.000Z"
	check := func(name string, err error, loan string, version int, want ...string) {
		t.Helper()
		if got := refusedCodes(err); !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", name, err, want)
		}
		if n := f.Count(t, postgres.TableLoan, "id = $1 AND version = $2", loan, version); n != 1 {
			t.Errorf("%s: the loan is not at _version %d", name, version)
		}
	}

	once := lend(alice, sample.ID("book-121"), false)
	if err := renew(once, alice, sample.ID("book-121"), 1, 0, later); err != nil {
		t.Fatalf("the first renewal: %v", err)
	}
	check("a second renewal, at the policy's limit", renew(once, alice, sample.ID("book-121"), 2, 1, "2027-01-12T10:00:00.000Z"),
		once, 2, schemas.CodeLoanRenewalLimitReached)
	check("a renewal read before the first", renew(once, alice, sample.ID("book-121"), 1, 0, later), once, 2, schemas.CodeLoanChanged)

	same := lend(alice, sample.ID("book-122"), false)
	check("a renewal that does not move the due date", renew(same, alice, sample.ID("book-122"), 1, 0, "2026-12-01T10:00:00.000Z"),
		same, 1, schemas.CodeRenewalWouldNotChangeDueDate)

	held := lend(alice, sample.ID("book-123"), false)
	request(t, f, sample.ID("book-123"), dave, 1, "Open - Not yet filled")
	check("a renewal with a hold waiting", renew(held, alice, sample.ID("book-123"), 1, 0, later), held, 1,
		schemas.CodeRenewalBlockedByHoldRequest)

	gone := lend(bob, sample.ID("book-124"), false)
	f.Exec(t, `UPDATE `+dbtest.View(f.Tenant, postgres.TablePatron)+` SET jsonb = jsonb_set(jsonb, '{active}', 'false') WHERE id = $1`, bob)
	check("a renewal for an inactive borrower", renew(gone, bob, sample.ID("book-124"), 1, 0, later), gone, 1,
		schemas.CodeUserIsInactiveOrExpired)

	blocked := lend(erin, sample.ID("book-125"), true)
	check("a renewal for a borrower blocked from renewing", renew(blocked, erin, sample.ID("book-125"), 1, 0, later), blocked, 1,
		schemas.CodeUserBlockedManually)

	claimed := lend(dave, sample.ID("book-126"), false)
	if err := lib.ActOnLoan(ctx, f.Tenant, storage.LoanActionWrite{LoanID: claimed, ItemVersion: 2, LoanVersion: 1,
		Loan: json.RawMessage(fmt.Sprintf(`{"userId":%q,"itemId":%q,"loanDate":"2026-01-01T10:00:00.000Z","dueDate":"2026-12-01T10:00:00.000Z",
		  "action":"claimedReturned","claimedReturnedDate":"2026-02-01T10:00:00.000Z","status":{"name":"Open"}}`, dave, sample.ID("book-126")))}); err != nil {
		t.Fatal(err)
	}
	check("a renewal of an item claimed returned", renew(claimed, dave, sample.ID("book-126"), 2, 0, later), claimed, 2,
		schemas.CodeItemClaimedReturnedNotRenewable)

	lent := lend(dave, sample.ID("book-127"), false)
	f.Exec(t, `UPDATE `+dbtest.View(f.Tenant, postgres.TableLoanPolicy)+` SET jsonb = jsonb_set(jsonb, '{loanable}', 'false') WHERE id = $1`, policy)
	check("a renewal under a policy that no longer lends", renew(lent, dave, sample.ID("book-127"), 1, 0, later), lent, 1,
		schemas.CodeItemNotLoanable)

	// Each again as an override: lifting the patron's blocks, then the
	// policy's refusals, then both, refused for what
	// schemas.RenewalOverrideLifts does not lift (the policy no longer
	// lends: every case is refused for that too), else written,
	// renewedThroughOverride.
	override := func(id, user, item string, version, count int, due string, patron, renewal bool) error {
		doc := json.RawMessage(fmt.Sprintf(`{"userId":%q,"itemId":%q,"loanDate":"2026-01-01T10:00:00.000Z","dueDate":%q,
		  "action":"renewedThroughOverride","actionComment":"Desk","renewalCount":%d,"status":{"name":"Open"}}`, user, item, due, count+1))
		_, err := lib.RenewLoan(ctx, f.Tenant, storage.RenewalWrite{LoanID: id, Loan: doc, LoanVersion: version, RenewalCount: count,
			OverrideRenewal: renewal, OverridePatronBlock: patron})
		return err
	}
	notLoanable := schemas.CodeItemNotLoanable
	cases := []struct {
		name, loan, user, item string
		version, count         int
		due                    string
		refused                []string
	}{
		{"at the policy's limit", once, alice, "book-121", 2, 1, "2027-01-12T10:00:00.000Z", []string{notLoanable, schemas.CodeLoanRenewalLimitReached}},
		{"the due date unmoved", same, alice, "book-122", 1, 0, "2026-12-01T10:00:00.000Z", []string{notLoanable, schemas.CodeRenewalWouldNotChangeDueDate}},
		{"a hold waiting", held, alice, "book-123", 1, 0, later, []string{notLoanable, schemas.CodeRenewalBlockedByHoldRequest}},
		{"an inactive borrower", gone, bob, "book-124", 1, 0, later, []string{schemas.CodeUserIsInactiveOrExpired, notLoanable}},
		{"a borrower blocked", blocked, erin, "book-125", 1, 0, later, []string{schemas.CodeUserBlockedManually, notLoanable}},
		{"an item claimed returned", claimed, dave, "book-126", 2, 0, later, []string{notLoanable, schemas.CodeItemClaimedReturnedNotRenewable}},
		{"a policy that no longer lends", lent, dave, "book-127", 1, 0, later, []string{notLoanable}},
	}
	written := map[string]bool{}
	for _, lifts := range []struct{ patron, renewal bool }{{true, false}, {false, true}, {true, true}} {
		for _, c := range cases {
			if written[c.loan] {
				continue
			}
			name := fmt.Sprintf("%s, overridden (patron %t, renewal %t)", c.name, lifts.patron, lifts.renewal)
			err := override(c.loan, c.user, sample.ID(c.item), c.version, c.count, c.due, lifts.patron, lifts.renewal)
			kept := slices.DeleteFunc(slices.Clone(c.refused), func(code string) bool {
				return schemas.RenewalOverrideLifts(code, lifts.patron, lifts.renewal)
			})
			if len(kept) > 0 {
				check(name, err, c.loan, c.version, kept...)
				continue
			}
			written[c.loan] = true
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
			if n := f.Count(t, postgres.TableLoan, "id = $1 AND version = $2 AND jsonb ->> 'action' = 'renewedThroughOverride'", c.loan, c.version+1); n != 1 {
				t.Errorf("%s: the loan is not renewed through the override at _version %d", name, c.version+1)
			}
		}
	}
	if want := []string{once, held, blocked, lent}; len(written) != len(want) {
		t.Errorf("renewed through overrides: %v, want %v", written, want)
	}
}

// TestTheWritesJudgeAutomatedBlocks: a patron group's maximum lost items
// (mod-patron-blocks' condition, blocking borrowing and renewals above a
// limit of 0) stops the check-out's and the renewal's writes, called
// directly, once the patron has a loan declared lost: each refused
// USER_IS_BLOCKED_AUTOMATICALLY with the condition's message, nothing
// written; the patron block override lifts it from the check-out.
func TestTheWritesJudgeAutomatedBlocks(t *testing.T) {
	t.Parallel()
	f := dbtest.SetupLibrary(t, sample.LoadData)
	ctx := context.Background()
	lib := newLibrary(f.DB, testPolicy)
	blockOn(t, f, storage.ConditionLostItems, sample.GroupUndergrad, 0, true, "Too many lost items")
	// Loans renewable: the block is then the renewal's one reason.
	renewingPolicy(t, f, lib, 0)
	alice := sample.ID("1001")
	doc := func(item, fields string) json.RawMessage { return openLoanDoc(alice, item, fields) }
	lost, kept := sample.ID("book-131"), sample.ID("book-132")
	lostLoan, keptLoan := uuid.NewString(), uuid.NewString()
	for id, item := range map[string]string{lostLoan: lost, keptLoan: kept} {
		if _, err := lib.CreateCheckOutLoan(ctx, f.Tenant, storage.CheckOutWrite{LoanID: id, UserID: alice, Loan: doc(item, `"action":"checkedout"`),
			ItemVersion: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if err := lib.ActOnLoan(ctx, f.Tenant, storage.LoanActionWrite{LoanID: lostLoan, ItemVersion: 2, LoanVersion: 1,
		Loan: doc(lost, `"action":"declaredLost","declaredLostDate":"2026-02-01T10:00:00.000Z"`)}); err != nil {
		t.Fatal(err)
	}
	next := sample.ID("book-133")
	before := f.Count(t, postgres.TableLoan, "true")
	_, err := lib.CreateCheckOutLoan(ctx, f.Tenant, storage.CheckOutWrite{LoanID: uuid.NewString(), UserID: alice,
		Loan: doc(next, `"action":"checkedout"`), ItemVersion: 1})
	if got := refusedCodes(err); !slices.Equal(got, []string{schemas.CodeUserBlockedAutomatically}) || !strings.Contains(err.Error(), "Too many lost items") {
		t.Errorf("a check-out above the lost items limit: %v", err)
	}
	if n := f.Count(t, postgres.TableLoan, "true"); n != before {
		t.Errorf("%d loans after the refusal, %d before", n, before)
	}
	_, err = lib.RenewLoan(ctx, f.Tenant, storage.RenewalWrite{LoanID: keptLoan, LoanVersion: 1,
		Loan: doc(kept, `"action":"renewed","renewalCount":1,"dueDate":"2100-01-01T10:00:00.000Z"`)})
	if got := refusedCodes(err); !slices.Equal(got, []string{schemas.CodeUserBlockedAutomatically}) {
		t.Errorf("a renewal above the lost items limit: %v", err)
	}
	if n := f.Count(t, postgres.TableLoan, "id = $1 AND version = 1", keptLoan); n != 1 {
		t.Error("a refused renewal changed the loan")
	}
	if _, err := lib.CreateCheckOutLoan(ctx, f.Tenant, storage.CheckOutWrite{LoanID: uuid.NewString(), UserID: alice,
		Loan: doc(next, `"action":"checkedout"`), ItemVersion: 1, OverridePatronBlock: true}); err != nil {
		t.Errorf("the check-out with the patron block override: %v", err)
	}
}

// TestBlockingWritesWaitForTheBorrowersCheckOut: every write that can
// newly block a patron locks the patron's row first: a loss declared, an
// aging to lost and the billing of a loan aged to lost (their lost item
// fees), a check-in that charges an overdue fine, a fee/fine created (each
// over a fee/fine balance limit of 0), a manual block created. Each waits
// for a check-out's write that holds the row, as every check-out's write
// does before it judges the borrower (locksql.LockRows; played by
// dbtest.HoldAsAWrite, in the lock's mode): nothing of it is written while
// the row is held; once it is let go, it is written, and the patron's
// next check-out is refused. So a check-out that commits after such a
// write judged the patron with it, never from a snapshot taken before it
// committed (the history checker found two check-outs lent past a
// declaration and an aging that way). An aging's and a billing's loan
// falls due only once the row is held, so that no other pass of any
// test's ages or bills it first.
func TestBlockingWritesWaitForTheBorrowersCheckOut(t *testing.T) {
	t.Parallel()
	alice := sample.ID("1001")
	fines := func(t *testing.T, f dbtest.Fixture) int {
		return f.Count(t, postgres.TableFeeFineAccount, "user_id = $1", alice)
	}
	loanIs := func(cond string) func(t *testing.T, f dbtest.Fixture, loanID string) bool {
		return func(t *testing.T, f dbtest.Fixture, loanID string) bool {
			return f.Count(t, postgres.TableLoan, "id = $1 AND "+cond, loanID) == 1
		}
	}
	for _, c := range []struct {
		name string
		// due makes the loan due for the write, once the row is held (nil:
		// nothing to make).
		due     func(t *testing.T, f dbtest.Fixture, loanID string)
		write   func(ctx context.Context, f dbtest.Fixture, lib library, loanID string) error
		written func(t *testing.T, f dbtest.Fixture, loanID string) bool
		refused string
	}{{
		name: "a loss declared",
		write: func(ctx context.Context, f dbtest.Fixture, lib library, loanID string) error {
			return lib.ActOnLoan(ctx, f.Tenant, storage.LoanActionWrite{LoanID: loanID, ItemVersion: 2, LoanVersion: 1,
				ServicePointID: sample.ServicePointDesk1, Loan: openLoanDoc(alice, sample.ID("book-131"),
					`"action":"declaredLost","declaredLostDate":"2026-02-01T10:00:00.000Z"`)})
		},
		written: loanIs(`jsonb ->> 'action' = 'declaredLost'`),
		refused: schemas.CodeUserBlockedAutomatically,
	}, {
		name: "an aging to lost",
		due: func(t *testing.T, f dbtest.Fixture, _ string) {
			f.Exec(t, `UPDATE `+dbtest.View(f.Tenant, postgres.TableLostItemPolicy)+`
				SET jsonb = jsonb || '{"itemAgedLostOverdue":{"duration":1,"intervalId":"Minutes"}}' WHERE id = $1`, sample.LostItemFeePolicy)
		},
		write: func(ctx context.Context, f dbtest.Fixture, _ library, _ string) error {
			_, _, _, err := AgeToLost(ctx, f.DB, 100, nil)
			return err
		},
		written: loanIs(`jsonb ->> 'action' = '` + ActionAgedToLost + `'`),
		refused: schemas.CodeUserBlockedAutomatically,
	}, {
		name: "a billing of a loan aged to lost",
		due: func(t *testing.T, f dbtest.Fixture, loanID string) {
			f.Exec(t, `UPDATE `+dbtest.View(f.Tenant, postgres.TableLoan)+` SET jsonb = jsonb || jsonb_build_object('action', $2::text,
				'itemStatus', $3::text, 'agedToLostDelayedBilling', '{"lostItemHasBeenBilled":false,"dateLostItemShouldBeBilled":"2026-01-03T00:00:00.000Z"}'::jsonb)
				WHERE id = $1`, loanID, ActionAgedToLost, schemas.ItemAgedToLost)
		},
		write: func(ctx context.Context, f dbtest.Fixture, _ library, _ string) error {
			_, _, _, err := BillAgedToLost(ctx, f.DB, 100, nil)
			return err
		},
		written: loanIs(`jsonb #>> '{agedToLostDelayedBilling,lostItemHasBeenBilled}' = 'true'`),
		refused: schemas.CodeUserBlockedAutomatically,
	}, {
		name:    "a check-in with an overdue fine",
		write:   checkInOverdue,
		written: func(t *testing.T, f dbtest.Fixture, _ string) bool { return fines(t, f) == 1 },
		refused: schemas.CodeUserBlockedAutomatically,
	}, {
		name: "a manual block",
		write: func(ctx context.Context, f dbtest.Fixture, lib library, _ string) error {
			_, err := lib.Create(ctx, f.Tenant, storage.ManualBlocks, uuid.NewString(),
				json.RawMessage(fmt.Sprintf(`{"userId":%q,"desc":"Unreturned books","borrowing":true}`, alice)))
			return err
		},
		written: func(t *testing.T, f dbtest.Fixture, _ string) bool {
			return f.Count(t, postgres.TableManualBlock, "user_id = $1", alice) == 1
		},
		refused: schemas.CodeUserBlockedManually,
	}, {
		name: "a fee/fine",
		write: func(ctx context.Context, f dbtest.Fixture, lib library, _ string) error {
			var feeType, name string
			if err := f.DB.Pool.QueryRow(ctx, `SELECT id::text, fee_fine_type FROM `+dbtest.View(f.Tenant, postgres.TableFeeFineType)+`
				ORDER BY id LIMIT 1`).Scan(&feeType, &name); err != nil {
				return err
			}
			_, err := lib.Create(ctx, f.Tenant, storage.FeeFineAccounts, uuid.NewString(), json.RawMessage(fmt.Sprintf(`{"amount":5.00,"remaining":5.00,
			  "status":{"name":%q},"paymentStatus":{"name":%q},"feeFineId":%q,"feeFineType":%q,"ownerId":%q,"userId":%q}`,
				schemas.FeeFineOpen, schemas.PaymentStatusOutstanding, feeType, name, sample.FeeFineOwner, alice)))
			return err
		},
		written: func(t *testing.T, f dbtest.Fixture, _ string) bool { return fines(t, f) == 1 },
		refused: schemas.CodeUserBlockedAutomatically,
	}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := dbtest.SetupLibrary(t, sample.LoadData)
			ctx := context.Background()
			lib := newLibrary(f.DB, testPolicy)
			limitOn(t, f, schemas.ConditionFeeFineBalance, sample.GroupUndergrad, 0, blocked{borrowing: true}, "Fees owed")
			loanID := lendOverdue(t, f, lib)
			held := dbtest.HoldAsAWrite(t, f, postgres.TablePatron, alice)
			if c.due != nil {
				c.due(t, f, loanID)
			}
			answer := held.Behind(t, f, c.name, func() error { return c.write(ctx, f, lib, loanID) })
			if c.written(t, f, loanID) {
				t.Fatalf("%s was written while a check-out's write held the patron's row", c.name)
			}
			held.Let(t)
			if err := <-answer; err != nil {
				t.Fatalf("%s, the patron's row let go: %v", c.name, err)
			}
			if !c.written(t, f, loanID) {
				t.Fatalf("%s was not written once the patron's row was let go", c.name)
			}
			_, err := lib.CreateCheckOutLoan(ctx, f.Tenant, storage.CheckOutWrite{LoanID: uuid.NewString(), UserID: alice,
				Loan: loanDoc(alice, sample.ID("book-133")), ItemVersion: 1})
			if got := refusedCodes(err); !slices.Equal(got, []string{c.refused}) {
				t.Errorf("a check-out after %s: %v, want %s", c.name, err, c.refused)
			}
		})
	}
}

// TestLoanWritesTakeTheItemBeforeTheLoan: an aging to lost and a
// check-in take the loan's item before the loan, as a recall does (the
// item's queue, then the loan it marks), so that no two of them wait for
// each other. A transaction of the test's own holds the item's row, as a
// recall being placed does; the aging and the check-in wait for it
// without holding the loan: another transaction locks the loan at once
// (FOR NO KEY UPDATE NOWAIT). Once the item is let go, each is written.
func TestLoanWritesTakeTheItemBeforeTheLoan(t *testing.T) {
	t.Parallel()
	item := sample.ID("book-131")
	for _, c := range []struct {
		name string
		// ripe makes the loan ready for the write, once the item is held.
		ripe  func(t *testing.T, f dbtest.Fixture)
		write func(ctx context.Context, f dbtest.Fixture, lib library, loanID string) error
	}{{
		name: "an aging to lost",
		ripe: func(t *testing.T, f dbtest.Fixture) {
			f.Exec(t, `UPDATE `+dbtest.View(f.Tenant, postgres.TableLostItemPolicy)+`
				SET jsonb = jsonb || '{"itemAgedLostOverdue":{"duration":1,"intervalId":"Minutes"}}' WHERE id = $1`, sample.LostItemFeePolicy)
		},
		write: func(ctx context.Context, f dbtest.Fixture, _ library, _ string) error {
			_, _, _, err := AgeToLost(ctx, f.DB, 100, nil)
			return err
		},
	}, {
		name:  "a check-in",
		ripe:  func(*testing.T, dbtest.Fixture) {},
		write: checkInOverdue,
	}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := dbtest.SetupLibrary(t, sample.LoadData)
			ctx := context.Background()
			lib := newLibrary(f.DB, testPolicy)
			loanID := lendOverdue(t, f, lib)
			held := dbtest.HoldAsAWrite(t, f, postgres.TableItem, item)
			c.ripe(t, f)
			answer := held.Behind(t, f, c.name, func() error { return c.write(ctx, f, lib, loanID) })
			if len(answer) != 0 {
				t.Fatalf("%s answered (%v) while the item's row was held", c.name, <-answer)
			}
			tx, err := f.DB.Pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			_, err = tx.Exec(ctx, `SELECT 1 FROM `+dbtest.View(f.Tenant, postgres.TableLoan)+` WHERE id = $1 FOR NO KEY UPDATE NOWAIT`, loanID)
			_ = tx.Rollback(ctx)
			if err != nil {
				t.Errorf("%s, waiting for the item's row, holds the loan: %v", c.name, err)
			}
			held.Let(t)
			if err := <-answer; err != nil {
				t.Fatalf("%s, the item let go: %v", c.name, err)
			}
			if n := f.Count(t, postgres.TableLoan, "id = $1 AND version = 2", loanID); n != 1 {
				t.Errorf("%s did not write the loan once the item was let go", c.name)
			}
		})
	}
}

// lendOverdue lends Alice book-131 at the first desk, due on 2 January
// 2026, and answers the loan's id.
func lendOverdue(t *testing.T, f dbtest.Fixture, lib library) string {
	t.Helper()
	loanID := uuid.NewString()
	if _, err := lib.CreateCheckOutLoan(context.Background(), f.Tenant, storage.CheckOutWrite{LoanID: loanID, UserID: sample.ID("1001"), ItemVersion: 1,
		Loan: json.RawMessage(fmt.Sprintf(`{"userId":%q,"itemId":%q,"loanDate":"2026-01-01T10:00:00.000Z","dueDate":"2026-01-02T10:00:00.000Z",
		  "action":"checkedout","status":{"name":"Open"},"checkoutServicePointId":%q}`, sample.ID("1001"), sample.ID("book-131"), sample.ServicePointDesk1))}); err != nil {
		t.Fatal(err)
	}
	return loanID
}

// checkInOverdue checks lendOverdue's loan (loanID) in at the first desk
// on 1 February 2026, a month overdue.
func checkInOverdue(ctx context.Context, f dbtest.Fixture, lib library, loanID string) error {
	_, err := lib.CheckInLoan(ctx, f.Tenant, storage.CheckInWrite{LoanID: loanID, ItemVersion: 2, LoanVersion: 1,
		Loan: json.RawMessage(fmt.Sprintf(`{"userId":%q,"itemId":%q,"loanDate":"2026-01-01T10:00:00.000Z","dueDate":"2026-01-02T10:00:00.000Z",
		  "action":"checkedin","status":{"name":"Closed"},"returnDate":"2026-02-01T10:00:00.000Z","checkinServicePointId":%q}`,
			sample.ID("1001"), sample.ID("book-131"), sample.ServicePointDesk1))})
	return err
}

// TestRenewalsAndRequestsWaitForAWriteThatBlocks: a renewal's write and
// a request's judged write lock the borrower's row before they judge the
// borrower's automated blocks, as every write that can newly block the
// borrower locks it first (a loss declared, an aging to lost, a billing).
// A transaction of the test's own plays such a write: it locks Alice's
// row as such a write does (dbtest.HoldAsAWrite) and marks an item of
// hers Declared lost, over her group's lost items
// limit of 0, which blocks renewals and requests. Her renewal of another
// loan, and her page of an available item, wait for it; once it commits,
// each is refused USER_IS_BLOCKED_AUTOMATICALLY, nothing written: judged
// with the loss, never from a snapshot taken before it committed.
func TestRenewalsAndRequestsWaitForAWriteThatBlocks(t *testing.T) {
	t.Parallel()
	alice, lost, kept, shelved := sample.ID("1001"), sample.ID("book-131"), sample.ID("book-132"), sample.ID("book-133")
	for _, c := range []struct {
		name string
		// rules sets the tenant's rules, before the loans.
		rules func(t *testing.T, f dbtest.Fixture, lib library)
		// write is the judged write, keptLoan Alice's loan of kept.
		write func(ctx context.Context, f dbtest.Fixture, lib library, keptLoan string) error
		// unwritten says whether the refused write left everything as it was.
		unwritten func(t *testing.T, f dbtest.Fixture, keptLoan string) bool
	}{{
		name: "a renewal",
		// Loans renewable: the block is then the renewal's one reason.
		rules: func(t *testing.T, f dbtest.Fixture, lib library) { renewingPolicy(t, f, lib, 0) },
		write: func(ctx context.Context, f dbtest.Fixture, lib library, keptLoan string) error {
			_, err := lib.RenewLoan(ctx, f.Tenant, storage.RenewalWrite{LoanID: keptLoan, LoanVersion: 1,
				Loan: openLoanDoc(alice, kept, `"action":"renewed","renewalCount":1,"dueDate":"2100-01-01T10:00:00.000Z"`)})
			return err
		},
		unwritten: func(t *testing.T, f dbtest.Fixture, keptLoan string) bool {
			return f.Count(t, postgres.TableLoan, "id = $1 AND version = 1", keptLoan) == 1
		},
	}, {
		name:  "a request",
		rules: func(*testing.T, dbtest.Fixture, library) {},
		write: func(ctx context.Context, f dbtest.Fixture, lib library, _ string) error {
			_, err := lib.Create(storage.WithRequestRules(ctx), f.Tenant, storage.Requests, uuid.NewString(), placeDoc("Page", alice, shelved))
			return err
		},
		unwritten: func(t *testing.T, f dbtest.Fixture, _ string) bool {
			return f.Count(t, postgres.TableRequest, "item_id = $1", shelved) == 0 &&
				f.Count(t, postgres.TableItem, "id = $1 AND version = 1", shelved) == 1
		},
	}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := dbtest.SetupLibrary(t, sample.LoadData)
			ctx := context.Background()
			lib := newLibrary(f.DB, testPolicy)
			limitOn(t, f, storage.ConditionLostItems, sample.GroupUndergrad, 0, blocked{borrowing: true, renewals: true, requests: true}, "Too many lost items")
			c.rules(t, f, lib)
			keptLoan := uuid.NewString()
			for id, item := range map[string]string{uuid.NewString(): lost, keptLoan: kept} {
				if _, err := lib.CreateCheckOutLoan(ctx, f.Tenant, storage.CheckOutWrite{LoanID: id, UserID: alice,
					Loan: openLoanDoc(alice, item, `"action":"checkedout"`), ItemVersion: 1}); err != nil {
					t.Fatal(err)
				}
			}
			held := dbtest.HoldAsAWrite(t, f, postgres.TablePatron, alice)
			if _, err := held.Tx.Exec(ctx, `UPDATE `+dbtest.View(f.Tenant, postgres.TableItem)+`
				SET jsonb = jsonb_set(jsonb, '{status,name}', '"Declared lost"') WHERE id = $1`, lost); err != nil {
				t.Fatal(err)
			}
			answer := held.Behind(t, f, c.name, func() error { return c.write(ctx, f, lib, keptLoan) })
			if len(answer) != 0 {
				t.Fatalf("%s was answered (%v) while a write that blocks the borrower held the borrower's row", c.name, <-answer)
			}
			if err := held.Tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			err := <-answer
			if got := refusedCodes(err); !slices.Equal(got, []string{schemas.CodeUserBlockedAutomatically}) {
				t.Errorf("%s, the loss committed while it waited: %v, want %s", c.name, err, schemas.CodeUserBlockedAutomatically)
			}
			if !c.unwritten(t, f, keptLoan) {
				t.Errorf("%s refused wrote something", c.name)
			}
		})
	}
}

// openLoanDoc is an open loan of item to user, due in 2099, with more
// fields (JSON members).
func openLoanDoc(user, item, fields string) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"userId":%q,"itemId":%q,"loanDate":"2026-01-01T10:00:00.000Z","dueDate":"2099-12-01T10:00:00.000Z",
	  "status":{"name":"Open"},%s}`, user, item, fields))
}

// renewingPolicy makes the tenant's circulation rules a fallback of one
// policy that lends for three weeks and renews, numberAllowed times (0:
// without a limit), and answers its id.
func renewingPolicy(t *testing.T, f dbtest.Fixture, lib library, numberAllowed int) string {
	t.Helper()
	ctx := context.Background()
	renewals := `"unlimited":true`
	if numberAllowed > 0 {
		renewals = fmt.Sprintf(`"unlimited":false,"numberAllowed":%d`, numberAllowed)
	}
	policy := uuid.NewString()
	if _, err := lib.Create(ctx, f.Tenant, storage.LoanPolicies, policy, json.RawMessage(`{"name":"Renews","loanable":true,"renewable":true,
	  "loansPolicy":{"profileId":"Rolling","period":{"duration":3,"intervalId":"Weeks"}},
	  "renewalsPolicy":{`+renewals+`,"renewFromId":"CURRENT_DUE_DATE"}}`)); err != nil {
		t.Fatal(err)
	}
	if err := NewRules(f.DB, testPolicy).SetRules(ctx, f.Tenant, storage.CirculationRules{FallbackLoanPolicyID: policy,
		Rules: []storage.CirculationRule{}}); err != nil {
		t.Fatal(err)
	}
	return policy
}
