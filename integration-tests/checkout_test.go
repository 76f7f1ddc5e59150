package integration

import (
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/checkoutlock/integration-tests/harness"
)

// patronID looks a patron's id up by barcode.
func patronID(t *testing.T, c *harness.Cluster, barcode string) string {
	t.Helper()
	var page struct {
		Users []struct {
			ID string `json:"id"`
		} `json:"users"`
	}
	c.Do(c.Storage, "GET", "/users?barcode="+barcode, nil).Want(t, http.StatusOK).Decode(t, &page)
	if len(page.Users) != 1 {
		t.Fatalf("patron %s not found", barcode)
	}
	return page.Users[0].ID
}

func errorMessage(t *testing.T, r harness.Response) string {
	t.Helper()
	var env struct {
		Errors []struct {
			Message string `json:"message"`
		} `json:"errors"`
	}
	r.Decode(t, &env)
	if len(env.Errors) == 0 {
		t.Fatalf("no errors in %s", r.Body)
	}
	return env.Errors[0].Message
}

// TestHeldLockRefusesThenReleaseAllows is FOLIO's scenario: a lock held by
// someone else makes the check-out fail with "unable to acquire lock" once
// the retries run out, changing nothing; released, the check-out succeeds.
func TestHeldLockRefusesThenReleaseAllows(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true, RetryIntervalMs: "20|20|40"})
	lib := c.SetupLibrary(1, 2, 5)
	patron, item := lib.Patrons[0], lib.Items[0][0]

	var lock struct {
		ID string `json:"id"`
	}
	c.Do(c.Storage, "POST", "/check-out-lock-storage", map[string]any{"userId": patronID(t, c, patron), "ttlMs": 60000}).
		Want(t, http.StatusCreated).Decode(t, &lock)

	r := c.CheckOut(0, item, patron).Want(t, http.StatusUnprocessableEntity)
	if msg := errorMessage(t, r); msg != "unable to acquire lock" {
		t.Errorf("message %q, want FOLIO's %q", msg, "unable to acquire lock")
	}
	if n := c.OpenLoans(t, patron); n != 0 {
		t.Errorf("%d open loans after a refused check-out, want 0", n)
	}
	var items struct {
		Items []struct {
			Status struct{ Name string } `json:"status"`
		} `json:"items"`
	}
	c.Do(c.Storage, "GET", "/item-storage/items?barcode="+item, nil).Want(t, http.StatusOK).Decode(t, &items)
	if got := items.Items[0].Status.Name; got != "Available" {
		t.Errorf("item status %q after a refused check-out, want Available", got)
	}

	c.Do(c.Storage, "DELETE", "/check-out-lock-storage/"+lock.ID, nil).Want(t, http.StatusNoContent)
	c.CheckOut(0, item, patron).Want(t, http.StatusCreated)
	c.CheckInvariants(t, harness.Invariants{ItemLimit: 5})
}

// TestTwoConcurrentCheckOutsAtLimitOne is FOLIO's other scenario: with the
// feature on and itemLimit 1, two simultaneous check-outs for one patron
// through two instances give one 201 and one 422 with the limit message.
func TestTwoConcurrentCheckOutsAtLimitOne(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 2, FeatureOn: true, RetryIntervalMs: "50|100|200|400|800"})
	const rounds = 10
	lib := c.SetupLibrary(rounds, 2, 1)
	for round := range rounds {
		patron := lib.Patrons[round]
		results := make([]harness.Response, 2)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				results[i] = c.CheckOut(i, lib.Items[round][i], patron)
			}()
		}
		close(start)
		wg.Wait()
		created, limited := 0, 0
		for _, r := range results {
			switch {
			case r.Status == http.StatusCreated:
				created++
			case r.Status == http.StatusUnprocessableEntity && errorMessage(t, r) == "Patron has reached maximum limit of 1 items for loan type":
				limited++
			default:
				t.Errorf("round %d: unexpected answer %d %s", round, r.Status, r.Body)
			}
		}
		if created != 1 || limited != 1 {
			t.Fatalf("round %d: %d created and %d refused at the limit, want 1 and 1", round, created, limited)
		}
		if n := c.OpenLoans(t, patron); n != 1 {
			t.Fatalf("round %d: patron has %d open loans, want 1", round, n)
		}
	}
	c.CheckInvariants(t, harness.Invariants{ItemLimit: 1})
	summary(t, 2*rounds, rounds, rounds, 0, "")
}

// TestCheckOutCheckInAndRuntimeToggle walks a librarian's day: check out,
// refuse at the limit, check in, and turn the feature off and on again at
// runtime, seeing storage's lock counter move only while it is on.
func TestCheckOutCheckInAndRuntimeToggle(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 2, FeatureOn: true})
	lib := c.SetupLibrary(1, 4, 2)
	patron, items := lib.Patrons[0], lib.Items[0]

	var loan struct {
		ID       string `json:"id"`
		DueDate  string `json:"dueDate"`
		Borrower struct {
			Barcode string `json:"barcode"`
		} `json:"borrower"`
		Item struct {
			Status struct{ Name string } `json:"status"`
		} `json:"item"`
	}
	r := c.CheckOut(0, items[0], patron).Want(t, http.StatusCreated)
	r.Decode(t, &loan)
	if r.Header.Get("Location") != "/circulation/loans/"+loan.ID || loan.Borrower.Barcode != patron || loan.Item.Status.Name != "Checked out" || loan.DueDate == "" {
		t.Errorf("check-out answer %s, Location %q", r.Body, r.Header.Get("Location"))
	}
	c.Do(c.Circulations[1], "GET", "/circulation/loans/"+loan.ID, nil).Want(t, http.StatusOK)
	c.CheckOut(1, items[1], patron).Want(t, http.StatusCreated)
	refused := c.CheckOut(0, items[2], patron).Want(t, http.StatusUnprocessableEntity)
	if codes := refused.ErrorCodes(); len(codes) != 1 || codes[0] != "ITEM_LIMIT_LOAN_TYPE" {
		t.Errorf("at the limit: codes %v, want [ITEM_LIMIT_LOAN_TYPE]", codes)
	}
	c.CheckIn(1, items[0]).Want(t, http.StatusOK)
	c.CheckOut(0, items[2], patron).Want(t, http.StatusCreated)

	acquisitions := func() string {
		m := string(c.DoWith(c.Storage, "GET", "/metrics", nil, nil).Body)
		for _, line := range strings.Split(m, "\n") {
			if strings.HasPrefix(line, `checkout_lock_acquisitions_total{outcome="acquired"}`) {
				return line
			}
		}
		return ""
	}
	c.CheckIn(0, items[1]).Want(t, http.StatusOK)
	// Off at runtime, on every instance within the settings cache period.
	c.Do(c.Circulations[0], "PUT", "/circulation/settings/check-out-lock", map[string]any{"checkOutLockFeatureEnabled": false}).
		Want(t, http.StatusOK)
	waitFor(t, "instance 2 sees the feature off", func() bool {
		var s struct {
			Enabled bool   `json:"checkOutLockFeatureEnabled"`
			Sources any    `json:"sources"`
			Error   string `json:"settingsError"`
		}
		c.Do(c.Circulations[1], "GET", "/circulation/settings/check-out-lock", nil).Want(t, http.StatusOK).Decode(t, &s)
		return !s.Enabled
	})
	before := acquisitions()
	c.CheckOut(1, items[1], patron).Want(t, http.StatusCreated)
	if after := acquisitions(); after != before {
		t.Errorf("lock acquired with the feature off: %q then %q", before, after)
	}
	c.Do(c.Circulations[1], "PUT", "/circulation/settings/check-out-lock", map[string]any{"checkOutLockFeatureEnabled": true}).
		Want(t, http.StatusOK)
	c.CheckIn(0, items[1]).Want(t, http.StatusOK)
	c.CheckOut(1, items[1], patron).Want(t, http.StatusCreated)
	if after := acquisitions(); after == before {
		t.Errorf("no lock acquired with the feature back on: %q", after)
	}
	c.CheckInvariants(t, harness.Invariants{ItemLimit: 2})
}

// TestAPolicyLendingPastTheLastYearIsDueAtItsEnd: a loan policy whose
// period ends past the year 9999 (100000 months, the longest a policy
// may give) lends, due at the year's last instant, not refused for a due
// date nobody sent.
func TestAPolicyLendingPastTheLastYearIsDueAtItsEnd(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true})
	lib := c.SetupLibrary(1, 1, 0)
	changePolicy(t, c, lib, map[string]any{"loansPolicy": map[string]any{"profileId": "Rolling",
		"period": map[string]any{"duration": 100000, "intervalId": "Months"}}})
	var loan struct{ DueDate string }
	c.Do(c.Circulations[0], "POST", "/circulation/check-out-by-barcode", map[string]any{"itemBarcode": lib.Items[0][0],
		"userBarcode": lib.Patrons[0], "servicePointId": harness.ServicePoint}).Want(t, http.StatusCreated).Decode(t, &loan)
	if loan.DueDate != "9999-12-31T23:59:59.999Z" {
		t.Errorf("due %s, want 9999-12-31T23:59:59.999Z", loan.DueDate)
	}
}
