package schemas

import "time"

// DueDate is the due date of a loan made at loanDate under a loan
// policy's period of duration intervals (its loansPolicy.period:
// intervalId Minutes, Hours, Days, Weeks or Months): the one rule both
// circulation's check-out and storage's one-call check-out follow. An
// interval it does not know leaves the loan due when it was made; a
// period that would end past MaxYear (a policy lending for 100000 months)
// ends at its last instant, the latest date a loan can store: lent for
// good, not refused for a due date nobody sent.
func DueDate(loanDate time.Time, duration int, interval string) time.Time {
	due := loanDate
	switch interval {
	case "Minutes":
		due = loanDate.Add(time.Duration(duration) * time.Minute)
	case "Hours":
		due = loanDate.Add(time.Duration(duration) * time.Hour)
	case "Days":
		due = loanDate.AddDate(0, 0, duration)
	case "Weeks":
		due = loanDate.AddDate(0, 0, 7*duration)
	case "Months":
		due = loanDate.AddDate(0, duration, 0)
	}
	if latest := LatestDate(); due.After(latest) {
		return latest
	}
	return due
}

// LoanCheckedOut is the action of a loan a check-out opens (loan.json's
// action), whoever builds it.
const LoanCheckedOut = "checkedout"

// LoanCheckedOutThroughOverride is the action of a loan a check-out opens
// past the blocks an override lifts (FOLIO's overrideBlocks).
const LoanCheckedOutThroughOverride = "checkedOutThroughOverride"

// LoanDueDateChanged is the action of a loan whose due date a librarian
// changed (FOLIO's change-due-date): the loan stays open, its item as it
// is.
const LoanDueDateChanged = "dueDateChanged"

// LoanRenewedThroughOverride is the action of a loan a librarian renewed
// past the refusals an override lifts (FOLIO's overrideBlocks on a
// renewal), the override's comment its actionComment.
const LoanRenewedThroughOverride = "renewedThroughOverride"
