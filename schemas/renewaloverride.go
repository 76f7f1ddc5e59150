package schemas

// The blocks of a renewal's overrideBlocks that lift the loan policy's
// refusals (FOLIO's names; OverridePatronBlock lifts the patron's blocks,
// as at check-out). Either lifts them all; FOLIO names
// renewalDueDateRequiredBlock on the refusals whose override needs a due
// date from the librarian where the policy gives none (its Users app then
// asks for one).
const (
	OverrideRenewalBlock                = "renewalBlock"
	OverrideRenewalDueDateRequiredBlock = "renewalDueDateRequiredBlock"
)

// renewalOverridable are the renewal's refusals an override lifts, each
// with the block FOLIO names on it (mod-circulation's
// OverridingErrorHandler): the patron's blocks; the loan policy's limit
// and a recall; and the refusals after which the policy may give no due
// date (it does not lend or renew, counts from a date it does not know,
// does not renew while a hold waits, gives a due date that would not
// move). Nothing lifts the rest: an inactive or expired patron, the
// item's status (declared lost, aged to lost, claimed returned), no
// circulation rules.
var renewalOverridable = map[string]string{
	CodeUserBlockedManually:              OverridePatronBlock,
	CodeUserBlockedAutomatically:         OverridePatronBlock,
	CodeLoanRenewalLimitReached:          OverrideRenewalBlock,
	CodeRenewalBlockedByRecall:           OverrideRenewalBlock,
	CodeItemNotLoanable:                  OverrideRenewalDueDateRequiredBlock,
	CodeLoanNotRenewable:                 OverrideRenewalDueDateRequiredBlock,
	CodeLoanPolicyRenewFromNotRecognized: OverrideRenewalDueDateRequiredBlock,
	CodeRenewalBlockedByHoldRequest:      OverrideRenewalDueDateRequiredBlock,
	CodeRenewalWouldNotChangeDueDate:     OverrideRenewalDueDateRequiredBlock,
}

// RenewalOverridableBlock is the block of overrideBlocks that overrides a
// renewal's refusal of code, as FOLIO names it on the refusal
// (overridableBlock); "" for a refusal no override lifts.
func RenewalOverridableBlock(code string) string { return renewalOverridable[code] }

// RenewalOverrideLifts says whether an override lifting the patron's
// blocks (patronBlock) and, or, the loan policy's refusals (renewalBlock
// or renewalDueDateRequiredBlock) lets a renewal refused with code be
// written: all of RenewalOverridableBlock's but a due date the renewal
// would not move, which stays a refusal of the write (the override gives
// the loan another, later due date). Circulation's judgement and
// storage's write ask it.
func RenewalOverrideLifts(code string, patronBlock, renewalBlock bool) bool {
	switch renewalOverridable[code] {
	case "":
		return false
	case OverridePatronBlock:
		return patronBlock
	}
	return renewalBlock && code != CodeRenewalWouldNotChangeDueDate
}
