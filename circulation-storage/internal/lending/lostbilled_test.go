package lending

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/checkoutlock/circulation-storage/internal/dbtest"
	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/circulation-storage/internal/requests"
	"github.com/checkoutlock/circulation-storage/internal/sample"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/schemas"
)

// TestALoanIsBilledForItsLossOnce: a loan's lost item fee and processing
// fee are each charged once, whatever writes bill it: declared lost,
// claimed returned, then declared lost again; aged to lost with its
// billing delayed, declared lost, then the billing's pass. A loan aged to
// lost and billed is billed nothing more when declared lost, not even
// the processing fee its aging did not charge. The sample's policy
// charges 25.00, and 5.00 for processing when the patron declares the
// loss (chargeAmountItemPatron), not when the loan ages
// (chargeAmountItemSystem).
func TestALoanIsBilledForItsLossOnce(t *testing.T) {
	t.Parallel()
	loanID, itemID := sample.ID("loan-"+sample.HanasBooks[0]), sample.ID(sample.HanasBooks[0])
	// act writes action on the loan as read now, at the versions read.
	act := func(t *testing.T, f dbtest.Fixture, lib library, action string, extra map[string]any) {
		t.Helper()
		ctx := context.Background()
		var loanVersion, itemVersion int
		if err := f.DB.Pool.QueryRow(ctx, `SELECT (SELECT version FROM `+dbtest.View(f.Tenant, postgres.TableLoan)+` WHERE id = $1),
			(SELECT version FROM `+dbtest.View(f.Tenant, postgres.TableItem)+` WHERE id = $2)`, loanID, itemID).Scan(&loanVersion, &itemVersion); err != nil {
			t.Fatal(err)
		}
		doc, err := lib.Get(ctx, f.Tenant, storage.Loans, loanID)
		if err != nil {
			t.Fatal(err)
		}
		var loan map[string]any
		if err := json.Unmarshal(doc, &loan); err != nil {
			t.Fatal(err)
		}
		delete(loan, "_version")
		delete(loan, "metadata")
		loan["action"] = action
		for k, v := range extra {
			loan[k] = v
		}
		b, err := json.Marshal(loan)
		if err != nil {
			t.Fatal(err)
		}
		if err := lib.ActOnLoan(ctx, f.Tenant, storage.LoanActionWrite{LoanID: loanID, Loan: b, ItemVersion: itemVersion,
			LoanVersion: loanVersion, ServicePointID: sample.ServicePointDesk2}); err != nil {
			t.Fatalf("%s: %v", action, err)
		}
	}
	// billed is the loan's accounts, each its type and amount, by type.
	billed := func(t *testing.T, f dbtest.Fixture) map[string]string {
		t.Helper()
		rows, err := f.DB.Pool.Query(context.Background(), `SELECT jsonb ->> 'feeFineType', (jsonb ->> 'amount')::numeric::text
			FROM `+dbtest.View(f.Tenant, postgres.TableFeeFineAccount)+` WHERE loan_id = $1 ORDER BY 1`, loanID)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		got := map[string]string{}
		for rows.Next() {
			var kind, amount string
			if err := rows.Scan(&kind, &amount); err != nil {
				t.Fatal(err)
			}
			if _, twice := got[kind]; twice {
				t.Errorf("%s charged twice: %s, then %s", kind, got[kind], amount)
			}
			got[kind] = amount
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return got
	}
	// passed runs a pass of the sweeper's (of every tenant's loans: other
	// tests' too, so its counts are not this test's) and wants this
	// tenant's loan to hold cond after it.
	passed := func(t *testing.T, f dbtest.Fixture, pass func(context.Context, *postgres.DB, int, []requests.Ref) (int, int, []requests.Failure, error), cond string) {
		t.Helper()
		_, _, failed, err := pass(context.Background(), f.DB, 100, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, fail := range failed {
			if fail.Tenant == f.Tenant {
				t.Fatalf("the pass failed this tenant's loan: %v", fail.Err)
			}
		}
		if n := f.Count(t, postgres.TableLoan, "id = $1 AND "+cond, loanID); n != 1 {
			t.Fatalf("after the pass, the loan does not hold %s", cond)
		}
	}
	aged := `jsonb ->> 'action' = '` + ActionAgedToLost + `'`
	once := map[string]string{schemas.FeeFineLostItemFee: "25.00", schemas.FeeFineLostItemProcessing: "5.00"}
	want := func(t *testing.T, f dbtest.Fixture, when string) {
		t.Helper()
		if got := billed(t, f); len(got) != len(once) || got[schemas.FeeFineLostItemFee] != once[schemas.FeeFineLostItemFee] ||
			got[schemas.FeeFineLostItemProcessing] != once[schemas.FeeFineLostItemProcessing] {
			t.Fatalf("%s: the loan's accounts are %v, want %v", when, got, once)
		}
	}

	t.Run("declared lost again after a claim returned", func(t *testing.T) {
		t.Parallel()
		f := dbtest.SetupLibrary(t, sample.LoadData)
		lib := newLibrary(f.DB, testPolicy)
		act(t, f, lib, "declaredLost", map[string]any{"declaredLostDate": "2026-01-02T10:00:00.000Z"})
		want(t, f, "declared lost")
		act(t, f, lib, "claimedReturned", map[string]any{"claimedReturnedDate": "2026-01-03T10:00:00.000Z"})
		act(t, f, lib, "declaredLost", map[string]any{"declaredLostDate": "2026-01-04T10:00:00.000Z"})
		want(t, f, "declared lost again")
	})

	t.Run("aged to lost and billed, then declared lost", func(t *testing.T) {
		t.Parallel()
		f := dbtest.SetupLibrary(t, sample.LoadData)
		lib := newLibrary(f.DB, testPolicy)
		f.Exec(t, `UPDATE `+dbtest.View(f.Tenant, postgres.TableLostItemPolicy)+` SET jsonb = jsonb ||
			'{"itemAgedLostOverdue":{"duration":1,"intervalId":"Minutes"}}' WHERE id = $1`, sample.LostItemFeePolicy)
		f.Exec(t, `UPDATE `+dbtest.View(f.Tenant, postgres.TableLoan)+` SET jsonb = jsonb || '{"dueDate":"2020-01-01T00:00:00.000Z"}' WHERE id = $1`, loanID)
		passed(t, f, AgeToLost, aged+` AND jsonb #>> '{agedToLostDelayedBilling,lostItemHasBeenBilled}' = 'true'`)
		agedOnly := map[string]string{schemas.FeeFineLostItemFee: "25.00"}
		if got := billed(t, f); len(got) != 1 || got[schemas.FeeFineLostItemFee] != "25.00" {
			t.Fatalf("aged and billed: the loan's accounts are %v, want %v", got, agedOnly)
		}
		act(t, f, lib, "declaredLost", map[string]any{"declaredLostDate": "2026-01-02T10:00:00.000Z"})
		if got := billed(t, f); len(got) != 1 || got[schemas.FeeFineLostItemFee] != "25.00" {
			t.Fatalf("declared lost after its aging billed it: the loan's accounts are %v, want %v", got, agedOnly)
		}
	})

	t.Run("aged to lost, declared lost before its billing, then the billing's pass", func(t *testing.T) {
		t.Parallel()
		f := dbtest.SetupLibrary(t, sample.LoadData)
		lib := newLibrary(f.DB, testPolicy)
		f.Exec(t, `UPDATE `+dbtest.View(f.Tenant, postgres.TableLostItemPolicy)+` SET jsonb = jsonb ||
			'{"itemAgedLostOverdue":{"duration":1,"intervalId":"Minutes"},"patronBilledAfterAgedLost":{"duration":1,"intervalId":"Days"},"chargeAmountItemSystem":true}'
			WHERE id = $1`, sample.LostItemFeePolicy)
		f.Exec(t, `UPDATE `+dbtest.View(f.Tenant, postgres.TableLoan)+` SET jsonb = jsonb || '{"dueDate":"2020-01-01T00:00:00.000Z"}' WHERE id = $1`, loanID)
		passed(t, f, AgeToLost, aged+` AND jsonb #>> '{agedToLostDelayedBilling,lostItemHasBeenBilled}' = 'false'`)
		if got := billed(t, f); len(got) != 0 {
			t.Fatalf("aged, its billing a day away: the loan's accounts are %v, want none", got)
		}
		act(t, f, lib, "declaredLost", map[string]any{"declaredLostDate": "2026-01-02T10:00:00.000Z"})
		want(t, f, "declared lost")
		// Its day to be billed comes.
		f.Exec(t, `UPDATE `+dbtest.View(f.Tenant, postgres.TableLoan)+`
			SET jsonb = jsonb_set(jsonb, '{agedToLostDelayedBilling,dateLostItemShouldBeBilled}', '"2020-01-02T00:00:00.000Z"') WHERE id = $1`, loanID)
		passed(t, f, BillAgedToLost, `jsonb #>> '{agedToLostDelayedBilling,lostItemHasBeenBilled}' = 'true'`)
		want(t, f, "the billing's pass")
	})
}
