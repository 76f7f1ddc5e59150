package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/checkoutlock/integration-tests/harness"
	"github.com/checkoutlock/schemas"
)

// agingPolicy is a lost item fee policy ageing a loan to lost a minute
// after its due date and billing its patron at once: 10.00 for the item,
// 5.00 for processing (charged when the system ages it).
func agingPolicy(name string, billedAfter map[string]any) map[string]any {
	p := lostPolicy(10, 5)
	p["name"] = name
	p["chargeAmountItemSystem"] = true
	p["itemAgedLostOverdue"] = map[string]any{"duration": 1, "intervalId": "Minutes"}
	if billedAfter != nil {
		p["patronBilledAfterAgedLost"] = billedAfter
	}
	return p
}

// agedState is a loan and its item as stored.
type agedState struct {
	Status, Action, ItemStatus, LoanItemStatus, Billed, AgedAt, BillAt string
	Version                                                            int
}

func agingStateOf(t *testing.T, c *harness.Cluster, loanID string) agedState {
	t.Helper()
	var s agedState
	err := c.DB.QueryRow(context.Background(), fmt.Sprintf(`SELECT l.status_name, coalesce(l.jsonb ->> 'action', ''), i.status_name,
		coalesce(l.jsonb ->> 'itemStatus', ''), coalesce(l.jsonb #>> '{agedToLostDelayedBilling,lostItemHasBeenBilled}', ''),
		coalesce(l.jsonb #>> '{agedToLostDelayedBilling,agedToLostDate}', ''), coalesce(l.jsonb #>> '{agedToLostDelayedBilling,dateLostItemShouldBeBilled}', ''), l.version
		FROM %[1]s.loan l JOIN %[1]s.item i ON i.id = l.item_id WHERE l.id = $1::uuid`, c.Schema), loanID).
		Scan(&s.Status, &s.Action, &s.ItemStatus, &s.LoanItemStatus, &s.Billed, &s.AgedAt, &s.BillAt, &s.Version)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// nothing is whether amount is zero (0, 0.00).
func nothing(amount json.Number) bool {
	f, err := amount.Float64()
	return err == nil && f == 0
}

// TestLoansAgeToLostAsFOLIOAgesThem: FOLIO's expectations of its
// scheduled age to lost (mod-circulation's ScheduledAgeToLostApiTest,
// ScheduledAgeToLostFeeChargingApiTest), replayed black-box over the
// real binaries, the storage's sweeper passing every few milliseconds. A
// loan overdue longer than its lost item fee policy's itemAgedLostOverdue
// is aged to lost (the item Aged to lost, the loan's action
// itemAgedToLost, its aged-to-lost date and billing date) and its patron
// billed the policy's lost item fee and, as the system aged it, the
// processing fee, once; a policy billing a week later bills nothing
// until its week has passed;
// a loan not overdue long enough, or under a policy that ages nothing,
// stays Checked out, as does one declared lost; an aged loan declared
// lost is billed nothing more; the item returned closes the loan and
// cancels what it was billed.
func TestLoansAgeToLostAsFOLIOAgesThem(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, Storages: 1, FeatureOn: true,
		StorageEnv: []string{"LOCK_SWEEP_INTERVAL=20ms"}})
	lib := setUpFees(t, c, 5, 1, facultyStandard(), agingPolicy("Ages in a minute", nil))
	patron := func(p int) string { return c.IDOf(t, "/users", "users", lib.Patrons[p]) }
	// A week to bill, the second loan's; twenty years to age, the
	// third's; none ageing, the fourth's.
	policy := func(p map[string]any) string {
		t.Helper()
		var out struct{ ID string }
		c.Do(c.Storage, "POST", "/lost-item-fees-policies", p).Want(t, http.StatusCreated).Decode(t, &out)
		return out.ID
	}
	later := policy(agingPolicy("Billed a week later", map[string]any{"duration": 1, "intervalId": "Weeks"}))
	slow := agingPolicy("Ages in twenty years", nil)
	slow["itemAgedLostOverdue"] = map[string]any{"duration": 1040, "intervalId": "Weeks"}
	slowly := policy(slow)
	never := policy(lostPolicy(10, 5))
	// overdue makes a loan due three years ago under its lost item fee
	// policy, both in one write: as FOLIO's tests make loans long overdue,
	// and aged by no pass under the policy it had before. Three years
	// before today, not before a fixed day: overdue long enough for a
	// minute's policy and never for twenty years', whatever the year.
	longAgo := schemas.FormatTime(time.Now().UTC().AddDate(-3, 0, 0))
	overdue := func(loan map[string]any, policy string) {
		t.Helper()
		var stored map[string]any
		c.Do(c.Storage, "GET", fmt.Sprint("/loan-storage/loans/", loan["id"]), nil).Want(t, http.StatusOK).Decode(t, &stored)
		stored["dueDate"], stored["lostItemPolicyId"] = longAgo, policy
		delete(stored, "metadata")
		c.Do(c.Storage, "PUT", fmt.Sprint("/loan-storage/loans/", loan["id"]), stored).Want(t, http.StatusNoContent)
	}
	now := func() string { return schemas.FormatTime(time.Now()) }
	aged := checkOutOn(t, c, lib.Items[0][0], lib.Patrons[0], "2020-01-01T12:00:00.000Z")
	billedLater := checkOutOn(t, c, lib.Items[1][0], lib.Patrons[1], now())
	overdue(billedLater, later)
	notYet := checkOutOn(t, c, lib.Items[2][0], lib.Patrons[2], now())
	overdue(notYet, slowly)
	unaged := checkOutOn(t, c, lib.Items[3][0], lib.Patrons[3], now())
	overdue(unaged, never)
	// The fifth, due as long ago under the policy that ages, was declared
	// lost first: it is billed for that, and never aged.
	declared := checkOutOn(t, c, lib.Items[4][0], lib.Patrons[4], now())
	c.Do(c.Circulations[0], "POST", fmt.Sprintf("/circulation/loans/%s/declare-item-lost", declared["id"]),
		map[string]any{"servicePointId": harness.ServicePoint}).Want(t, http.StatusNoContent)
	overdue(declared, lib.LostPolicy)
	waitFor(t, "the first loan aged and billed", func() bool {
		return agingStateOf(t, c, fmt.Sprint(aged["id"])).Billed == "true"
	})
	s := agingStateOf(t, c, fmt.Sprint(aged["id"]))
	if s.Status != schemas.LoanOpen || s.Action != "itemAgedToLost" || s.ItemStatus != schemas.ItemAgedToLost || s.LoanItemStatus != schemas.ItemAgedToLost ||
		s.AgedAt == "" || s.BillAt == "" {
		t.Errorf("the loan overdue for years: %+v, want open, itemAgedToLost, its item Aged to lost, with its dates", s)
	}
	fees := accountsOf(t, c, patron(0))
	if len(fees) != 2 {
		t.Fatalf("the loan aged to lost: %d fees/fines, want the lost item fee and the processing fee", len(fees))
	}
	byType := map[string]account{}
	for _, f := range fees {
		byType[f.FeeFineType] = f
	}
	if byType[schemas.FeeFineLostItemFee].Amount.String() != "10.00" || byType[schemas.FeeFineLostItemProcessing].Amount.String() != "5.00" {
		t.Errorf("billed %+v, want 10.00 and 5.00", fees)
	}
	waitFor(t, "the second loan aged", func() bool {
		return agingStateOf(t, c, fmt.Sprint(billedLater["id"])).ItemStatus == schemas.ItemAgedToLost
	})
	if s := agingStateOf(t, c, fmt.Sprint(billedLater["id"])); s.Billed != "false" {
		t.Errorf("a loan to be billed a week after it was aged: %+v, want not billed", s)
	}
	if n := len(accountsOf(t, c, patron(1))); n != 0 {
		t.Errorf("a loan billed a week after it was aged: %d fees/fines now, want none", n)
	}
	// Its week passed (its billing date moved back, as FOLIO's tests move
	// their clock): a later pass bills it, once.
	var stored map[string]any
	c.Do(c.Storage, "GET", fmt.Sprint("/loan-storage/loans/", billedLater["id"]), nil).Want(t, http.StatusOK).Decode(t, &stored)
	stored["agedToLostDelayedBilling"].(map[string]any)["dateLostItemShouldBeBilled"] = "2021-01-01T00:00:00.000Z"
	delete(stored, "metadata")
	c.Do(c.Storage, "PUT", fmt.Sprint("/loan-storage/loans/", billedLater["id"]), stored).Want(t, http.StatusNoContent)
	waitFor(t, "the second loan billed", func() bool {
		return agingStateOf(t, c, fmt.Sprint(billedLater["id"])).Billed == "true"
	})
	if fees := accountsOf(t, c, patron(1)); len(fees) != 2 {
		t.Errorf("the loan billed a week after it was aged: %d fees/fines, want the lost item fee and the processing fee", len(fees))
	}
	// A pass or two later: the loan not overdue long enough and the one
	// under a policy that ages nothing are as they were; the aged loan
	// billed once.
	billed := agingStateOf(t, c, fmt.Sprint(aged["id"]))
	series := `checkout_lock_sweeper_work_seconds_count{work="age_to_lost"}`
	before := metric(t, c, c.Storage, series)
	waitFor(t, "two more ageing passes", func() bool { return metric(t, c, c.Storage, series) >= before+2 })
	if s := agingStateOf(t, c, fmt.Sprint(notYet["id"])); s.ItemStatus != schemas.ItemCheckedOut || s.AgedAt != "" {
		t.Errorf("a loan overdue for years under a policy ageing after twenty: %+v, want Checked out", s)
	}
	if s := agingStateOf(t, c, fmt.Sprint(unaged["id"])); s.ItemStatus != schemas.ItemCheckedOut || s.AgedAt != "" {
		t.Errorf("a loan under a policy that ages nothing: %+v, want Checked out", s)
	}
	if s := agingStateOf(t, c, fmt.Sprint(declared["id"])); s.ItemStatus != schemas.ItemDeclaredLost || s.Action != "declaredLost" || s.AgedAt != "" {
		t.Errorf("a loan declared lost, long overdue: %+v, want declared lost, not aged", s)
	}
	if s := agingStateOf(t, c, fmt.Sprint(aged["id"])); s != billed {
		t.Errorf("the aged loan, billed, after more passes: %+v, want as it was, %+v: a billed loan is left alone", s, billed)
	}
	for p := range 2 {
		if n := len(accountsOf(t, c, patron(p))); n != 2 {
			t.Errorf("aged loan %d has %d fees/fines after more passes, want 2: billed once", p, n)
		}
	}
	// Declared lost after it was aged and billed: Declared lost, and
	// billed nothing more.
	c.Do(c.Circulations[0], "POST", fmt.Sprintf("/circulation/loans/%s/declare-item-lost", aged["id"]),
		map[string]any{"servicePointId": harness.ServicePoint}).Want(t, http.StatusNoContent)
	if s := agingStateOf(t, c, fmt.Sprint(aged["id"])); s.ItemStatus != schemas.ItemDeclaredLost {
		t.Errorf("the aged loan declared lost: %+v, want its item Declared lost", s)
	}
	if n := len(accountsOf(t, c, patron(0))); n != 2 {
		t.Errorf("the aged loan, billed, then declared lost has %d fees/fines, want 2: billed once", n)
	}
	// Returned: the loan closed, the item back, what it was billed
	// cancelled.
	checkInOn(t, c, lib.Items[0][0], harness.ServicePoint, schemas.FormatTime(time.Now()))
	if s := agingStateOf(t, c, fmt.Sprint(aged["id"])); s.Status != schemas.LoanClosed || s.ItemStatus == schemas.ItemAgedToLost || s.AgedAt != billed.AgedAt {
		t.Errorf("the aged loan returned: %+v, want closed, its item no longer Aged to lost, the time it was aged kept", s)
	}
	for _, f := range accountsOf(t, c, patron(0)) {
		if !nothing(f.Remaining) || f.Status.Name != schemas.FeeFineClosed {
			t.Errorf("after the return: %+v, want every lost fee cancelled", f)
		}
	}
}

// TestAgeToLostRacesCheckInsAndRenewals: loans ripe for aging checked in
// and renewed at once with the sweeper ageing them, twenty rounds, and
// more (up to sixty) until the sweeper has won a race and lost one: a
// machine slow enough to answer them all before the policy's change is
// stored has not raced them. Each
// loan ends returned, renewed or aged to lost, never two at once: its
// item is Aged to lost exactly while the loan is open with the action
// itemAgedToLost; an aged loan is billed once (10.00 and 5.00), a
// returned one owes nothing it was billed for.
func TestAgeToLostRacesCheckInsAndRenewals(t *testing.T) {
	t.Parallel()
	const rounds, maxRounds, perRound = 20, 60, 4
	c := harness.NewCluster(t, harness.Options{Circulations: 2, Storages: 1, FeatureOn: true,
		StorageEnv: []string{"LOCK_SWEEP_INTERVAL=10ms"}})
	lib := setUpFees(t, c, perRound, maxRounds, facultyStandard(), agingPolicy("Ages in a minute", nil))
	renewable(t, c, lib.Library, map[string]any{"unlimited": true, "renewFromId": "SYSTEM_DATE"})
	// The loans of a round are made under the policy with its aging off,
	// then it is turned on as the check-ins and renewals are sent: the
	// sweeper finds them all ripe at once, within a pass of the change.
	aging := func(on bool) {
		t.Helper()
		p := agingPolicy("Ages in a minute", nil)
		if !on {
			delete(p, "itemAgedLostOverdue")
		}
		c.Do(c.Storage, "PUT", "/lost-item-fees-policies/"+lib.LostPolicy, p).Want(t, http.StatusNoContent)
	}
	outcomes, answers := map[string]int{}, map[string]int{}
	var mu sync.Mutex
	met := func() bool { return outcomes["aged"] > 0 && outcomes["returned"]+outcomes["renewed"] > 0 }
	r := 0
	for ; r < rounds || (r < maxRounds && !met()); r++ {
		aging(false)
		loans, statuses := make([]string, perRound), make([]int, perRound)
		for p := range perRound {
			loans[p] = fmt.Sprint(checkOutOn(t, c, lib.Items[p][r], lib.Patrons[p], "2020-01-01T12:00:00.000Z")["id"])
		}
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			aging(true)
		}()
		start := time.Now()
		for p := range perRound {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Spread over the passes around the change: some before
				// it, some as the sweeper ages.
				<-time.After(time.Until(start.Add(time.Duration(r%5*p) * 4 * time.Millisecond)))
				var res harness.Response
				what := "check-in"
				if p%2 == 0 {
					res = c.CheckIn(p, lib.Items[p][r])
				} else {
					what = "renewal"
					res = c.Do(c.Circulations[p%2], "POST", "/circulation/renew-by-barcode", map[string]any{"itemBarcode": lib.Items[p][r], "userBarcode": lib.Patrons[p]})
				}
				statuses[p] = res.Status
				mu.Lock()
				answers[fmt.Sprint(what, " ", res.Status)]++
				mu.Unlock()
			}()
		}
		wg.Wait()
		// Every aged loan billed before the round is judged.
		waitFor(t, "the round's aged loans billed", func() bool {
			for _, id := range loans {
				if s := agingStateOf(t, c, id); s.Status == schemas.LoanOpen && s.Action == "itemAgedToLost" && s.Billed != "true" {
					return false
				}
			}
			return true
		})
		for p, id := range loans {
			s := agingStateOf(t, c, id)
			agedNow := s.Status == schemas.LoanOpen && s.Action == "itemAgedToLost"
			if (s.ItemStatus == schemas.ItemAgedToLost) != agedNow || (agedNow && s.LoanItemStatus != schemas.ItemAgedToLost) {
				t.Fatalf("round %d, loan %s: %+v: the item is Aged to lost exactly while the loan is", r, id, s)
			}
			var lost []account
			for _, f := range accountsOf(t, c, c.IDOf(t, "/users", "users", lib.Patrons[p])) {
				if f.LoanID == id && (f.FeeFineType == schemas.FeeFineLostItemFee || f.FeeFineType == schemas.FeeFineLostItemProcessing) {
					lost = append(lost, f)
				}
			}
			// Each answer is the outcome: a check-in answered 200 closed
			// the loan, a renewal answered 200 renewed it, and a loan
			// whose check-in or renewal was refused was aged.
			if (statuses[p] == http.StatusOK) != (s.Status == schemas.LoanClosed || s.Action == "renewed") {
				t.Fatalf("round %d, loan %s answered %d and is %+v", r, id, statuses[p], s)
			}
			switch {
			case agedNow:
				outcomes["aged"]++
				if len(lost) != 2 {
					t.Fatalf("round %d, loan %s aged: %d fees/fines, want 2 (billed once): %+v", r, id, len(lost), lost)
				}
			case s.Status == schemas.LoanClosed:
				outcomes["returned"]++
				if s.ItemStatus == schemas.ItemAgedToLost {
					t.Fatalf("round %d, loan %s returned, its item Aged to lost", r, id)
				}
				for _, f := range lost {
					if !nothing(f.Remaining) {
						t.Fatalf("round %d, loan %s returned still owes %+v", r, id, f)
					}
				}
			case s.Action == "renewed":
				outcomes["renewed"]++
				if s.ItemStatus != schemas.ItemCheckedOut || len(lost) != 0 {
					t.Fatalf("round %d, loan %s renewed: %+v, %d lost fees: want Checked out, none", r, id, s, len(lost))
				}
			default:
				t.Fatalf("round %d, loan %s: %+v: neither returned, renewed nor aged", r, id, s)
			}
		}
	}
	t.Logf("SUMMARY age_to_lost_race rounds=%d loans=%d aged=%d returned=%d renewed=%d answers=%v", r, r*perRound,
		outcomes["aged"], outcomes["returned"], outcomes["renewed"], answers)
	if !met() {
		t.Errorf("outcomes %v in %d rounds: the sweeper and the check-ins never met", outcomes, r)
	}
}
