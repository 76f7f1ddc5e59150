package schemas

import (
	"encoding/json"
	"regexp"
	"strings"
)

// Fees and fines as FOLIO's mod-feesfines names them: an account's (a
// patron's fee/fine's) status and payment status, the actions on it, and
// the fee/fine types FOLIO's circulation charges by itself.

// An account's status: open while something remains.
const (
	FeeFineOpen   = "Open"
	FeeFineClosed = "Closed"
)

// ConditionFeeFineBalance is FOLIO's block condition "Maximum outstanding
// fee/fine balance" (mod-patron-blocks' id): the patron group's limit on
// what a patron owes, judged with the other conditions.
const ConditionFeeFineBalance = "cf7a0d5f-a327-4ca1-aa9e-dc55ec006b8a"

// The fee/fine types FOLIO's circulation charges, by name: an owner's
// automatic type of that name, else the tenant's (mod-feesfines'
// reference data, with no owner: migration 34 gives every tenant them).
const (
	FeeFineOverdueFine        = "Overdue fine"
	FeeFineLostItemFee        = "Lost item fee"
	FeeFineLostItemProcessing = "Lost item processing fee"
)

// AutomaticFeeFineTypes are the ids of FOLIO's automatic fee/fine types
// (mod-feesfines' reference data: overdue fine, replacement processing
// fee, lost item fee, lost item processing fee), which migration 34 gives
// every tenant. As mod-feesfines refuses it, none is created, changed or
// removed through the API (AutomaticFeeFineTypeKept).
var AutomaticFeeFineTypes = []string{"9523cb96-e752-40c2-89da-60f3961a488d", "d20df2fb-45fd-4184-b238-0d25747ffdd9",
	"cf238f9f-7018-47b7-b815-bb2db798e19f", "c7dede15-aa48-45ed-860b-f996540180e0"}

// AutomaticFeeFineTypeKept is mod-feesfines' refusal of a write of an
// automatic fee/fine type, in its words.
const AutomaticFeeFineTypeKept = "Attempt to change an automatic fee/fine type"

// FeeFineAction is one of mod-feesfines' actions on an account, by its
// route's name (/accounts/{id}/pay, …).
type FeeFineAction string

// The actions on an account.
const (
	ActionPay      FeeFineAction = "pay"
	ActionWaive    FeeFineAction = "waive"
	ActionTransfer FeeFineAction = "transfer"
	ActionCancel   FeeFineAction = "cancel"
	ActionRefund   FeeFineAction = "refund"
)

// FeeFineActions are the actions, in the order routes are listed.
var FeeFineActions = []FeeFineAction{ActionPay, ActionWaive, ActionTransfer, ActionRefund, ActionCancel}

// Checked reports whether the action has FOLIO's check route
// (/accounts/{id}/check-pay, …): every one but cancel.
func (a FeeFineAction) Checked() bool { return a != ActionCancel }

// Done is the action's past participle, as a sentence says it.
func (a FeeFineAction) Done() string {
	return map[FeeFineAction]string{ActionPay: "paid", ActionWaive: "waived", ActionTransfer: "transferred",
		ActionRefund: "refunded", ActionCancel: "cancelled"}[a]
}

// Partial and Full are what an action writes, as its fee/fine action's
// typeAction and as the account's payment status, when it leaves
// something and when it leaves nothing (FOLIO's "Paid partially", "Paid
// fully", …). Cancel always cancels the whole remaining ("Cancelled as
// error"); a refund gives back what was paid, and leaves the remaining.
func (a FeeFineAction) Partial() string { return feeFineWords[a][0] }

// Full: see Partial.
func (a FeeFineAction) Full() string { return feeFineWords[a][1] }

var feeFineWords = map[FeeFineAction][2]string{
	ActionPay:      {"Paid partially", "Paid fully"},
	ActionWaive:    {"Waived partially", "Waived fully"},
	ActionTransfer: {"Transferred partially", "Transferred fully"},
	ActionRefund:   {"Refunded partially", "Refunded fully"},
	ActionCancel:   {"Cancelled as error", "Cancelled as error"},
}

// ActionWords are every typeAction an action on a fee/fine writes (the
// actions' Partial and Full, and a lost item's return's), which no
// fee/fine type may be named (fee-fine-type.json): a fee/fine's charge is
// its type's name, and a refund counts what the actions named here paid.
func ActionWords() []string {
	var words []string
	for _, a := range FeeFineActions {
		words = append(words, a.Partial())
		if a.Full() != a.Partial() {
			words = append(words, a.Full())
		}
	}
	return append(words, PaymentStatusCancelledItemReturned)
}

// PaymentStatusOutstanding is an account's payment status before any
// action.
const PaymentStatusOutstanding = "Outstanding"

// The payment statuses a lost item's return writes (mod-circulation's).
const (
	PaymentStatusCancelledItemReturned = "Cancelled item returned"
)

// AmountPattern is an amount in a string, as an action names it and as
// FOLIO's settings send a fee/fine type's default amount: a decimal of at
// most two places (the currency's minor unit). fee-fine-type.json holds a
// string amount to it.
const AmountPattern = `^[0-9]{1,8}(\.[0-9]{1,2})?$`

var amountPattern = regexp.MustCompile(AmountPattern)

// ParseAmount is an action's amount ("5", "5.00") as a decimal of two
// places ("5.00"), exact: no binary float ever holds it. Anything else,
// zero included, is refused: refused says why, in FOLIO's words.
func ParseAmount(s string) (amount, refused string) {
	s = strings.TrimSpace(s)
	if !amountPattern.MatchString(s) {
		return "", "Invalid amount entered"
	}
	whole, frac, _ := strings.Cut(s, ".")
	whole = strings.TrimLeft(whole, "0")
	if whole == "" {
		whole = "0"
	}
	frac = (frac + "00")[:2]
	if whole == "0" && frac == "00" {
		return "", "Amount must be positive"
	}
	return whole + "." + frac, ""
}

// OverdueFineIntervalMinutes is an overdue fine policy's interval
// (quantity.json's intervalId) in minutes, as FOLIO counts them (a month
// of 31 days, a year of 365).
var OverdueFineIntervalMinutes = map[string]int{
	"minute": 1, "hour": 60, "day": 1440, "week": 10080, "month": 44640, "year": 525600,
}

// LoanPeriodMinutes is a loan policy's period unit (a grace period's
// intervalId) in minutes, as FOLIO counts them.
var LoanPeriodMinutes = map[string]int{
	"Minutes": 1, "Hours": 60, "Days": 1440, "Weeks": 10080, "Months": 44640,
}

// FOLIO's tenant locale settings (mod-settings' entry the tenant settings
// page writes): the tenant's currency, which every amount is in.
const (
	LocaleScope = "stripes-core.prefs.manage"
	LocaleKey   = "tenantLocaleSettings"
	// DefaultCurrency is a tenant's currency when its locale settings
	// name none, or none that is an ISO 4217 code.
	DefaultCurrency = "USD"
)

var currencyPattern = regexp.MustCompile(`^[A-Z]{3}$`)

// Currency is the currency a tenant's locale settings entry's value
// names (its currency member, an ISO 4217 code), DefaultCurrency when it
// names none that is one (nil: no entry).
func Currency(value json.RawMessage) string {
	var v struct {
		Currency string `json:"currency"`
	}
	if len(value) == 0 || json.Unmarshal(value, &v) != nil || !currencyPattern.MatchString(v.Currency) {
		return DefaultCurrency
	}
	return v.Currency
}

// FeeFineActionWrite is an action on a patron's fees/fines as circulation
// writes it at storage (fee-fine-storage-action.json): mod-feesfines'
// defaultActionRequest and cancelActionRequest, on the fees/fines
// AccountIDs (one for an account's route), or a patron's: with UserID,
// a kiosk's payment of the fee/fine AccountIDs names, which must be that
// patron's and open, or without AccountIDs of all the patron's open
// fees/fines, oldest first, as storage finds them in the write. Amount
// is as sent ("5", "5.00"); a cancellation ignores it and cancels all
// that remains.
type FeeFineActionWrite struct {
	AccountIDs         []string      `json:"accountIds,omitempty"`
	UserID             string        `json:"userId,omitempty"`
	Action             FeeFineAction `json:"action"`
	Amount             string        `json:"amount,omitempty"`
	PaymentMethod      string        `json:"paymentMethod,omitempty"`
	TransactionInfo    string        `json:"transactionInfo,omitempty"`
	Comments           string        `json:"comments,omitempty"`
	NotifyPatron       bool          `json:"notifyPatron,omitempty"`
	ServicePointID     string        `json:"servicePointId"`
	UserName           string        `json:"userName"`
	CancellationReason string        `json:"cancellationReason,omitempty"`
}
