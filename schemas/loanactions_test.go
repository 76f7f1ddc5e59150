package schemas

import "testing"

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
