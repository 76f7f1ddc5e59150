package circulation

import (
	"slices"
	"testing"
	"time"

	"github.com/checkoutlock/schemas"
)

// TestAnOverrideLiftsWhatItNames: a renewal through an override, judged
// from what validation read (overriddenRenewal), case by case: the
// refusals it keeps and the due date it gives, against FOLIO's
// renewThroughOverride. No storage: the judgement is a function of the
// read.
func TestAnOverrideLiftsWhatItNames(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	due := now.Add(72 * time.Hour)
	week := Period{Duration: 1, Interval: "Weeks"}
	read := func(change func(*CheckOutReads)) CheckOutReads {
		r := CheckOutReads{
			Patron:     &Patron{ID: "p", Barcode: "1001", Active: true},
			Item:       &Item{ID: "i", Barcode: "b", Status: schemas.ItemCheckedOut},
			OpenLoanOf: &OpenLoan{ID: "l", UserID: "p", DueDate: due, RenewalCount: 2},
			RulesSet:   true,
			Policy: LoanPolicy{ID: "lp", Name: "Two renewals", Loanable: true, Period: week, Renewable: true,
				Renewals: Renewals{NumberAllowed: 2, From: RenewFromDueDate, Period: week}},
		}
		if change != nil {
			change(&r)
		}
		return r
	}
	chosen := due.Add(240 * time.Hour)
	renewal := RenewalOverrides{Renewal: true, Comment: "Desk"}
	withDate := RenewalOverrides{Renewal: true, DueDate: chosen, Comment: "Desk"}
	patron := RenewalOverrides{PatronBlock: true, Comment: "Desk"}
	both := RenewalOverrides{PatronBlock: true, Renewal: true, Comment: "Desk"}
	for _, c := range []struct {
		name      string
		reads     CheckOutReads
		overrides RenewalOverrides
		due       time.Time
		codes     []string
	}{
		{"at the limit", read(nil), renewal, week.DueDate(due), nil},
		{"at the limit, a date given: the policy's first", read(nil), withDate, week.DueDate(due), nil},
		{"no comment", read(nil), RenewalOverrides{Renewal: true, Comment: " \u00a0"}, time.Time{},
			[]string{schemas.CodeOverrideRenewalCommentRequired}},
		{"a recall", read(func(r *CheckOutReads) { r.OpenRecall, r.OpenLoanOf.RenewalCount = true, 0 }), renewal, week.DueDate(due), nil},
		{"a hold the policy does not renew past: its period for holds", read(func(r *CheckOutReads) {
			r.OpenLoanOf.RenewalCount, r.QueueHead = 0, &QueuedRequest{ID: "h", RequestType: "Hold"}
			r.Policy.Renewals.HoldPeriod = Period{Duration: 2, Interval: "Days"}
		}), renewal, due.Add(48 * time.Hour), nil},
		{"not renewable, no date", read(func(r *CheckOutReads) { r.Policy.Renewable = false }), renewal, time.Time{},
			[]string{schemas.CodeOverrideRenewalDueDateRequired}},
		{"not renewable, a date", read(func(r *CheckOutReads) { r.Policy.Renewable = false }), withDate, chosen, nil},
		{"not loanable, a date no later than the loan's", read(func(r *CheckOutReads) { r.Policy.Loanable = false }),
			RenewalOverrides{Renewal: true, DueDate: due, Comment: "Desk"}, due, []string{schemas.CodeRenewalWouldNotChangeDueDate}},
		{"renewing from a date it does not know", read(func(r *CheckOutReads) { r.Policy.Renewals.From = "LAST_TUESDAY" }), withDate, chosen, nil},
		{"the policy's date would not move, no date", read(func(r *CheckOutReads) {
			r.OpenLoanOf.RenewalCount, r.Policy.Renewals.From, r.Policy.Renewals.Period = 0, RenewFromNow, Period{Duration: 1, Interval: "Hours"}
		}), renewal, time.Time{}, []string{schemas.CodeOverrideRenewalDueDateRequiredWhenDueDateUnchanged}},
		{"the policy's date would not move, a date", read(func(r *CheckOutReads) {
			r.OpenLoanOf.RenewalCount, r.Policy.Renewals.From, r.Policy.Renewals.Period = 0, RenewFromNow, Period{Duration: 1, Interval: "Hours"}
		}), withDate, chosen, nil},
		{"nothing to override", read(func(r *CheckOutReads) { r.OpenLoanOf.RenewalCount = 0 }), renewal, time.Time{},
			[]string{schemas.CodeOverrideRenewalNotAllowedForCurrentLoan}},
		{"blocked manually and automatically, patronBlock", read(func(r *CheckOutReads) {
			r.OpenLoanOf.RenewalCount = 0
			r.ManualBlocks = []ManualBlock{{Desc: "Overdue", Renewals: true}}
			r.AutomatedBlocks = []AutomatedBlock{{ConditionID: "c", BlockRenewals: true, Message: "Too many"}}
		}), patron, week.DueDate(due), nil},
		{"blocked and at the limit, patronBlock alone", read(func(r *CheckOutReads) {
			r.ManualBlocks = []ManualBlock{{Desc: "Overdue", Renewals: true}}
		}), patron, time.Time{}, []string{schemas.CodeLoanRenewalLimitReached}},
		{"blocked and at the limit, renewalBlock alone", read(func(r *CheckOutReads) {
			r.ManualBlocks = []ManualBlock{{Desc: "Overdue", Renewals: true}}
		}), renewal, week.DueDate(due), []string{schemas.CodeUserBlockedManually}},
		{"blocked and at the limit, both", read(func(r *CheckOutReads) {
			r.ManualBlocks = []ManualBlock{{Desc: "Overdue", Renewals: true}}
		}), both, week.DueDate(due), nil},
		{"inactive: never lifted", read(func(r *CheckOutReads) { r.Patron.Active = false }), both, week.DueDate(due),
			[]string{schemas.CodeUserIsInactiveOrExpired}},
		{"declared lost: never lifted", read(func(r *CheckOutReads) { r.Item.Status = schemas.ItemDeclaredLost }), renewal,
			week.DueDate(due), []string{schemas.CodeItemDeclaredLostNotRenewable}},
		{"claimed returned, nothing else: never lifted, and nothing more said", read(func(r *CheckOutReads) {
			r.OpenLoanOf.RenewalCount, r.Item.Status = 0, schemas.ItemClaimedReturned
		}), renewal, week.DueDate(due), []string{schemas.CodeItemClaimedReturnedNotRenewable}},
	} {
		got, refusals := overriddenRenewal(c.reads, c.overrides, now)
		var codes []string
		for _, e := range refusals {
			codes = append(codes, e.Code)
		}
		if !slices.Equal(codes, c.codes) || (len(c.codes) == 0 || !c.due.IsZero()) && !got.Equal(c.due) {
			t.Errorf("%s: due %s, refused %v; want due %s, refused %v", c.name, got, codes, c.due, c.codes)
		}
	}
}
