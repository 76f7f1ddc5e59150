// Package loanhistory is a tenant's loan history settings as FOLIO keeps
// them (mod-circulation's loan_history setting): whether, and when, a
// closed loan forgets its borrower. Storage checks every write of the
// entry with Decode, and its anonymizing reads the entry with it: a value
// one refuses the other never meets as anything but unreadable.
package loanhistory

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// The settings entry that holds a tenant's loan history settings.
const (
	Scope = "mod-circulation"
	Key   = "loan_history"
)

// The closing types FOLIO names: when a closed loan is anonymized.
const (
	Immediately = "immediately"
	Interval    = "interval"
	Never       = "never"
)

// The intervals a period is counted in, as FOLIO names them.
var intervals = map[string]time.Duration{
	"Minutes": time.Minute,
	"Hours":   time.Hour,
	"Days":    24 * time.Hour,
	"Weeks":   7 * 24 * time.Hour,
	"Months":  30 * 24 * time.Hour,
}

// MaxPeriod is the longest time after its return a closed loan may keep
// its borrower by these settings.
const MaxPeriod = 10 * 366 * 24 * time.Hour

// Settings is when a tenant's closed loans are anonymized.
type Settings struct {
	// Closing is Immediately, Interval (After the loan closed) or Never.
	Closing string
	// After is how long after its return a loan is anonymized, with
	// Interval.
	After time.Duration
}

// Defaults are the settings of a tenant without an entry: FOLIO's (a
// loan is never anonymized until the library says when).
var Defaults = Settings{Closing: Never}

// Anonymizes says whether the settings anonymize closed loans at all.
func (s Settings) Anonymizes() bool { return s.Closing == Immediately || s.Closing == Interval }

// Kept is how long after its return a closed loan keeps its borrower
// (zero: not at all), with settings that anonymize: what a patron's other
// traces (the lock history) are kept no longer than.
func (s Settings) Kept() time.Duration {
	if s.Closing == Interval {
		return s.After
	}
	return 0
}

// value is the entry's value as FOLIO writes it. The fee/fine members
// (closingType.feeFine, feeFine, treatEnabled) are kept as written: they
// say how loans with fees and fines are treated, and no loan has one.
type value struct {
	ClosingType *struct {
		Loan    *string         `json:"loan"`
		FeeFine json.RawMessage `json:"feeFine"`
	} `json:"closingType"`
	Loan *struct {
		Duration   *int   `json:"duration"`
		IntervalID string `json:"intervalId"`
	} `json:"loan"`
	TreatEnabled *bool          `json:"treatEnabled"`
	FeeFine      map[string]any `json:"feeFine"`
	// LoanExceptions are FOLIO's per-payment-method exceptions, kept as
	// written.
	LoanExceptions json.RawMessage `json:"loanExceptions"`
}

// FieldError says what is wrong with a value, and in which field.
type FieldError struct {
	Field, Message string
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.Message
	}
	return e.Field + " " + e.Message
}

// Decode reads a stored value: FOLIO's loan_history object, its
// closingType.loan "immediately", "interval" (with loan.duration, a whole
// number from 1, and loan.intervalId, Minutes to Months, at most
// MaxPeriod) or "never" (absent: never). Anything else is an error naming
// the field.
func Decode(raw json.RawMessage) (Settings, *FieldError) {
	var v value
	if err := json.Unmarshal(raw, &v); err != nil {
		return Settings{}, &FieldError{Message: fmt.Sprintf("the value is not FOLIO's loan history settings: %v", err)}
	}
	if v.ClosingType == nil || v.ClosingType.Loan == nil {
		return Defaults, nil
	}
	s := Settings{Closing: *v.ClosingType.Loan}
	if !slices.Contains([]string{Immediately, Interval, Never}, s.Closing) {
		return Settings{}, &FieldError{Field: "closingType.loan", Message: "must be immediately, interval or never"}
	}
	if s.Closing != Interval {
		return s, nil
	}
	if v.Loan == nil || v.Loan.Duration == nil || *v.Loan.Duration < 1 {
		return Settings{}, &FieldError{Field: "loan.duration", Message: "must be a whole number from 1 when closingType.loan is interval"}
	}
	unit, ok := intervals[v.Loan.IntervalID]
	if !ok {
		return Settings{}, &FieldError{Field: "loan.intervalId", Message: "must be Minutes, Hours, Days, Weeks or Months"}
	}
	if time.Duration(*v.Loan.Duration) > MaxPeriod/unit {
		return Settings{}, &FieldError{Field: "loan.duration", Message: fmt.Sprintf("must be at most %d %s", int(MaxPeriod/unit), v.Loan.IntervalID)}
	}
	s.After = time.Duration(*v.Loan.Duration) * unit
	return s, nil
}
