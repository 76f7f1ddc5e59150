package integration

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/checkoutlock/integration-tests/harness"
)

// renewable makes the library's loan policy renew twice, from the due
// date, for a week.
func renewable(t *testing.T, c *harness.Cluster, lib harness.Library, renewalsPolicy map[string]any) {
	t.Helper()
	var policy map[string]any
	c.Do(c.Storage, "GET", "/loan-policy-storage/loan-policies/"+lib.PolicyID, nil).Want(t, http.StatusOK).Decode(t, &policy)
	delete(policy, "metadata")
	policy["renewable"] = true
	policy["renewalsPolicy"] = renewalsPolicy
	c.Do(c.Storage, "PUT", "/loan-policy-storage/loan-policies/"+lib.PolicyID, policy).Want(t, http.StatusNoContent)
}

// renewalEvents counts the tenant's RENEWED events recorded.
func renewalEvents(t *testing.T, c *harness.Cluster) int {
	t.Helper()
	var n int
	if err := c.DB.QueryRow(context.Background(), `SELECT count(*) FROM circulation_storage.outbox WHERE tenant_id = $1 AND kind = 'renewal'`,
		c.Tenant).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// renewalCount is the item's open loan's renewalCount.
func renewalCount(t *testing.T, c *harness.Cluster, item string) int {
	t.Helper()
	var n int
	err := c.DB.QueryRow(context.Background(), fmt.Sprintf(`SELECT coalesce((l.jsonb ->> 'renewalCount')::int, 0) FROM %s.loan l
		JOIN %s.item i ON i.id = l.item_id WHERE i.barcode = $1 AND l.status_name = 'Open'`, c.Schema, c.Schema), item).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRenewalsOverHTTPAndSIP2: FOLIO's renewal across the real binaries.
// Over HTTP a loan is renewed (200, the count and the due date moved, one
// RENEWED event) until the policy's limit, then refused with FOLIO's code
// and message; over SIP2 the same refusal reaches the kiosk in AF, a 65
// renews what it can and lists each item where it belongs (a recalled
// one among those not renewed, with FOLIO's reason).
func TestRenewalsOverHTTPAndSIP2(t *testing.T) {
	c, lib, door := sip2Cluster(t, 1, 2, 4, 0, nil)
	renewable(t, c, lib, map[string]any{"numberAllowed": 1, "renewFromId": "CURRENT_DUE_DATE"})
	patron, items := lib.Patrons[0], lib.Items[0]
	for _, item := range items {
		c.CheckOut(0, item, patron).Want(t, http.StatusCreated)
	}
	renew := func(item string) harness.Response {
		return c.Do(c.Circulations[0], "POST", "/circulation/renew-by-barcode",
			map[string]string{"itemBarcode": item, "userBarcode": patron, "servicePointId": harness.ServicePoint})
	}
	var loan struct {
		DueDate      string `json:"dueDate"`
		RenewalCount int    `json:"renewalCount"`
		Action       string `json:"action"`
	}
	renew(items[0]).Want(t, http.StatusOK).Decode(t, &loan)
	if loan.RenewalCount != 1 || loan.Action != "renewed" || renewalCount(t, c, items[0]) != 1 || renewalEvents(t, c) != 1 {
		t.Fatalf("renewed loan %+v (stored count %d, %d events), want count 1, renewed, one event", loan, renewalCount(t, c, items[0]),
			renewalEvents(t, c))
	}
	r := renew(items[0]).Want(t, http.StatusUnprocessableEntity)
	if !strings.Contains(string(r.Body), `"code":"LOAN_RENEWAL_LIMIT_REACHED"`) || !strings.Contains(string(r.Body), "loan at maximum renewal number") {
		t.Errorf("a renewal past the limit: %s", r.Body)
	}

	k := harness.DialSIP2(t, door.SIP2Addr)
	k.Login("user_id", "passw0rd")
	renewMsg := func(item string) string {
		return "29NN" + harness.SIP2Date() + harness.SIP2Date() + "AOdiku|AA" + patron + "|AB" + item + "|"
	}
	if got := k.Send(renewMsg(items[0])); !strings.HasPrefix(got, "300") || harness.SIP2Field(got, "AF") != "loan at maximum renewal number" {
		t.Errorf("29 past the limit: %q", got)
	}
	if got := k.Send(renewMsg(items[1])); !strings.HasPrefix(got, "301Y") || harness.SIP2Field(got, "AH") == "" {
		t.Errorf("29: %q, want renewed with the new due date", got)
	}

	// Renew all: items[0] and [1] at their limit, [3] recalled, [2] renews.
	other := c.IDOf(t, "/users", "users", lib.Patrons[1])
	c.Do(c.Storage, "POST", "/request-storage/requests", map[string]any{"requestType": "Recall", "requestLevel": "Item",
		"requestDate": "2026-01-01T10:00:00.000Z", "requesterId": other, "itemId": c.IDOf(t, "/item-storage/items", "items", items[3]),
		"status": "Open - Not yet filled", "position": 1, "fulfillmentPreference": "Hold Shelf"}).Want(t, http.StatusCreated)
	id := c.IDOf(t, "/users", "users", patron)
	c.Do(c.Storage, "POST", "/patron-pin", map[string]any{"id": id, "pin": "7319"}).Want(t, http.StatusCreated)
	if got := k.Send("65" + harness.SIP2Date() + "AOdiku|AA" + patron + "|"); !strings.HasPrefix(got, "660") ||
		harness.SIP2Field(got, "AF") != "Please enter your PIN" {
		t.Errorf("65 without the PIN: %q", got)
	}
	got := k.Send("65" + harness.SIP2Date() + "AOdiku|AA" + patron + "|AD7319|")
	var renewed, not []string
	for _, f := range strings.Split(got, "|") {
		switch {
		case strings.HasPrefix(f, "BM"):
			renewed = append(renewed, f[2:])
		case strings.HasPrefix(f, "BN"):
			not = append(not, f[2:])
		}
	}
	slices.Sort(not)
	if !strings.HasPrefix(got, "66100010003") || !slices.Equal(renewed, items[2:3]) ||
		!slices.Equal(not, []string{items[0], items[1], items[3]}) ||
		!strings.Contains(harness.SIP2Field(got, "AF"), items[3]+": items cannot be renewed when there is an active recall request") {
		t.Errorf("65: %q, want %s renewed, the rest not, with FOLIO's reasons", got, items[2])
	}
	if n := renewalEvents(t, c); n != 3 {
		t.Errorf("%d RENEWED events, want one per renewal: 3", n)
	}
}

// TestTwoRenewalsAtOnceAcrossInstances: two circulation instances renew
// one loan at the same moment, twenty rounds: every renewal answered 200
// is one more on the loan's count and one RENEWED event, the other
// answers are the loan changed (409), never a 5xx.
func TestTwoRenewalsAtOnceAcrossInstances(t *testing.T) {
	c := harness.NewCluster(t, harness.Options{Circulations: 2, FeatureOn: true})
	lib := c.SetupLibrary(1, 1, 0)
	renewable(t, c, lib, map[string]any{"unlimited": true, "renewFromId": "CURRENT_DUE_DATE"})
	patron, item := lib.Patrons[0], lib.Items[0][0]
	c.CheckOut(0, item, patron).Want(t, http.StatusCreated)
	renewedOK := 0
	for round := range 20 {
		var wg sync.WaitGroup
		statuses := make([]int, 2)
		for i := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				statuses[i] = c.Do(c.Circulations[i], "POST", "/circulation/renew-by-barcode",
					map[string]string{"itemBarcode": item, "userBarcode": patron}).Status
			}()
		}
		wg.Wait()
		for _, s := range statuses {
			switch s {
			case http.StatusOK:
				renewedOK++
			case http.StatusConflict:
			default:
				t.Fatalf("round %d: answers %v", round, statuses)
			}
		}
		if statuses[0] != http.StatusOK && statuses[1] != http.StatusOK {
			t.Fatalf("round %d: answers %v, want at least one renewal", round, statuses)
		}
		if n := renewalCount(t, c, item); n != renewedOK {
			t.Fatalf("round %d: the loan's count %d, %d renewals answered 200", round, n, renewedOK)
		}
	}
	if n := renewalEvents(t, c); n != renewedOK {
		t.Errorf("%d RENEWED events, %d renewals", n, renewedOK)
	}
	t.Logf("20 rounds of two renewals at once: %d renewed, %d told the loan changed", renewedOK, 40-renewedOK)
}
