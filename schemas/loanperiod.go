package schemas

import "time"

// DueDate is the due date of a loan made at loanDate under a loan
// policy's period of duration intervals (its loansPolicy.period:
// intervalId Minutes, Hours, Days, Weeks or Months): the one rule both
// circulation's check-out and storage's one-call check-out follow. An
// interval it does not know leaves the loan due when it was made.
func DueDate(loanDate time.Time, duration int, interval string) time.Time {
	switch interval {
	case "Minutes":
		return loanDate.Add(time.Duration(duration) * time.Minute)
	case "Hours":
		return loanDate.Add(time.Duration(duration) * time.Hour)
	case "Days":
		return loanDate.AddDate(0, 0, duration)
	case "Weeks":
		return loanDate.AddDate(0, 0, 7*duration)
	case "Months":
		return loanDate.AddDate(0, duration, 0)
	}
	return loanDate
}

// LoanCheckedOut is the action of a loan a check-out opens (loan.json's
// action), whoever builds it.
const LoanCheckedOut = "checkedout"
