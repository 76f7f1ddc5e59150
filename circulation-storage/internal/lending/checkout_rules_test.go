package lending

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/checkoutlock/circulation-storage/internal/dbtest"
	"github.com/checkoutlock/circulation-storage/internal/sample"
	"github.com/checkoutlock/circulation-storage/locksql"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
	"github.com/google/uuid"

	storage "github.com/checkoutlock/circulation-storage"
)

// TestTheWriteJudgesEveryCheckOutRuleAndNoOther: the write has a condition
// for each of schemas.CheckOutRules and none for a rule the table does not
// have; a rule added to one side only stops the program.
func TestTheWriteJudgesEveryCheckOutRuleAndNoOther(t *testing.T) {
	if missing, unknown := schemas.SameRules(writeConditions); len(missing)+len(unknown) > 0 {
		t.Fatalf("the write judges no %v, and judges %v, which are no check-out rules", missing, unknown)
	}
	panics := func(what string, list []schemas.CheckOutRule, conditions map[string]writeRule) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Errorf("%s: no panic", what)
			}
		}()
		judgedBy(list, conditions)
	}
	extra := schemas.CheckOutRule{Name: "extra"}
	panics("a rule without a condition", append(slices.Clone(schemas.CheckOutRules), extra), writeConditions)
	more := map[string]writeRule{"extra": {broken: "false"}}
	for k, v := range writeConditions {
		more[k] = v
	}
	panics("a condition of no rule", schemas.CheckOutRules, more)
}

// TestARuleAddedToTheTableIsTheWritesVerdictWordsAndOfflineReport: a rule
// written once, in the table and its condition, and nowhere else, refuses
// a check-out that breaks it with its code and words, writing nothing,
// lets one that does not through, and is what a loan made offline past it
// records it broke; an override of another rule does not lift it.
func TestARuleAddedToTheTableIsTheWritesVerdictWordsAndOfflineReport(t *testing.T) {
	t.Parallel()
	f := dbtest.SetupLibrary(t, sample.LoadData)
	ctx := context.Background()
	barred := sample.ID("1002")
	rule := schemas.CheckOutRule{Name: "barred_patron", Of: schemas.RuleOfPatron, Code: "PATRON_BARRED",
		Says: "This patron is barred", Words: "to a barred patron"}
	list := append(slices.Clone(schemas.CheckOutRules), rule)
	conditions := map[string]writeRule{rule.Name: {broken: fmt.Sprintf(`(@loan::jsonb ->> 'userId') = '%s'`, barred)}}
	for k, v := range writeConditions {
		conditions[k] = v
	}
	lib := newLibrary(f.DB, testPolicy)
	lib.Loans.rules = judgedBy(list, conditions)
	lib.Loans.write = locksql.NewNamed(checkOutSQL(false, lib.Loans.rules), checkOutNames...)
	lib.Loans.writeLean = locksql.NewNamed(checkOutSQL(true, lib.Loans.rules), checkOutNames...)

	write := func(user, item string, offline bool) (string, error) {
		id := uuid.NewString()
		doc := loanDoc(user, item)
		if offline {
			var m map[string]any
			_ = json.Unmarshal(doc, &m)
			m["offline"] = map[string]any{"transactionDate": "2026-01-01T10:00:00.000Z"}
			doc, _ = json.Marshal(m)
		}
		_, err := lib.CreateCheckOutLoan(ctx, f.Tenant, storage.CheckOutWrite{LoanID: id, UserID: user, Loan: doc, ItemVersion: 1,
			OverrideItemLimit: true, OverrideItemNotLoanable: true, Offline: offline})
		return id, err
	}
	id, err := write(barred, sample.ID("book-001"), false)
	var refusal *errs.Refusal
	if !errors.As(err, &refusal) || len(refusal.Errors) != 1 || refusal.Errors[0].Code != rule.Code || refusal.Errors[0].Message != rule.Says {
		t.Fatalf("a check-out breaking the new rule: %v, want a refusal %s %q", err, rule.Code, rule.Says)
	}
	if n := f.Count(t, "loan", "id = $1", id); n != 0 {
		t.Fatalf("the refused check-out wrote %d loans", n)
	}
	if n := f.Count(t, "item", "id = $1 AND status_name = 'Available' AND version = 1", sample.ID("book-001")); n != 1 {
		t.Fatalf("the refused check-out changed the item")
	}
	if _, err := write(sample.ID("1001"), sample.ID("book-001"), false); err != nil {
		t.Fatalf("a check-out the new rule does not stop: %v", err)
	}
	id, err = write(barred, sample.ID("book-003"), true)
	if err != nil {
		t.Fatalf("a check-out made offline past the new rule: %v", err)
	}
	var broken []string
	if err := f.DB.Pool.QueryRow(ctx, `SELECT ARRAY(SELECT jsonb_array_elements_text(jsonb #> '{offline,brokenRules}')) FROM `+
		dbtest.View(f.Tenant, "loan")+` WHERE id = $1`, id).Scan(&broken); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(broken, []string{rule.Code}) {
		t.Fatalf("the loan made offline records it broke %v, want [%s]", broken, rule.Code)
	}
}
