package schemas

import (
	"slices"
	"strings"
	"time"
)

// A check-out a self-check machine made while the library system could
// not answer, and sends when it answers again (SIP2's no block), already
// happened: the book is in the patron's bag. Circulation records it with
// the transaction's date, under the patron's lock and exactly once, never
// refused for a rule a live check-out would have been refused for; the
// rules it broke are recorded on the loan (offline.brokenRules), in the
// check-out's event and in the lock history, in these words.

// PermissionCheckOutOffline lets a check-out say it was made offline
// (offline in check-out-by-barcode-request.json): recorded past the rules
// a live one keeps, dated when it happened. A self-check machine and a
// librarian hold it.
const PermissionCheckOutOffline = "circulation.check-out-by-barcode.offline.post"

// MaxOfflineBehind is the oldest transaction date an offline check-out
// may carry: what no kiosk's store of transactions should outlast. A SIP2
// door's SIP2_OFFLINE_WITHIN narrows it for its kiosks; nothing widens it.
const MaxOfflineBehind = 30 * 24 * time.Hour

// MaxOfflineLoanPeriod is the latest due date a check-out made offline
// may carry, after its transaction date: a kiosk's nb due date is taken as
// the patron was told it, but never one no library lends for.
const MaxOfflineLoanPeriod = 366 * 24 * time.Hour

// The refusals of an offline check-out that are not rules: the library
// does not take offline check-outs (its selfCheck settings), the
// transaction is older than the bound, or a door saw the machine on line
// when it says it was made (OfflineGrace).
const (
	CodeOfflineLendingOff  = "OFFLINE_LENDING_OFF"
	CodeOfflineTooOld      = "OFFLINE_TRANSACTION_TOO_OLD"
	CodeOfflineWhileOnLine = "OFFLINE_WHILE_ON_LINE"
)

// A check-out is taken as made offline only for a time no door saw its
// machine on line: storage's write refuses one dated inside a span of the
// machine's presence (a SIP2 door's records of it, kept in storage) by
// more than a grace (KIOSK_OFFLINE_GRACE), for a kiosk's clock and its
// noticing the cut-off lag the door's. The machine is the caller's
// account and the location code its door names; a call naming none (a
// kiosk that gave no location code, or a caller that is not a door) is
// judged by every span of the account's machines. A door's own grace
// (SIP2_OFFLINE_GRACE, for what only it saw) and this one are held to
// the same bound.
const MaxOfflineGrace = time.Hour

// OfflineRules are the rules a check-out made offline is recorded past:
// every check-out rule (CheckOutRules), each by its refusal code as a
// live check-out would be refused with it (and as offline.brokenRules
// names it), once per code, and the words an operator and the desk read:
// "lent offline past the item limit". The order is the order they are
// said in.
var OfflineRules = offlineRules()

func offlineRules() []struct{ Code, Words string } {
	var out []struct{ Code, Words string }
	for _, r := range CheckOutRules {
		if !slices.ContainsFunc(out, func(o struct{ Code, Words string }) bool { return o.Code == r.Code }) {
			out = append(out, struct{ Code, Words string }{r.Code, r.Words})
		}
	}
	return out
}

// OfflineWords says what a check-out made offline broke, in OfflineRules'
// words and order: "lent offline past the item limit, to a patron
// blocked from borrowing"; "lent offline" when it broke none.
func OfflineWords(codes []string) string {
	var parts []string
	for _, r := range OfflineRules {
		for _, c := range codes {
			if c == r.Code {
				parts = append(parts, r.Words)
				break
			}
		}
	}
	if len(parts) == 0 {
		return "lent offline"
	}
	return "lent offline " + strings.Join(parts, ", ")
}

// ItemLimitCodes are FOLIO's refusals at an item limit, by the criteria
// of the rule that set it, and storage's (CodeItemLimitReached).
var ItemLimitCodes = []string{CodeItemLimit, CodeItemLimitMaterialType, CodeItemLimitLoanType, CodeItemLimitBoth,
	CodeItemLimitPatronGroupMaterialType, CodeItemLimitPatronGroupLoanType, CodeItemLimitPatronGroupBoth, CodeItemLimitReached}

// OfflineLifts says whether a check-out made offline is recorded past a
// refusal with code: one of OfflineRules, or the item limit however its
// rule words it.
func OfflineLifts(code string) bool {
	for _, r := range OfflineRules {
		if r.Code == code {
			return true
		}
	}
	return slices.Contains(ItemLimitCodes, code)
}

// A check-in dated when the item came back (a book drop's, a sorter's,
// a kiosk's sent after an outage) may reach the library system after the
// item was checked in at the desk and lent again: the loan open now is
// not the one it returns. Such a check-in closes nothing and changes no
// item; the check-in write records it for the desk (the lock history's
// returned_before_loan line, the RETURNED_BEFORE_LOAN event) and the
// caller is told (CodeReturnedBeforeLoan), a kiosk so that it keeps
// nothing to send again.

// ReturnTolerance is how far before a loan's date a check-in may be dated
// and still return it: clocks of a desk, a kiosk and the services differ
// by seconds, and a check-in that near the loan is the loan's own. A
// check-in dated that near is recorded as returned when it was lent.
const ReturnTolerance = time.Minute

// HistoryReturnedBeforeLoan is the lock history's line of such a
// check-in, and ReturnedBeforeLoanWords what the console says of it.
const (
	HistoryReturnedBeforeLoan = "returned_before_loan"
	ReturnedBeforeLoanWords   = "returned while it was already back: its loan stays open"
)

// CodeReturnedBeforeLoan refuses a check-in dated before the item's open
// loan was lent, past ReturnTolerance: nothing closed, recorded for the
// desk.
const CodeReturnedBeforeLoan = "RETURNED_BEFORE_LOAN"

// ReturnedBeforeLent says whether a check-in dated returned comes from
// before a loan lent at lent: earlier than it by more than
// ReturnTolerance. It is the one comparison of the two, asked by the
// check-in write.
func ReturnedBeforeLent(returned, lent time.Time) bool {
	return returned.Before(lent.Add(-ReturnTolerance))
}

// A SIP2 door records, for each self-check machine (its account and the
// location code it gave at login), the times it saw the machine on line:
// spans, kept by storage, so that a door restarted and another door know
// them too. A check-out or check-in a machine marks as made offline is
// taken as offline only for a time outside them.

// MaxPresenceSpans bounds the spans storage keeps of one kiosk account's
// machines: a span beyond it is refused (CodePresenceRefused); the
// oldest go as the machines record new ones, past MaxOfflineBehind.
const MaxPresenceSpans = 10000

// MaxPresenceAnswered bounds the spans one question of a machine's
// presence answers, the oldest first.
const MaxPresenceAnswered = 100

// CodePresenceRefused refuses a span of a machine's presence: another
// machine's id, or the account's spans at MaxPresenceSpans.
const CodePresenceRefused = "KIOSK_PRESENCE_REFUSED"
