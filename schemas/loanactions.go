package schemas

import (
	"maps"
	"slices"
)

// The desk's actions on an open loan, and which item statuses refuse
// which: one table, read by circulation (claim item returned, declare
// item lost, renew, change the due date, and the desk's page, which
// offers only what is allowed) and by circulation-storage (the renewal's
// and the change of due date's writes refuse the same statuses in their
// statements), so the rule has one home.
const (
	LoanActionRenew         = "renew"
	LoanActionClaimReturned = "claimReturned"
	LoanActionDeclareLost   = "declareLost"
	LoanActionCheckIn       = "checkIn"
	// LoanActionChangeDueDate is a librarian's change of a loan's due
	// date (FOLIO's change-due-date).
	LoanActionChangeDueDate = "changeDueDate"
)

// LoanActions are the desk's actions, in the order the page shows them.
var LoanActions = []string{LoanActionRenew, LoanActionChangeDueDate, LoanActionClaimReturned, LoanActionDeclareLost, LoanActionCheckIn}

// LoanActionRefusal is why an action is refused for its item's status:
// FOLIO's code and message.
type LoanActionRefusal struct {
	Code, Message string
}

// loanActionRefusals: action, item status, refusal. A pair not listed is
// allowed. A renewal refuses the lost and claimed-returned statuses in
// FOLIO's codes (RenewalValidator, "item is <status>"); a declaration of
// loss refuses an item already declared lost (DeclareLostResource); a
// claim refuses an item already claimed returned (FOLIO's own route does
// not, but its user interface offers no second claim, and a second one
// would overwrite the first claim's date); a change of due date refuses
// the statuses a renewal refuses (mod-circulation's ItemStatusValidator:
// a lost or claimed returned item's loan keeps the date it had); a
// check-in takes the item back whatever its status.
var loanActionRefusals = map[string]map[string]LoanActionRefusal{
	LoanActionRenew: {
		ItemDeclaredLost:    {CodeItemDeclaredLostNotRenewable, "item is " + ItemDeclaredLost},
		ItemAgedToLost:      {CodeItemAgedToLostNotRenewable, "item is " + ItemAgedToLost},
		ItemClaimedReturned: {CodeItemClaimedReturnedNotRenewable, "item is " + ItemClaimedReturned},
	},
	LoanActionClaimReturned: {
		ItemClaimedReturned: {CodeValidation, "The item is already claimed returned"},
	},
	LoanActionDeclareLost: {
		ItemDeclaredLost: {CodeValidation, "The item is already declared lost"},
	},
	LoanActionChangeDueDate: {
		ItemDeclaredLost:    {CodeValidation, "item is " + ItemDeclaredLost},
		ItemAgedToLost:      {CodeValidation, "item is " + ItemAgedToLost},
		ItemClaimedReturned: {CodeValidation, "item is " + ItemClaimedReturned},
	},
	LoanActionCheckIn: {},
}

// LoanActionRefused says whether action is refused on an open loan whose
// item has status, and why. An action the table does not know is
// refused: nothing is allowed by a misspelling.
func LoanActionRefused(action, status string) (LoanActionRefusal, bool) {
	byStatus, known := loanActionRefusals[action]
	if !known {
		return LoanActionRefusal{CodeValidation, "no such loan action: " + action}, true
	}
	r, refused := byStatus[status]
	return r, refused
}

// LoanActionRefusedStatuses are the item statuses that refuse action,
// each with its refusal.
func LoanActionRefusedStatuses(action string) map[string]LoanActionRefusal {
	out := map[string]LoanActionRefusal{}
	for status, r := range loanActionRefusals[action] {
		out[status] = r
	}
	return out
}

// A check-in's loan actions (FOLIO's LoanAction): checkedin, or, when the
// item was claimed returned and the check-in says how the library
// resolved the claim (its claimedReturnedResolution), that resolution's.
const (
	LoanCheckedIn                 = "checkedin"
	LoanCheckedInFoundByLibrary   = "checkedInFoundByLibrary"
	LoanCheckedInReturnedByPatron = "checkedInReturnedByPatron"
)

// claimResolutions are the resolutions of a claim a check-in takes
// (check-in-by-barcode-request.json's enum, held to this table by
// TestTheClaimResolutionsAreTheSchemas) and the loan action each records.
var claimResolutions = map[string]string{
	"Found by library":   LoanCheckedInFoundByLibrary,
	"Returned by patron": LoanCheckedInReturnedByPatron,
}

// ClaimStands says whether an item of itemStatus stands claimed
// returned: what a check-in's resolution resolves, and storage's write
// judges again.
func ClaimStands(itemStatus string) bool {
	return itemStatus == ItemClaimedReturned
}

// ClaimResolutions are the resolutions a check-in of an item of
// itemStatus takes, in order: none unless its claim stands. The desk's
// page asks the librarian one of them.
func ClaimResolutions(itemStatus string) []string {
	if !ClaimStands(itemStatus) {
		return nil
	}
	return slices.Sorted(maps.Keys(claimResolutions))
}

// CheckInAction is the loan action of a check-in of an item whose status
// is itemStatus, the claim resolved as resolution ("" for none): the
// resolution's when the item's claim stands, else checkedin. A
// resolution resolves a claim and nothing else (FOLIO's
// LoanCheckInService); a check-in of a claimed returned item without one
// is taken as a return (a kiosk's, a book drop's).
func CheckInAction(itemStatus, resolution string) string {
	if action, ok := claimResolutions[resolution]; ok && ClaimStands(itemStatus) {
		return action
	}
	return LoanCheckedIn
}

// ResolvesClaim says whether a check-in recording action resolves a claim:
// storage's write records it only of an item claimed returned.
func ResolvesClaim(action string) bool {
	for _, resolved := range claimResolutions {
		if action == resolved {
			return true
		}
	}
	return false
}

// CheckInChargesOverdueFine says whether a check-in recording action
// charges an overdue loan its fine: every check-in but one resolving a
// claim as found by the library, which the patron had returned as they
// said (FOLIO's OverdueFineService).
func CheckInChargesOverdueFine(action string) bool {
	return action != LoanCheckedInFoundByLibrary
}
