package circulation_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/checkoutlock/circulation"
	"github.com/checkoutlock/circulation-storage/storagetest"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
	"github.com/checkoutlock/schemas/selfcheck"
)

const renewPolicy = "66666666-6666-4666-8666-00000000000e"

// renewStack is a stack whose rules lend for 3 weeks under a policy that
// renews, as extra says (over: renewable, twice, from the due date, for a
// different period of one week), built with opts.
func renewStack(t *testing.T, extra map[string]any, opts ...stackOption) *stack {
	t.Helper()
	s := newStack(t, lockOn, opts...)
	policy := map[string]any{"renewable": true, "renewalsPolicy": map[string]any{"numberAllowed": 2, "renewFromId": "CURRENT_DUE_DATE",
		"differentPeriod": true, "period": map[string]any{"duration": 1, "intervalId": "Weeks"}}}
	for k, v := range extra {
		policy[k] = v
	}
	s.store.AddLoanPolicy(storagetest.LoanPolicy{ID: renewPolicy, Name: "Renewable", Loanable: true, Duration: 3, Interval: "Weeks",
		Extra: policy})
	s.store.SetRules(renewPolicy)
	return s
}

func renewRequest() circulation.RenewRequest {
	return circulation.RenewRequest{ItemBarcode: itemBarcode, UserBarcode: userBarcode, ServicePointID: servicePoint}
}

// TestRenewalMovesTheDueDate: a renewal counts the renewal period from the
// current due date, records the count and the action, keeps the loan
// date; the policy's number of renewals is the most, then FOLIO's
// refusal, nothing written.
func TestRenewalMovesTheDueDate(t *testing.T) {
	t.Parallel()
	s := renewStack(t, nil)
	out, err := s.checkOut(t)
	if err != nil {
		t.Fatal(err)
	}
	due := out.Loan.DueDate
	for n := 1; n <= 2; n++ {
		res, err := s.svc.RenewByBarcode(okapi(t), renewRequest())
		if err != nil {
			t.Fatalf("renewal %d: %v", n, err)
		}
		due = due.AddDate(0, 0, 7)
		if !res.Loan.DueDate.Equal(due) || res.Loan.RenewalCount != n || res.Loan.Action != circulation.ActionRenewed ||
			!res.Loan.LoanDate.Equal(out.Loan.LoanDate) || res.Loan.LoanPolicyID != renewPolicy {
			t.Errorf("renewal %d: %+v, want due %s, count %d", n, res.Loan, due, n)
		}
	}
	loans := s.store.Loans()
	if len(loans) != 1 || loans[0].DueDate != schemas.FormatTime(due) || loans[0].Action != "renewed" || loans[0].Status != "Open" {
		t.Errorf("stored %+v", loans)
	}
	before := s.store.Snapshot()
	_, err = s.svc.RenewByBarcode(okapi(t), renewRequest())
	wantStrings(t, "refusals", refusals(t, err), []string{"LOAN_RENEWAL_LIMIT_REACHED: loan at maximum renewal number [loanPolicyId=" +
		renewPolicy + "] [loanPolicyName=Renewable]"})
	s.store.WantUnchanged(before)
}

// TestRenewalRefusals walks FOLIO's reasons, one arrangement each, every
// one refused with FOLIO's code and message and nothing written.
func TestRenewalRefusals(t *testing.T) {
	t.Parallel()
	params := " [loanPolicyId=" + renewPolicy + "] [loanPolicyName=Renewable]"
	for _, c := range []struct {
		name    string
		extra   map[string]any
		arrange func(s *stack)
		req     func() circulation.RenewRequest
		want    []string
	}{
		{name: "not renewable", extra: map[string]any{"renewable": false},
			want: []string{"LOAN_NOT_RENEWABLE: loan is not renewable" + params}},
		{name: "would not change the due date", extra: map[string]any{"renewalsPolicy": map[string]any{"numberAllowed": 2,
			"renewFromId": "SYSTEM_DATE", "differentPeriod": true, "period": map[string]any{"duration": 1, "intervalId": "Days"}}},
			want: []string{"RENEWAL_WOULD_NOT_CHANGE_DUE_DATE: renewal would not change the due date" + params}},
		{name: "renew from nowhere", extra: map[string]any{"renewalsPolicy": map[string]any{"unlimited": true}},
			want: []string{"LOAN_POLICY_RENEW_FROM_NOT_RECOGNIZED: cannot determine when to renew from" + params}},
		{name: "a recall", arrange: func(s *stack) {
			s.store.AddRequest(storagetest.Request{ID: "aaaaaaaa-0000-4000-8000-00000000000a", ItemID: itemID, RequesterID: otherPatron,
				Status: "Open - Not yet filled", Position: 1, Type: "Recall"})
		}, want: []string{"RENEWAL_BLOCKED_BY_RECALL: items cannot be renewed when there is an active recall request"}},
		{name: "a hold first", arrange: func(s *stack) {
			s.store.AddRequest(storagetest.Request{ID: "aaaaaaaa-0000-4000-8000-00000000000b", ItemID: itemID, RequesterID: otherPatron,
				Status: "Open - Not yet filled", Position: 1})
		}, want: []string{"RENEWAL_BLOCKED_BY_HOLD_REQUEST: Items with this loan policy cannot be renewed when there is an active, pending hold request" + params}},
		{name: "blocked from renewing", arrange: func(s *stack) {
			s.store.AddManualBlock(storagetest.ManualBlock{UserID: patronID, Desc: "Overdue books", Renewals: true})
			s.store.AddManualBlock(storagetest.ManualBlock{UserID: patronID, Desc: "Lost card", Borrowing: true})
		}, want: []string{"USER_IS_BLOCKED_MANUALLY: Patron blocked from renewing [reason=Overdue books]"}},
		{name: "inactive", arrange: func(s *stack) {
			s.store.Exec(`UPDATE circulation_storage.patron SET jsonb = jsonb_set(jsonb, '{active}', 'false') WHERE tenant_id = $1 AND id = $2`, patronID)
		}, want: []string{"USER_IS_INACTIVE_OR_EXPIRED: Cannot renew loan when user is inactive or expired [reason=User is inactive.]"}},
		{name: "another patron's loan", req: func() circulation.RenewRequest {
			r := renewRequest()
			r.UserBarcode = "u-1002"
			return r
		}, want: []string{"ITEM_CHECKED_OUT_TO_DIFFERENT_USER: Cannot renew item checked out to different user [userBarcode=u-1002]"}},
		{name: "no such item", req: func() circulation.RenewRequest {
			r := renewRequest()
			r.ItemBarcode = "nope"
			return r
		}, want: []string{"ITEM_BARCODE_NOT_FOUND: No item with barcode nope exists [itemBarcode=nope]"}},
		{name: "claimed returned", arrange: func(s *stack) {
			s.store.Exec(`UPDATE circulation_storage.item SET jsonb = jsonb_set(jsonb, '{status,name}', '"Claimed returned"') WHERE tenant_id = $1 AND id = $2`, itemID)
		}, want: []string{"ITEM_CLAIMED_RETURNED_NOT_RENEWABLE: item is Claimed returned [itemId=" + itemID + "]"}},
		{name: "declared lost", arrange: func(s *stack) {
			s.store.Exec(`UPDATE circulation_storage.item SET jsonb = jsonb_set(jsonb, '{status,name}', '"Declared lost"') WHERE tenant_id = $1 AND id = $2`, itemID)
		}, want: []string{"ITEM_DECLARED_LOST_NOT_RENEWABLE: item is Declared lost [itemId=" + itemID + "]"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := renewStack(t, c.extra)
			if _, err := s.checkOut(t); err != nil {
				t.Fatal(err)
			}
			if c.arrange != nil {
				c.arrange(s)
			}
			req := renewRequest()
			if c.req != nil {
				req = c.req()
			}
			before := s.store.Snapshot()
			_, err := s.svc.RenewByBarcode(okapi(t), req)
			wantStrings(t, "refusals", refusals(t, err), c.want)
			s.store.WantUnchanged(before)
		})
	}
}

// TestRenewalWithAHoldThePolicyAllows: a hold first in the queue does not
// stop a renewal under a policy that renews items with requests.
func TestRenewalWithAHoldThePolicyAllows(t *testing.T) {
	t.Parallel()
	s := renewStack(t, map[string]any{"requestManagement": map[string]any{"holds": map[string]any{"renewItemsWithRequest": true}}})
	if _, err := s.checkOut(t); err != nil {
		t.Fatal(err)
	}
	s.store.AddRequest(storagetest.Request{ID: "aaaaaaaa-0000-4000-8000-00000000000c", ItemID: itemID, RequesterID: otherPatron,
		Status: "Open - Not yet filled", Position: 1})
	if _, err := s.svc.RenewByBarcode(okapi(t), renewRequest()); err != nil {
		t.Fatalf("renewal with a hold the policy allows: %v", err)
	}
}

// TestARenewalWithAHoldLendsForTheAlternatePeriod: with a hold first in
// the queue, a policy that renews items with requests lends for its
// alternateRenewalLoanPeriod (two days from the due date here), not its
// renewal period (a week), as mod-circulation's
// allowRenewalLoanByBarcodeWhenProfileIsRollingFirstRequestInQueueIsHoldAndRenewingIsAllowedInLoanPolicy
// expects (the due date moved on by the alternate period).
func TestARenewalWithAHoldLendsForTheAlternatePeriod(t *testing.T) {
	t.Parallel()
	s := renewStack(t, map[string]any{"requestManagement": map[string]any{"holds": map[string]any{"renewItemsWithRequest": true,
		"alternateRenewalLoanPeriod": map[string]any{"duration": 2, "intervalId": "Days"}}}})
	out, err := s.checkOut(t)
	if err != nil {
		t.Fatal(err)
	}
	s.store.AddRequest(storagetest.Request{ID: "aaaaaaaa-0000-4000-8000-00000000000e", ItemID: itemID, RequesterID: otherPatron,
		Status: "Open - Not yet filled", Position: 1})
	res, err := s.svc.RenewByBarcode(okapi(t), renewRequest())
	if err != nil {
		t.Fatalf("renewal with a hold: %v", err)
	}
	if want := out.Loan.DueDate.Add(48 * time.Hour); !res.Loan.DueDate.Equal(want) {
		t.Errorf("due %s after a renewal with a hold, want %s (two days on)", res.Loan.DueDate, want)
	}
}

// TestARecallSinceTheReadStopsTheWrite: a recall placed between the
// renewal's read and its write stops the write: storage checks for one in
// it.
func TestARecallSinceTheReadStopsTheWrite(t *testing.T) {
	t.Parallel()
	s := renewStack(t, nil)
	if _, err := s.checkOut(t); err != nil {
		t.Fatal(err)
	}
	s.store.Before(storagetest.RoutePutLoan, 1, func(storagetest.Call) {
		s.store.AddRequest(storagetest.Request{ID: "aaaaaaaa-0000-4000-8000-00000000000d", ItemID: itemID, RequesterID: otherPatron,
			Status: "Open - Not yet filled", Position: 1, Type: "Recall"})
	})
	_, err := s.svc.RenewByBarcode(okapi(t), renewRequest())
	wantStrings(t, "refusals", refusals(t, err), []string{
		"RENEWAL_BLOCKED_BY_RECALL: items cannot be renewed when there is an active recall request"})
	if loans := s.store.Loans(); len(loans) != 1 || loans[0].Action != "checkedout" {
		t.Errorf("loans %+v, want the loan as checked out", loans)
	}
}

// TestTwoRenewalsAtOnceRenewOnce: two circulation instances renew one
// loan at the same moment, both having read it at the same count (the
// boundary holds their writes until both arrive), twenty rounds: one
// renews, the other is told the loan changed and writes nothing.
func TestTwoRenewalsAtOnceRenewOnce(t *testing.T) {
	t.Parallel()
	s := renewStack(t, map[string]any{"renewalsPolicy": map[string]any{"unlimited": true, "renewFromId": "CURRENT_DUE_DATE"}})
	if _, err := s.checkOut(t); err != nil {
		t.Fatal(err)
	}
	other := stackOver(t, s.store, lockOn)
	// The two writes of a round pass together, once both arrived (or
	// after a while, when one never comes: the test then says why).
	var mu sync.Mutex
	var waiting []chan struct{}
	s.store.Before(storagetest.RoutePutLoan, -1, func(storagetest.Call) {
		me := make(chan struct{})
		mu.Lock()
		if waiting = append(waiting, me); len(waiting) == 2 {
			for _, w := range waiting {
				close(w)
			}
			waiting = nil
		}
		mu.Unlock()
		select {
		case <-me:
		case <-time.After(5 * time.Second):
		}
	})
	for round := 1; round <= 20; round++ {
		var wg sync.WaitGroup
		results := make([]error, 2)
		for i, st := range []*stack{s, other} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, results[i] = st.svc.RenewByBarcode(okapi(t), renewRequest())
			}()
		}
		wg.Wait()
		ok, changed := 0, 0
		for _, err := range results {
			switch {
			case err == nil:
				ok++
			case errs.IsCode(err, schemas.CodeLoanChanged) && errs.IsKind(err, errs.KindConflict):
				changed++
			default:
				t.Fatalf("round %d: %v", round, err)
			}
		}
		loans := s.store.Loans()
		if ok != 1 || changed != 1 || len(loans) != 1 || loans[0].Action != "renewed" {
			t.Fatalf("round %d: %d renewed, %d told the loan changed, loans %+v; want one of each", round, ok, changed, loans)
		}
		var count int
		for _, c := range s.store.Calls() {
			if c.Route == storagetest.RoutePutLoan && c.Status == http.StatusOK {
				count++
			}
		}
		if count != round {
			t.Fatalf("round %d: %d renewals written in all, want %d", round, count, round)
		}
	}
}

// TestALostRenewalIsNotAnotherRenewalsDone: two renewals of one loan read
// it at the same count; one is written, the other's write is refused (here
// at the boundary, as when its database backend is terminated while it
// waits behind the first) with an answer that does not say whether it
// was written. The loan read back would show exactly the renewal the
// second would have written (the same count, the same due date), so
// nothing read back can tell; the second is sent again with its own write
// id, which storage never stored: judged now, it is refused, the loan
// changed meanwhile, and never answered renewed (as the history checker
// found once: three renewals answered 200 around a fault, the loan renewed
// once).
func TestALostRenewalIsNotAnotherRenewalsDone(t *testing.T) {
	t.Parallel()
	// The lost write is sent again until it is answered: half a second
	// is not always enough on a loaded machine.
	s := renewStack(t, map[string]any{"renewalsPolicy": map[string]any{"unlimited": true, "renewFromId": "CURRENT_DUE_DATE"}},
		withSettleTimeout(10*time.Second))
	if _, err := s.checkOut(t); err != nil {
		t.Fatal(err)
	}
	other := stackOver(t, s.store, lockOn)
	s.store.Before(storagetest.RoutePutLoan, 1, func(storagetest.Call) {
		// The other renewal, from the same count, is written first; then
		// this one's write is answered 503 before storage sees it.
		if _, err := other.svc.RenewByBarcode(okapi(t), renewRequest()); err != nil {
			t.Errorf("the other renewal: %v", err)
		}
		s.store.Refuse(storagetest.RoutePutLoan, 1, http.StatusServiceUnavailable, schemas.CodeDatabaseUnavailable)
	})
	res, err := s.svc.RenewByBarcode(okapi(t), renewRequest())
	if err == nil {
		t.Fatalf("a renewal never written answered renewed: count %d, due %s", res.Loan.RenewalCount, res.Loan.DueDate)
	}
	wantError(t, err, errs.KindConflict, schemas.CodeLoanChanged)
	written, sent := 0, map[string]int{}
	for _, c := range s.store.Calls() {
		if c.Route == storagetest.RoutePutLoan {
			sent[c.WriteID]++
			if c.StorageStatus == http.StatusOK {
				written++
			}
		}
	}
	if loans := s.store.Loans(); written != 1 || len(loans) != 1 || loans[0].Action != circulation.ActionRenewed {
		t.Errorf("%d renewals written, loans %+v; want the other one alone", written, loans)
	}
	if len(sent) != 2 {
		t.Errorf("the renewals' writes by write id: %v; want the other's once and this one's twice (lost, sent again)", sent)
	}
}

// TestARenewalSentAgainNamesThePolicyItWasRenewedUnder: a renewal sent
// again with its Idempotency-Key after the rules changed to lend under
// another policy is answered with the policy the loan was renewed under,
// read by its id; where that read fails, with no policy's name, the
// renewal still answered as made.
func TestARenewalSentAgainNamesThePolicyItWasRenewedUnder(t *testing.T) {
	t.Parallel()
	s := renewStack(t, nil)
	if _, err := s.checkOut(t); err != nil {
		t.Fatal(err)
	}
	ctx := circulation.WithWrite(okapi(t), circulation.Write{ID: uuid.NewString(), Keyed: true})
	first, err := s.svc.RenewByBarcode(ctx, renewRequest())
	if err != nil || first.PolicyName != "Renewable" || first.Loan.LoanPolicyID != renewPolicy {
		t.Fatalf("the renewal: under %q (%s), %v; want renewed under %q", first.PolicyName, first.Loan.LoanPolicyID, err, "Renewable")
	}
	const later = "66666666-6666-4666-8666-00000000000f"
	s.store.AddLoanPolicy(storagetest.LoanPolicy{ID: later, Name: "Later", Loanable: true,
		Extra: map[string]any{"renewable": true, "renewalsPolicy": map[string]any{"unlimited": true}}})
	s.store.SetRules(later)
	again, err := s.svc.RenewByBarcode(ctx, renewRequest())
	if err != nil || again.Loan.ID != first.Loan.ID || again.Loan.RenewalCount != 1 || again.PolicyName != "Renewable" {
		t.Errorf("the renewal sent again after the rules changed: loan %s renewed %d times under %q, %v; want loan %s renewed once under %q",
			again.Loan.ID, again.Loan.RenewalCount, again.PolicyName, err, first.Loan.ID, "Renewable")
	}
	s.store.Refuse(storagetest.RouteLoanPolicy, 1, http.StatusServiceUnavailable, schemas.CodeDatabaseUnavailable)
	again, err = s.svc.RenewByBarcode(ctx, renewRequest())
	if err != nil || again.Loan.ID != first.Loan.ID || again.Loan.RenewalCount != 1 || again.PolicyName != "" {
		t.Errorf("the renewal sent again, its policy unreadable: loan %s renewed %d times under %q, %v; want loan %s renewed once, no policy named",
			again.Loan.ID, again.Loan.RenewalCount, again.PolicyName, err, first.Loan.ID)
	}
	wantCount(t, s.store, storagetest.RouteLoanPolicy, 2)
	// The patron's barcode then changed, and the read of the loan's
	// records by their ids refused: answered as made, by what the loan
	// names, its policy not asked for again.
	s.store.Exec(`UPDATE circulation_storage.patron SET jsonb = jsonb_set(jsonb, '{barcode}', '"u-moved"') WHERE tenant_id = $1 AND id = $2`, patronID)
	s.store.RefuseWhen(storagetest.RouteValidation, 1, http.StatusServiceUnavailable, schemas.CodeDatabaseUnavailable,
		func(c storagetest.Call) bool { return strings.Contains(c.Query, "userId=") })
	again, err = s.svc.RenewByBarcode(ctx, renewRequest())
	if err != nil || again.Loan.ID != first.Loan.ID || again.Loan.RenewalCount != 1 || again.PolicyName != "" || again.Patron.ID != "" ||
		again.Item.ID != itemID {
		t.Errorf("the renewal sent again, its records unreadable: loan %s renewed %d times under %q, item %s, patron %q, %v; want loan %s renewed once, item %s, no patron or policy named",
			again.Loan.ID, again.Loan.RenewalCount, again.PolicyName, again.Item.ID, again.Patron.ID, err, first.Loan.ID, itemID)
	}
	wantCount(t, s.store, storagetest.RouteLoanPolicy, 2)
	if loans := s.store.Loans(); len(loans) != 1 || loans[0].Action != circulation.ActionRenewed || loans[0].LoanPolicyID != renewPolicy {
		t.Errorf("loans %+v, want the one loan renewed under %s", loans, renewPolicy)
	}
}

// TestAnUnreadableSelfCheckEntryRequiresPins: a self-check settings entry
// storage would now refuse, stored before it checked them, makes a
// self-check machine's renewal without the patron's PIN PIN_REQUIRED,
// nothing written, never PINs off; a librarian renews all the same.
func TestAnUnreadableSelfCheckEntryRequiresPins(t *testing.T) {
	t.Parallel()
	s := renewStack(t, nil)
	if _, err := s.checkOut(t); err != nil {
		t.Fatal(err)
	}
	s.store.AddSettingUnchecked(selfcheck.Scope, selfcheck.Key, map[string]any{"patronPin": "sometimes"})
	before := s.store.Snapshot()
	_, err := s.svc.RenewByBarcode(okapi(t), renewRequest())
	if !errs.IsCode(err, schemas.CodePinRequired) {
		t.Fatalf("a kiosk's renewal without the PIN under an unreadable entry: %v, want %s", err, schemas.CodePinRequired)
	}
	s.store.WantUnchanged(before)
	librarian := renewRequest()
	librarian.Access.Details = true
	if res, err := s.svc.RenewByBarcode(okapi(t), librarian); err != nil || res.Loan.RenewalCount != 1 || !res.Named {
		t.Fatalf("a librarian's renewal: %+v, %v; want renewed, the borrower named", res, err)
	}
}
