package integration

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/checkoutlock/integration-tests/harness"
	"github.com/checkoutlock/schemas"
)

// sip2UTC is t as SIP2 writes a date in UTC.
func sip2UTC(t time.Time) string {
	t = t.UTC()
	return t.Format("20060102") + "   Z" + t.Format("150405")
}

// TestSIP2OfflineCheckInsAreDatedWhenTheyHappened: a kiosk that took
// books back while the library system was off line sends its check-ins
// later, marked no block (Y) with the transaction's own date: each loan
// is closed at that date, not when the message came, so that a book
// returned on time is not counted overdue; one the kiosk stored longer
// ago than the door takes (SIP2_OFFLINE_WITHIN, 72 hours) is refused with
// a screen message for the desk and changes nothing, as is one of an
// item the library does not know.
func TestSIP2OfflineCheckInsAreDatedWhenTheyHappened(t *testing.T) {
	t.Parallel()
	c, lib, door := sip2Cluster(t, 1, 1, 3, 0, nil)
	librarian := map[string]string{schemas.HeaderTenant: c.Tenant, schemas.HeaderToken: c.Token(schemas.RoleLibrarian)}
	patron, items := lib.Patrons[0], lib.Items[0]
	lent := time.Now().Add(-100 * time.Hour).UTC().Truncate(time.Second)
	for _, it := range items {
		c.DoWith(c.Circulations[0], "POST", "/circulation/check-out-by-barcode", map[string]any{"itemBarcode": it, "userBarcode": patron,
			"servicePointId": harness.ServicePoint, "loanDate": lent.Format(time.RFC3339)}, librarian).Want(t, http.StatusCreated)
	}
	k := harness.DialSIP2(t, door.SIP2Addr)
	k.Login("user_id", "passw0rd")
	offline := func(item string, at time.Time) string {
		return k.Send("09Y" + sip2UTC(at) + "                  APdesk|AOdiku|AB" + item + "|AC|")
	}
	returned := func(item string) (status, at string) {
		t.Helper()
		err := c.DB.QueryRow(context.Background(), fmt.Sprintf(`SELECT l.status_name, coalesce(l.jsonb ->> 'returnDate', '')
			FROM %[1]s.loan l JOIN %[1]s.item i ON i.id = l.item_id WHERE i.barcode = $1`, c.Schema), item).Scan(&status, &at)
		if err != nil {
			t.Fatal(err)
		}
		return status, at
	}
	// Taken back two hours ago, sent now: closed then.
	when := time.Now().Add(-2 * time.Hour).UTC().Truncate(time.Second)
	if r := offline(items[0], when); !strings.HasPrefix(r, "101") {
		t.Fatalf("an offline check-in: %q", r)
	}
	if status, at := returned(items[0]); status != "Closed" || at != when.Format("2006-01-02T15:04:05.000Z") {
		t.Errorf("the loan after an offline check-in of %s: %s returned %q, want Closed returned %s", when, status, at, when.Format(time.RFC3339))
	}
	// Sent again (the kiosk did not see the reply): refused, the loan
	// still returned when it was.
	offline(items[0], when)
	if status, at := returned(items[0]); status != "Closed" || at != when.Format("2006-01-02T15:04:05.000Z") {
		t.Errorf("the loan after the offline check-in sent again: %s returned %q", status, at)
	}
	// Taken back four days ago: too old for the door; nothing changes.
	r := offline(items[1], time.Now().Add(-96*time.Hour))
	if !strings.HasPrefix(r, "100") || !strings.Contains(harness.SIP2Field(r, "AF"), "too old") {
		t.Errorf("an offline check-in older than the door takes: %q", r)
	}
	if status, _ := returned(items[1]); status != "Open" {
		t.Errorf("the loan after a refused offline check-in: %s, want Open", status)
	}
	// An item the library does not know: refused, with a reason.
	if r := offline("no-such-item", when); !strings.HasPrefix(r, "100") || harness.SIP2Field(r, "AF") == "" {
		t.Errorf("an offline check-in of an unknown item: %q", r)
	}
	// A check-in that is not marked offline is dated now.
	k.Send(checkInMsg(items[2]))
	if status, at := returned(items[2]); status != "Closed" || at < time.Now().Add(-time.Minute).UTC().Format(time.RFC3339) {
		t.Errorf("a live check-in: %s returned %q, want now", status, at)
	}
}
