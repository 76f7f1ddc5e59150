package schemas

import (
	"encoding/json"
	"slices"
	"testing"
)

// TestLoanActionsTable: every desk action is in the table; a renewal is
// refused in the lost and claimed-returned statuses with FOLIO's codes, a
// claim and a declaration of loss once made are refused a second time, a
// change of due date is refused in the statuses FOLIO's
// ItemStatusValidator refuses, a check-in is refused in no status, and an action the table does not know
// is refused.
func TestLoanActionsTable(t *testing.T) {
	for _, a := range LoanActions {
		if _, known := loanActionRefusals[a]; !known {
			t.Errorf("the desk's action %q is not in the table", a)
		}
	}
	for _, c := range []struct {
		action, status string
		refused        bool
		code, message  string
	}{
		{LoanActionRenew, ItemCheckedOut, false, "", ""},
		{LoanActionRenew, ItemDeclaredLost, true, CodeItemDeclaredLostNotRenewable, "item is Declared lost"},
		{LoanActionRenew, ItemAgedToLost, true, CodeItemAgedToLostNotRenewable, "item is Aged to lost"},
		{LoanActionRenew, ItemClaimedReturned, true, CodeItemClaimedReturnedNotRenewable, "item is Claimed returned"},
		{LoanActionClaimReturned, ItemCheckedOut, false, "", ""},
		{LoanActionClaimReturned, ItemDeclaredLost, false, "", ""},
		{LoanActionClaimReturned, ItemClaimedReturned, true, CodeValidation, "The item is already claimed returned"},
		{LoanActionDeclareLost, ItemClaimedReturned, false, "", ""},
		{LoanActionDeclareLost, ItemAgedToLost, false, "", ""},
		{LoanActionDeclareLost, ItemDeclaredLost, true, CodeValidation, "The item is already declared lost"},
		{LoanActionChangeDueDate, ItemCheckedOut, false, "", ""},
		{LoanActionChangeDueDate, ItemAwaitingPickup, false, "", ""},
		{LoanActionChangeDueDate, ItemDeclaredLost, true, CodeValidation, "item is Declared lost"},
		{LoanActionChangeDueDate, ItemAgedToLost, true, CodeValidation, "item is Aged to lost"},
		{LoanActionChangeDueDate, ItemClaimedReturned, true, CodeValidation, "item is Claimed returned"},
		{"renewal", ItemCheckedOut, true, CodeValidation, "no such loan action: renewal"},
	} {
		r, refused := LoanActionRefused(c.action, c.status)
		if refused != c.refused || r.Code != c.code || r.Message != c.message {
			t.Errorf("%s in %q: refused %v %+v, want %v %s %q", c.action, c.status, refused, r, c.refused, c.code, c.message)
		}
	}
	for _, status := range ItemStatuses {
		if r, refused := LoanActionRefused(LoanActionCheckIn, status); refused {
			t.Errorf("a check-in in %q is refused: %+v", status, r)
		}
	}
	if got := LoanActionRefusedStatuses(LoanActionRenew); len(got) != 3 {
		t.Errorf("the statuses a renewal is refused in: %v, want the three of FOLIO's RenewalValidator", got)
	}
}

// TestTheClaimResolutionsAreTheSchemas: the resolutions a check-in's body
// may name are the table's, asked only of an item claimed returned, and
// each records its own action only for such an item; only the library's
// finding waives the overdue fine.
func TestTheClaimResolutionsAreTheSchemas(t *testing.T) {
	raw, err := files.ReadFile("check-in-by-barcode-request.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Properties struct {
			ClaimedReturnedResolution struct{ Enum []string }
		}
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if got, want := slices.Sorted(slices.Values(doc.Properties.ClaimedReturnedResolution.Enum)), ClaimResolutions(ItemClaimedReturned); !slices.Equal(got, want) {
		t.Fatalf("the schema's resolutions %q, the table's %q", got, want)
	}
	for _, status := range []string{ItemCheckedOut, ItemDeclaredLost, ItemAgedToLost, ItemAvailable} {
		if got := ClaimResolutions(status); got != nil {
			t.Errorf("a check-in of an item %s is asked to resolve a claim: %q", status, got)
		}
	}
	for _, c := range []struct{ status, resolution, action string }{
		{ItemClaimedReturned, "Found by library", LoanCheckedInFoundByLibrary},
		{ItemClaimedReturned, "Returned by patron", LoanCheckedInReturnedByPatron},
		{ItemClaimedReturned, "", LoanCheckedIn},
		{ItemCheckedOut, "Found by library", LoanCheckedIn},
		{ItemDeclaredLost, "Returned by patron", LoanCheckedIn},
	} {
		if got := CheckInAction(c.status, c.resolution); got != c.action {
			t.Errorf("CheckInAction(%q, %q) = %q, want %q", c.status, c.resolution, got, c.action)
		}
	}
	for action, charges := range map[string]bool{LoanCheckedIn: true, LoanCheckedInReturnedByPatron: true, LoanCheckedInFoundByLibrary: false} {
		if CheckInChargesOverdueFine(action) != charges {
			t.Errorf("CheckInChargesOverdueFine(%q) = %v, want %v", action, !charges, charges)
		}
		if ResolvesClaim(action) != (action != LoanCheckedIn) {
			t.Errorf("ResolvesClaim(%q) = %v", action, !(action != LoanCheckedIn))
		}
	}
}
