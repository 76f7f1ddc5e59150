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
	"github.com/checkoutlock/schemas/errs"
)

// TestAChangeOfDueDateIsJudgedInItsWrite: a librarian's change of a
// loan's due date, written as a loan action, is judged by storage whoever
// sends it. Its item must be at the version the change read (an item
// changed since: CodeVersionConflict, nothing written), and in a status
// that allows it (a claimed returned item's loan keeps its date, refused
// in the table's words); the loan at the version read (CodeLoanChanged).
// A recall's mark stays while a recall of the item is open, and goes with
// the last one.
func TestAChangeOfDueDateIsJudgedInItsWrite(t *testing.T) {
	t.Parallel()
	f := dbtest.SetupLibrary(t, sample.LoadData)
	ctx := context.Background()
	lib := newLibrary(f.DB, testPolicy)
	policy := renewingPolicy(t, f, lib, 0)
	alice, bob, item := sample.ID("1001"), sample.ID("1002"), sample.ID("book-101")
	loanID := uuid.NewString()
	loan := func(due, action, more string) json.RawMessage {
		return json.RawMessage(fmt.Sprintf(`{"userId":%q,"itemId":%q,"loanDate":%q,"dueDate":%q,"action":%q,"loanPolicyId":%q,
		  "status":{"name":"Open"}%s}`, alice, item, schemas.FormatTime(time.Now().Add(-time.Hour)), due, action, policy, more))
	}
	if _, err := lib.CreateCheckOutLoan(ctx, f.Tenant, storage.CheckOutWrite{LoanID: loanID, UserID: alice,
		Loan: loan("2027-01-10T23:59:59.000Z", "checkedout", ""), ItemVersion: 1}); err != nil {
		t.Fatal(err)
	}
	stored := func() (version int, doc map[string]any) {
		t.Helper()
		var raw []byte
		if err := f.DB.Pool.QueryRow(ctx, `SELECT version, jsonb FROM `+postgres.Table(postgres.TableLoan)+` WHERE tenant_id = $2 AND id = $1`,
			loanID, string(f.Tenant)).Scan(&version, &raw); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, &doc); err != nil {
			t.Fatal(err)
		}
		return version, doc
	}
	change := func(due string, itemVersion, loanVersion int, more string) error {
		return lib.ActOnLoan(ctx, f.Tenant, storage.LoanActionWrite{LoanID: loanID, ItemVersion: itemVersion, LoanVersion: loanVersion,
			Loan: loan(due, schemas.LoanDueDateChanged, more)})
	}
	// The check-out moved the item to version 2: a change that read it
	// before is refused, nothing written.
	if err := change("2027-02-01T23:59:59.000Z", 1, 1, ""); !dbtest.IsCode(err, schemas.CodeVersionConflict) {
		t.Fatalf("a change that read the item before the check-out: %v, want %s", err, schemas.CodeVersionConflict)
	}
	if v, doc := stored(); v != 1 || doc["dueDate"] != "2027-01-10T23:59:59.000Z" {
		t.Fatalf("after a refused change: version %d, %v", v, doc)
	}
	if err := change("2027-02-01T23:59:59.000Z", 2, 1, ""); err != nil {
		t.Fatalf("the change: %v", err)
	}
	if v, doc := stored(); v != 2 || doc["dueDate"] != "2027-02-01T23:59:59.000Z" || doc["action"] != schemas.LoanDueDateChanged {
		t.Fatalf("the changed loan: version %d, %v", v, doc)
	}
	if err := change("2027-03-01T23:59:59.000Z", 2, 1, ""); !dbtest.IsCode(err, schemas.CodeLoanChanged) {
		t.Fatalf("a change that read the loan before the last: %v, want %s", err, schemas.CodeLoanChanged)
	}
	// A recall's mark, with a recall open: kept.
	if _, err := lib.Create(storage.WithRequestRules(ctx), f.Tenant, storage.Requests, uuid.NewString(), placeDoc("Recall", bob, item)); err != nil {
		t.Fatalf("the recall: %v", err)
	}
	v, doc := stored()
	if doc["dueDateChangedByRecall"] != true {
		t.Fatalf("the recalled loan: %v, want marked", doc)
	}
	if err := change("2027-01-20T23:59:59.000Z", 2, v, `,"dueDateChangedByRecall":true`); err != nil {
		t.Fatalf("the change of a recalled loan: %v", err)
	}
	if _, doc := stored(); doc["dueDateChangedByRecall"] != true || doc["dueDate"] != "2027-01-20T23:59:59.000Z" {
		t.Fatalf("changed with a recall open: %v, want the mark kept", doc)
	}
	// The recall closed: the next change takes the mark away.
	f.Exec(t, `UPDATE `+dbtest.View(f.Tenant, postgres.TableRequest)+` SET jsonb = jsonb || '{"status":"Closed - Cancelled"}' WHERE item_id = $1`, item)
	v, _ = stored()
	if err := change("2027-01-25T23:59:59.000Z", 2, v, `,"dueDateChangedByRecall":true`); err != nil {
		t.Fatalf("the change once the recall closed: %v", err)
	}
	if _, doc := stored(); doc["dueDateChangedByRecall"] != false {
		t.Fatalf("changed with no recall open: %v, want the mark gone", doc)
	}
	// Claimed returned: storage refuses the change in the table's words,
	// whoever sends it.
	v, _ = stored()
	claimed := json.RawMessage(fmt.Sprintf(`{"userId":%q,"itemId":%q,"loanDate":"2026-01-01T10:00:00.000Z","dueDate":"2027-01-25T23:59:59.000Z",
	  "action":"claimedReturned","claimedReturnedDate":"2026-01-02T10:00:00.000Z","status":{"name":"Open"}}`, alice, item))
	if err := lib.ActOnLoan(ctx, f.Tenant, storage.LoanActionWrite{LoanID: loanID, Loan: claimed, ItemVersion: 2, LoanVersion: v}); err != nil {
		t.Fatalf("the claim: %v", err)
	}
	v, _ = stored()
	err := change("2027-04-01T23:59:59.000Z", 3, v, "")
	want, _ := schemas.LoanActionRefused(schemas.LoanActionChangeDueDate, schemas.ItemClaimedReturned)
	if e, ok := errs.As(err); !ok || e.Code != want.Code || e.Message != want.Message {
		t.Fatalf("a change of a claimed returned item's loan: %v, want %s %q", err, want.Code, want.Message)
	}
	if after, doc := stored(); after != v || doc["action"] != "claimedReturned" {
		t.Errorf("after the refused change: version %d, %v", after, doc)
	}
}
