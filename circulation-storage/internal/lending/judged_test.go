package lending

import (
	"context"
	"slices"
	"testing"

	"github.com/checkoutlock/circulation-storage/internal/dbtest"
	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/circulation-storage/internal/records"
	"github.com/google/uuid"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/schemas"
)

// TestTheCheckOutWriteJudgesTheBorrowerAndTheItem: storage's check-out
// write, called directly (circulation's validation bypassed), refuses
// what circulation's validation refuses, whoever calls: an inactive or
// expired borrower, an item whose status is not checked out, a policy
// that does not lend, a borrower blocked from borrowing by hand; every
// reason at once, nothing written. The overrides a librarian may hold
// lift the block and the policy, never the borrower's status or the
// item's. The sample library has a gate row (its manual block): the
// write runs in full; the lean write (a tenant without one) judges the
// borrower, the item and the policy the same way.
func TestTheCheckOutWriteJudgesTheBorrowerAndTheItem(t *testing.T) {
	t.Parallel()
	f := dbtest.SetupLibrary(t, records.LoadData)
	ctx := context.Background()
	lib := newLibrary(f.DB, testPolicy)
	alice, carol, frank, erin := records.SampleID("1001"), records.SampleID("1003"), records.SampleID("1006"), records.SampleID("1005")
	lost := records.SampleID("book-110")
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
	reading := records.SampleID("reading-01")
	erinBlocked := []string{schemas.CodeUserBlockedManually}
	for _, c := range []struct {
		name       string
		user, item string
		override   func(*storage.CheckOutWrite)
		want       []string
	}{
		{"an inactive borrower", carol, records.SampleID("book-111"), nil, []string{schemas.CodeUserInactive}},
		{"an expired borrower", frank, records.SampleID("book-112"), nil, []string{schemas.CodeUserInactive}},
		{"an item declared lost", alice, lost, nil, []string{schemas.CodeItemStatusRefused}},
		{"an item its policy does not lend", alice, reading, nil, []string{schemas.CodeItemNotLoanable}},
		{"an inactive borrower and a lost item, both said", carol, lost, nil, []string{schemas.CodeUserInactive, schemas.CodeItemStatusRefused}},
		{"an inactive borrower, overrides or not", carol, records.SampleID("book-111"),
			func(w *storage.CheckOutWrite) { w.OverridePatronBlock, w.OverrideItemNotLoanable = true, true }, []string{schemas.CodeUserInactive}},
		{"a borrower blocked by hand (the full write)", erin, records.SampleID("book-113"), nil, erinBlocked},
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
	if err := write(erin, records.SampleID("book-113"), func(w *storage.CheckOutWrite) { w.OverridePatronBlock = true }); err != nil {
		t.Errorf("a borrower blocked by hand, overridden: %v", err)
	}

	// The lean write, for a tenant without a gate row (gate.go).
	lean := dbtest.SetupLibrary(t, records.LoadData)
	lean.Exec(t, `DELETE FROM `+postgres.Table(postgres.TableTenantGate)+` WHERE tenant_id = $1`, string(lean.Tenant))
	leanLib := newLibrary(lean.DB, testPolicy)
	if leanLib.db.Gates.Has(lean.Tenant) {
		t.Fatal("the tenant's gate row is known: the write would not be lean")
	}
	for _, c := range []struct {
		name, user, item string
		want             []string
	}{
		{"an inactive borrower (lean)", carol, records.SampleID("book-111"), []string{schemas.CodeUserInactive}},
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
