package lending

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/checkoutlock/circulation-storage/internal/dbtest"
	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/circulation-storage/internal/sample"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
)

// refusedAs is every error of a refusal, in order, each as its code, its
// message and its parameters.
func refusedAs(err error) []string {
	var list []*errs.Error
	if r, ok := err.(*errs.Refusal); ok {
		list = r.Errors
	} else if e, ok := errs.As(err); ok {
		list = []*errs.Error{e}
	}
	var out []string
	for _, e := range list {
		var params []string
		for _, p := range e.Parameters {
			params = append(params, p.Key+"="+p.Value)
		}
		out = append(out, e.Code+": "+e.Message+" {"+strings.Join(params, " ")+"}")
	}
	return out
}

// checkedOut writes loan id of item to user, lent a week ago and due at
// due under the standard policy, with more fields (JSON members, "" for
// none); it answers the loan as stored.
func checkedOut(t *testing.T, f dbtest.Fixture, lib library, user, item, due, more string) map[string]any {
	t.Helper()
	ctx := context.Background()
	id := uuid.NewString()
	if more != "" {
		more = "," + more
	}
	if _, err := lib.CreateCheckOutLoan(ctx, f.Tenant, storage.CheckOutWrite{LoanID: id, UserID: user, ItemVersion: 1,
		Loan: json.RawMessage(fmt.Sprintf(`{"userId":%q,"itemId":%q,"loanDate":%q,"dueDate":%q,"loanPolicyId":%q,
		  "action":"checkedout","status":{"name":"Open"}%s}`, user, item, stamp(-7*24*time.Hour), due, sample.PolicyStandard, more))}); err != nil {
		t.Fatalf("the loan of %s: %v", item, err)
	}
	return storedLoan(t, f, id)
}

// storedLoan is loan id as stored, without its metadata.
func storedLoan(t *testing.T, f dbtest.Fixture, id string) map[string]any {
	t.Helper()
	var raw []byte
	if err := f.DB.Pool.QueryRow(context.Background(), `SELECT jsonb FROM `+dbtest.View(f.Tenant, postgres.TableLoan)+` WHERE id = $1`, id).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	delete(out, "metadata")
	return out
}

// TestAutomatedBlocksStopRequests: FOLIO's RequestsAPICreationTests
// (requestRefusedWhenAutomatedBlockExistsForPatron), with the blocks
// computed as mod-patron-blocks computes them. Dave (faculty) has three
// items out, one of them overdue and one declared lost; faculty may have
// one item charged out and none overdue, and those conditions block
// requests; the lost items condition blocks borrowing only. Dave's recall
// of Alice's book is refused 422 with one USER_IS_BLOCKED_AUTOMATICALLY a
// condition over its limit that blocks requests, in the condition's
// words, and nothing is written: no request, Alice's loan as it was.
// FOLIO's order puts them after a request of the item the requester has
// already and before the item on loan to them and a manual block; under
// the limits, the recall holds.
func TestAutomatedBlocksStopRequests(t *testing.T) {
	t.Parallel()
	f := dbtest.SetupLibrary(t, sample.LoadData)
	ctx := storage.WithRequestRules(context.Background())
	lib := newLibrary(f.DB, testPolicy)
	alice, dave := sample.ID("1001"), sample.ID("1004")
	alices, mine, overdue, lost := sample.ID("book-061"), sample.ID("book-062"), sample.ID("book-063"), sample.ID("book-064")
	loan := checkedOut(t, f, lib, alice, alices, stamp(14*24*time.Hour), "")
	checkedOut(t, f, lib, dave, mine, stamp(14*24*time.Hour), "")
	overdueLoan := checkedOut(t, f, lib, dave, overdue, stamp(-time.Hour), "")
	checkedOut(t, f, lib, dave, lost, stamp(14*24*time.Hour), "")
	f.Exec(t, `UPDATE `+dbtest.View(f.Tenant, postgres.TableItem)+` SET jsonb = jsonb_set(jsonb, '{status,name}', '"Declared lost"') WHERE id = $1`, lost)
	// Three charged out, the lost one among them, above the limit of one;
	// one overdue, above none.
	chargedOut := limitOn(t, f, storage.ConditionItemsChargedOut, sample.GroupFaculty, 1, blocked{requests: true},
		"You have reached the maximum number of items charged out")
	limitOn(t, f, storage.ConditionOverdueItems, sample.GroupFaculty, 0, blocked{requests: true}, "")
	blockOn(t, f, storage.ConditionLostItems, sample.GroupFaculty, 0, true, "Lost items")
	blocked := []string{
		schemas.CodeUserBlockedAutomatically + ": You have reached the maximum number of items charged out {patronBlockConditionId=" + storage.ConditionItemsChargedOut + "}",
		schemas.CodeUserBlockedAutomatically + ": Maximum number of overdue items {patronBlockConditionId=" + storage.ConditionOverdueItems + "}",
	}

	_, err := lib.Create(ctx, f.Tenant, storage.Requests, uuid.NewString(), placeDoc("Recall", dave, alices))
	if got := refusedAs(err); !slices.Equal(got, blocked) {
		t.Errorf("Dave's recall:\n got %q\nwant %q", got, blocked)
	}
	if n := f.Count(t, postgres.TableRequest, "item_id = $1", alices); n != 0 {
		t.Errorf("%d requests stored after the refusal", n)
	}
	if got := storedLoan(t, f, loan["id"].(string)); fmt.Sprint(got) != fmt.Sprint(loan) {
		t.Errorf("Alice's loan after the refused recall:\n%v\nwant\n%v", got, loan)
	}

	// A hold of his own overdue book, with a manual block of his
	// requests: the automated blocks after nothing of the item's status,
	// before the loan and the manual block.
	f.Exec(t, `INSERT INTO `+dbtest.View(f.Tenant, postgres.TableManualBlock)+` (id, jsonb) VALUES (gen_random_uuid(),
		jsonb_build_object('userId', $1::text, 'desc', 'Unpaid fines', 'requests', true))`, dave)
	_, err = lib.Create(ctx, f.Tenant, storage.Requests, uuid.NewString(), placeDoc("Hold", dave, overdue))
	want := append(slices.Clone(blocked),
		schemas.CodeItemAlreadyLoaned+": This requester currently has this item on loan. {itemId="+overdue+" userId="+dave+"}",
		schemas.CodeUserBlockedManually+": Patron blocked from requesting {requesterId="+dave+"}")
	if got := refusedAs(err); !slices.Equal(got, want) {
		t.Errorf("Dave's hold of his own book:\n got %q\nwant %q", got, want)
	}
	f.Exec(t, `DELETE FROM `+dbtest.View(f.Tenant, postgres.TableManualBlock)+` WHERE user_id = $1`, dave)

	// Under both limits (the overdue book due again, three items allowed
	// out), the recall holds.
	f.Exec(t, `UPDATE `+dbtest.View(f.Tenant, postgres.TableLoan)+` SET jsonb = jsonb_set(jsonb, '{dueDate}', to_jsonb($2::text)) WHERE id = $1`,
		overdueLoan["id"], stamp(24*time.Hour))
	f.Exec(t, `UPDATE `+dbtest.View(f.Tenant, postgres.TableBlockLimit)+` SET jsonb = jsonb_set(jsonb, '{value}', '3') WHERE id = $1`, chargedOut)
	if _, err := lib.Create(ctx, f.Tenant, storage.Requests, uuid.NewString(), placeDoc("Recall", dave, alices)); err != nil {
		t.Errorf("Dave's recall under the limits: %v", err)
	}
}

// TestARecallMarksTheLoanItDoesNotShorten: FOLIO's
// LoanDueDatesAfterRecallTests (recallRequestWithMGDAndRDValuesShouldNotChangeDueDateToRD,
// shouldNotExtendLoanDueDateWhenCurrentDueDateIsBeforeRecallDueDate,
// shouldNotExtendLoanDueDateIfOverdueLoanIsRecalled). Under a policy
// recalling in two months, a recall of a loan due in two days, and of one
// overdue, keeps each loan's due date and marks it all the same, once:
// dueDateChangedByRecall, the action recallrequested, its actionComment
// and reminders gone (FOLIO's UpdateLoan), one version on. A second recall
// leaves the loan alone.
func TestARecallMarksTheLoanItDoesNotShorten(t *testing.T) {
	t.Parallel()
	f := dbtest.SetupLibrary(t, sample.LoadData)
	ctx := storage.WithRequestRules(context.Background())
	lib := newLibrary(f.DB, testPolicy)
	f.Exec(t, `UPDATE `+dbtest.View(f.Tenant, postgres.TableLoanPolicy)+` SET jsonb = jsonb || '{"requestManagement":{"recalls":
		{"recallReturnInterval":{"duration":2,"intervalId":"Months"}}}}' WHERE id = $1`, sample.PolicyStandard)
	alice, bob, dave := sample.ID("1001"), sample.ID("1002"), sample.ID("1004")
	for _, c := range []struct{ name, item, due string }{
		{"due in two days", sample.ID("book-065"), stamp(48 * time.Hour)},
		{"overdue", sample.ID("book-066"), stamp(-time.Hour)},
	} {
		loan := checkedOut(t, f, lib, alice, c.item, c.due,
			`"actionComment":"Overridden at the desk","reminders":{"lastFeeBilled":{"number":1,"date":"2026-01-08T10:00:00.000Z"}}`)
		if _, err := lib.Create(ctx, f.Tenant, storage.Requests, uuid.NewString(), placeDoc("Recall", bob, c.item)); err != nil {
			t.Fatalf("%s: Bob's recall: %v", c.name, err)
		}
		want := map[string]any{}
		for k, v := range loan {
			want[k] = v
		}
		delete(want, "actionComment")
		delete(want, "reminders")
		want["dueDateChangedByRecall"], want["action"], want["_version"] = true, "recallrequested", loan["_version"].(float64)+1
		got := storedLoan(t, f, loan["id"].(string))
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: the recalled loan\n%v\nwant\n%v", c.name, got, want)
		}
		if _, err := lib.Create(ctx, f.Tenant, storage.Requests, uuid.NewString(), placeDoc("Recall", dave, c.item)); err != nil {
			t.Fatalf("%s: Dave's recall: %v", c.name, err)
		}
		if again := storedLoan(t, f, loan["id"].(string)); fmt.Sprint(again) != fmt.Sprint(got) {
			t.Errorf("%s: a second recall changed the loan:\n%v\nwas\n%v", c.name, again, got)
		}
	}
}

// TestAChangedRequesterIsJudgedAsARequestPlaced: a request whose requester
// is changed is a request placed anew for the new requester, judged by
// the same rules: Bob's hold of Alice's book handed to Erin, blocked from
// requesting (her card reported stolen), is refused with her block, and
// the request stays Bob's; to Dave, who may request, it is his.
func TestAChangedRequesterIsJudgedAsARequestPlaced(t *testing.T) {
	t.Parallel()
	f := dbtest.SetupLibrary(t, sample.LoadData)
	ctx := storage.WithRequestRules(context.Background())
	lib := newLibrary(f.DB, testPolicy)
	alice, bob, erin, dave := sample.ID("1001"), sample.ID("1002"), sample.ID("1005"), sample.ID("1004")
	book := sample.ID("book-061")
	checkedOut(t, f, lib, alice, book, stamp(14*24*time.Hour), "")
	id := uuid.NewString()
	if _, err := lib.Create(ctx, f.Tenant, storage.Requests, id, placeDoc("Hold", bob, book)); err != nil {
		t.Fatalf("Bob's hold: %v", err)
	}
	requester := func() string {
		t.Helper()
		var r string
		if err := f.DB.Pool.QueryRow(context.Background(), `SELECT jsonb ->> 'requesterId' FROM `+dbtest.View(f.Tenant, postgres.TableRequest)+
			` WHERE id = $1`, id).Scan(&r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	err := lib.Update(ctx, f.Tenant, storage.Requests, id, 1, placeDoc("Hold", erin, book))
	if got := refusedCodes(err); !slices.Equal(got, []string{schemas.CodeUserBlockedManually}) {
		t.Fatalf("Bob's hold handed to Erin, blocked from requesting: %v, want %s", err, schemas.CodeUserBlockedManually)
	}
	if r := requester(); r != bob {
		t.Fatalf("the request's requester after the refusal: %s, want Bob's %s", r, bob)
	}
	if err := lib.Update(ctx, f.Tenant, storage.Requests, id, 1, placeDoc("Hold", dave, book)); err != nil {
		t.Fatalf("Bob's hold handed to Dave: %v", err)
	}
	if r := requester(); r != dave {
		t.Fatalf("the request's requester: %s, want Dave's %s", r, dave)
	}
}
