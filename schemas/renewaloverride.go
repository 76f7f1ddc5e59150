package schemas

// OverrideRenewalBlock is the block of a renewal's overrideBlocks that
// lifts the loan policy's refusals (FOLIO's name; OverridePatronBlock
// lifts the patron's blocks, as at check-out).
const OverrideRenewalBlock = "renewalBlock"

// renewalLifted are the renewal's refusals an override lifts, each by the
// block that lifts it (mod-circulation's OverridingErrorHandler and
// renewThroughOverride's cases): the patron's blocks by patronBlock; the
// loan policy's (it does not lend or renew, counts renewals from a date
// it does not know, its limit is reached, a hold or a recall stands in
// the way) by renewalBlock, and by renewalDueDateRequiredBlock, which is
// renewalBlock with a due date. Nothing lifts the rest: an inactive or
// expired patron, the item's status (declared lost, aged to lost, claimed
// returned), no circulation rules, and a due date the renewal would not
// move (an override gives the loan a later one: the policy's, else its
// own).
var renewalLifted = map[string]string{
	CodeUserBlockedManually:              OverridePatronBlock,
	CodeUserBlockedAutomatically:         OverridePatronBlock,
	CodeItemNotLoanable:                  OverrideRenewalBlock,
	CodeLoanNotRenewable:                 OverrideRenewalBlock,
	CodeLoanPolicyRenewFromNotRecognized: OverrideRenewalBlock,
	CodeLoanRenewalLimitReached:          OverrideRenewalBlock,
	CodeRenewalBlockedByRecall:           OverrideRenewalBlock,
	CodeRenewalBlockedByHoldRequest:      OverrideRenewalBlock,
}

// RenewalOverrideLifts says whether an override lifting the patron's
// blocks (patronBlock) and, or, the loan policy's refusals (renewalBlock)
// lifts a renewal's refusal of code. Circulation's judgement and
// storage's write ask it.
func RenewalOverrideLifts(code string, patronBlock, renewalBlock bool) bool {
	switch renewalLifted[code] {
	case OverridePatronBlock:
		return patronBlock
	case OverrideRenewalBlock:
		return renewalBlock
	}
	return false
}
