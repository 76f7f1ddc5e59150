package lending

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/checkoutlock/circulation-storage/internal/dbtest"
	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/circulation-storage/internal/sample"
	"github.com/google/uuid"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/schemas"
)

// blocked is what a patron block condition blocks: its blockBorrowing,
// blockRenewals and blockRequests.
type blocked struct{ borrowing, renewals, requests bool }

// limitOn makes one of the tenant's patron block conditions block what b
// says, and nothing else, with message, gives group a limit of value for
// it, and answers the limit's id.
func limitOn(t *testing.T, f dbtest.Fixture, condition, group string, value int, b blocked, message string) string {
	t.Helper()
	ctx := context.Background()
	lib := newLibrary(f.DB, testPolicy)
	doc, err := lib.Get(ctx, f.Tenant, storage.PatronBlockConditions, condition)
	if err != nil {
		t.Fatalf("the tenant's condition %s: %v", condition, err)
	}
	var c map[string]any
	if err := json.Unmarshal(doc, &c); err != nil {
		t.Fatal(err)
	}
	c["blockBorrowing"], c["blockRenewals"], c["blockRequests"], c["message"] = b.borrowing, b.renewals, b.requests, message
	doc, _ = json.Marshal(c)
	if err := lib.Update(ctx, f.Tenant, storage.PatronBlockConditions, condition, 0, doc); err != nil {
		t.Fatal(err)
	}
	id := uuid.NewString()
	if _, err := lib.Create(ctx, f.Tenant, storage.PatronBlockLimits, id, json.RawMessage(fmt.Sprintf(
		`{"patronGroupId":%q,"conditionId":%q,"value":%d}`, group, condition, value))); err != nil {
		t.Fatal(err)
	}
	return id
}

// blockOn is limitOn blocking borrowing, and renewals when renewals.
func blockOn(t *testing.T, f dbtest.Fixture, condition, group string, value int, renewals bool, message string) {
	t.Helper()
	limitOn(t, f, condition, group, value, blocked{borrowing: true, renewals: renewals}, message)
}

// TestChargedOutLimitHoldsInTheWrite: graduates may have at most three
// items charged out (an automated block; the sample rules give them no
// item limit). Twenty check-out writes at once for a fresh graduate,
// without a lock, five rounds: exactly three are written, the others
// refused with the condition's message, and the database holds no more.
// (mutations.txt: charged-out-in-write.)
func TestChargedOutLimitHoldsInTheWrite(t *testing.T) {
	t.Parallel()
	f := dbtest.SetupLibrary(t, sample.LoadData)
	blockOn(t, f, storage.ConditionItemsChargedOut, sample.GroupGraduate, 3, false, "You have reached the maximum of items on loan")
	raceWrites(t, f, sample.GroupGraduate, false, schemas.CodeUserBlockedAutomatically)
}

// TestAutomatedBlocksAsModPatronBlocks: validation reports the conditions
// a patron is over, as mod-patron-blocks computes them: maximum items
// charged out blocks borrowing at the limit (renewals only above it);
// lost and overdue items block above the limit; a condition that blocks
// nothing is never reported.
func TestAutomatedBlocksAsModPatronBlocks(t *testing.T) {
	t.Parallel()
	f := dbtest.SetupLibrary(t, sample.LoadData)
	rules := NewRules(f.DB, testPolicy)
	lib := newLibrary(f.DB, testPolicy)
	ctx := context.Background()
	// Dave (faculty) has three loans: one overdue, one of an item
	// declared lost.
	dave := sample.ID("1004")
	for _, b := range []string{"book-071", "book-072", "book-073"} {
		if _, err := lib.CreateCheckOutLoan(ctx, f.Tenant, storage.CheckOutWrite{LoanID: uuid.NewString(), UserID: dave,
			Loan: loanDoc(dave, sample.ID(b)), ItemVersion: 1}); err != nil {
			t.Fatal(err)
		}
	}
	f.Exec(t, `UPDATE `+dbtest.View(f.Tenant, postgres.TableLoan)+` SET jsonb = jsonb_set(jsonb, '{dueDate}', '"2020-01-01T00:00:00.000Z"') WHERE item_id = $1`,
		sample.ID("book-071"))
	f.Exec(t, `UPDATE `+dbtest.View(f.Tenant, postgres.TableItem)+` SET jsonb = jsonb_set(jsonb, '{status,name}', '"Declared lost"') WHERE id = $1`,
		sample.ID("book-072"))

	blocks := func() []map[string]any {
		t.Helper()
		read, err := rules.ReadForCheckOut(ctx, f.Tenant, "book-074", "1004")
		if err != nil {
			t.Fatal(err)
		}
		var out []map[string]any
		if read.AutomatedBlocks != nil {
			if err := json.Unmarshal(read.AutomatedBlocks, &out); err != nil {
				t.Fatal(err)
			}
		}
		return out
	}
	if got := blocks(); got != nil {
		t.Fatalf("blocks %v before any condition blocks, want none", got)
	}
	// At the limit of three charged out: borrowing blocked, renewals not.
	blockOn(t, f, storage.ConditionItemsChargedOut, sample.GroupFaculty, 3, true, "Too many items")
	// One lost item: not above a limit of 1. One overdue: above 0.
	blockOn(t, f, storage.ConditionLostItems, sample.GroupFaculty, 1, true, "")
	blockOn(t, f, storage.ConditionOverdueItems, sample.GroupFaculty, 0, true, "Overdue items")
	got := blocks() // by condition id
	want := []map[string]any{
		{"patronBlockConditionId": storage.ConditionItemsChargedOut, "blockBorrowing": true, "blockRenewals": false,
			"blockRequests": false, "message": "Too many items"},
		{"patronBlockConditionId": storage.ConditionOverdueItems, "blockBorrowing": true, "blockRenewals": true,
			"blockRequests": false, "message": "Overdue items"},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("blocks\n got %v\nwant %v", got, want)
	}
	// A second lost item is above the limit of 1; the condition's message
	// is empty, so its name is the message.
	f.Exec(t, `UPDATE `+dbtest.View(f.Tenant, postgres.TableItem)+` SET jsonb = jsonb_set(jsonb, '{status,name}', '"Aged to lost"') WHERE id = $1`,
		sample.ID("book-073"))
	got = blocks()
	if len(got) != 3 || got[2]["patronBlockConditionId"] != storage.ConditionLostItems ||
		got[2]["message"] != "Maximum number of lost items" || got[2]["blockBorrowing"] != true {
		t.Errorf("blocks with two items lost: %v, want the lost-items block named by its condition", got)
	}
}
