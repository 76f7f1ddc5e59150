package lending

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/circulation-storage/internal/dbtest"
	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/circulation-storage/internal/sample"
	"github.com/checkoutlock/schemas"
)

// TestARenewalAndARecallAreDecidedOneAfterTheOther: a renewal of a loan
// and a recall of its item at once, or a hold, twenty rounds, one kind of
// request in turn. The renewal's statement is held on the loan's row
// (another client locks it) after it has begun, and the request is placed
// meanwhile. Decided one after the other, either the request comes first
// and the renewal is refused for it, or the renewal comes first and the
// request is placed after it (a recall shortening the renewed loan):
// never a loan renewed with a recall open that left it alone, nor one
// renewed past a hold placed while it ran (each judging from what it read
// before the other's commit). A recall marks the loan, so its write meets
// the renewal's at the loan's version too; a hold writes nothing of the
// loan, and only the item's queue, which the renewal takes, orders them.
func TestARenewalAndARecallAreDecidedOneAfterTheOther(t *testing.T) {
	t.Parallel()
	f := dbtest.SetupLibrary(t, sample.LoadData)
	ctx := context.Background()
	lib := newLibrary(f.DB, testPolicy)
	policy := renewingPolicy(t, f, lib, 0)
	// A recall gives the borrower two weeks; the loan is due tomorrow, so
	// a recall alone leaves it as it is, and one after a renewal of three
	// weeks shortens it.
	f.Exec(t, `UPDATE `+dbtest.View(f.Tenant, postgres.TableLoanPolicy)+` SET jsonb = jsonb || '{"requestManagement":{"recalls":
		{"recallReturnInterval":{"duration":2,"intervalId":"Weeks"}}}}' WHERE id = $1`, policy)
	alice, bob := sample.ID("1001"), sample.ID("1002")
	stamp := func(d time.Duration) string { return schemas.FormatTime(time.Now().Add(d)) }
	for round := range 20 {
		item := sample.ID(fmt.Sprintf("book-%03d", 101+round))
		kind := []string{"Recall", "Hold"}[round%2]
		loanID := uuid.NewString()
		loan := func(due, action string, count int) json.RawMessage {
			return json.RawMessage(fmt.Sprintf(`{"userId":%q,"itemId":%q,"loanDate":%q,"dueDate":%q,"action":%q,"renewalCount":%d,
			  "loanPolicyId":%q,"status":{"name":"Open"}}`, alice, item, stamp(-24*time.Hour), due, action, count, policy))
		}
		if _, err := lib.CreateCheckOutLoan(ctx, f.Tenant, storage.CheckOutWrite{LoanID: loanID, UserID: alice,
			Loan: loan(stamp(24*time.Hour), "checkedout", 0), ItemVersion: 1}); err != nil {
			t.Fatalf("round %d: check-out: %v", round, err)
		}
		row := dbtest.Hold(t, f, postgres.TableLoan, loanID)
		renewed := make(chan error, 1)
		go func() {
			_, err := lib.RenewLoan(ctx, f.Tenant, storage.RenewalWrite{LoanID: loanID, LoanVersion: 1, RenewalCount: 0,
				Loan: loan(stamp(21*24*time.Hour), "renewed", 1)})
			renewed <- err
		}()
		var renewal int
		dbtest.Eventually(t, "the renewal waiting for the loan's row", func() bool { renewal = row.Blocked(t, f); return renewal != 0 })
		recalled := make(chan error, 1)
		go func() {
			_, err := lib.Create(storage.WithRequestRules(ctx), f.Tenant, storage.Requests, uuid.NewString(), placeDoc(kind, bob, item))
			recalled <- err
		}()
		var recallErr error
		recallDone := false
		dbtest.Eventually(t, "the recall placed, or waiting behind the renewal", func() bool {
			select {
			case recallErr = <-recalled:
				recallDone = true
				return true
			default:
				return blockedBy(t, f, renewal)
			}
		})
		// The request placed while the renewal ran, not waiting for it.
		placedMeanwhile := recallDone && recallErr == nil
		row.Let(t)
		renewErr := <-renewed
		if !recallDone {
			recallErr = <-recalled
		}
		var got struct {
			RenewalCount int  `json:"renewalCount"`
			ByRecall     bool `json:"dueDateChangedByRecall"`
		}
		var doc []byte
		if err := f.DB.Pool.QueryRow(ctx, `SELECT jsonb FROM `+postgres.Table(postgres.TableLoan)+` WHERE tenant_id = $2 AND id = $1`,
			loanID, string(f.Tenant)).Scan(&doc); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(doc, &got); err != nil {
			t.Fatal(err)
		}
		recalls := f.Count(t, postgres.TableRequest, "item_id = $1 AND jsonb ->> 'requestType' = 'Recall' AND left(status, 5) = 'Open '", item)
		if kind == "Hold" {
			switch {
			case renewErr == nil && placedMeanwhile:
				t.Errorf("round %d: the loan renewed past a hold placed while the renewal ran: %s", round, doc)
			case renewErr != nil && !dbtest.IsCode(renewErr, "RENEWAL_BLOCKED_BY_HOLD_REQUEST"):
				t.Errorf("round %d: the renewal: %v, want written or refused for the hold", round, renewErr)
			case recallErr != nil:
				t.Errorf("round %d: the hold: %v, want placed", round, recallErr)
			}
			continue
		}
		switch {
		case got.RenewalCount == 1 && recalls == 1 && !got.ByRecall:
			t.Errorf("round %d: the loan renewed (%v) and a recall open (%v) that left it alone: %s", round, renewErr, recallErr, doc)
		case renewErr == nil && recallErr == nil && !got.ByRecall:
			t.Errorf("round %d: both written, the loan not recalled: %s", round, doc)
		case renewErr != nil && !dbtest.IsCode(renewErr, "RENEWAL_BLOCKED_BY_RECALL"):
			t.Errorf("round %d: the renewal: %v, want written or refused for the recall", round, renewErr)
		case recallErr != nil:
			t.Errorf("round %d: the recall: %v, want placed", round, recallErr)
		}
	}
}
