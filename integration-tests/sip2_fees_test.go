package integration

import (
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/checkoutlock/integration-tests/harness"
	"github.com/checkoutlock/schemas"
)

// sequenced is a reply's error detection (AY, AZ), which each connection
// numbers its own way.
var sequenced = regexp.MustCompile(`AY[0-9]AZ[0-9A-F]{4}$`)

// TestTwoMachinesSharingAnAccountPayEachItsOwn: two self-check machines
// signed in as one account, at two locations, that number their
// payments alike (BK 0001) for the same patron and amount: each is paid,
// two payments; each sent again is answered as it was and pays nothing
// more.
func TestTwoMachinesSharingAnAccountPayEachItsOwn(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true})
	lib := setUpFees(t, c, 1, 1, facultyStandard(), lostPolicy(10, 5))
	c.Account(t, "user_id", "Kiosk", "One", schemas.RoleSelfCheck, "passw0rd")
	patron, items := lib.Patrons[0], lib.Items[0]
	checkOutOn(t, c, items[0], patron, "2020-01-01T12:00:00.000Z")
	checkInOn(t, c, items[0], harness.ServicePoint, "2020-01-25T12:00:00.000Z")
	fine := accountsOf(t, c, c.IDOf(t, "/users", "users", patron))[0]
	door := c.StartSIP2(t, 0, nil)
	payment := "37" + harness.SIP2Date() + "0100USDBV5.00|AOdiku|AA" + patron + "|BK0001|"
	var first []string
	for _, location := range []string{"east-1", "east-2"} {
		k := harness.DialSIP2(t, door.SIP2Addr)
		k.LoginAt("user_id", "passw0rd", location)
		r := sequenced.ReplaceAllString(k.Send(payment), "")
		if !strings.HasPrefix(r, "38Y") {
			t.Fatalf("%s's payment: %q, want accepted", location, r)
		}
		if again := sequenced.ReplaceAllString(k.Send(payment), ""); again != r {
			t.Fatalf("%s's payment sent again: %q, want %q", location, again, r)
		}
		first = append(first, harness.SIP2Field(r, "AF"))
	}
	if want := []string{"Paid 5.00 USD; 10.00 USD remains", "Paid 5.00 USD; 5.00 USD remains"}; !slices.Equal(first, want) {
		t.Fatalf("the two machines were told %q, want %q", first, want)
	}
	if acts := actionsOf(t, c, fine.ID); len(acts) != 3 || acts[1].AmountAction.String() != "5.00" || acts[2].AmountAction.String() != "5.00" {
		t.Fatalf("actions %+v, want the charge and two payments of 5.00", acts)
	}
	moneyHolds(t, c)
}

// TestSIP2FeePaidOnce: a patron owing more than their group may is
// refused a check-out at the kiosk, and told so (64: the excessive fines
// flags, the fine counted and listed, the balance). Their 37 fee paid,
// sent twenty times at once over three connections to two door
// instances, pays once: every 38 the first's, dated when it paid; the
// database holds one payment. Under the maximum, the next check-out at
// the kiosk is lent at once. A payment in another currency, of a type
// not taken here, of more than is owed, or named by neither a
// transaction date nor a transaction id (BK) is refused and pays nothing.
func TestSIP2FeePaidOnce(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 2, FeatureOn: true})
	lib := setUpFees(t, c, 1, 3, facultyStandard(), lostPolicy(10, 5))
	c.Account(t, "user_id", "Kiosk", "One", schemas.RoleSelfCheck, "passw0rd")
	blockWith(t, c, lib.Library, schemas.ConditionFeeFineBalance, "Patron has outstanding fees/fines", 10, true, false, false)
	patron, items := lib.Patrons[0], lib.Items[0]
	checkOutOn(t, c, items[0], patron, "2020-01-01T12:00:00.000Z")
	checkInOn(t, c, items[0], harness.ServicePoint, "2020-01-25T12:00:00.000Z")
	fine := accountsOf(t, c, c.IDOf(t, "/users", "users", patron))[0]

	doors := []*harness.SIP2Door{c.StartSIP2(t, 0, nil), c.StartSIP2(t, 1, nil)}
	kiosks := []*harness.SIP2Client{harness.DialSIP2(t, doors[0].SIP2Addr), harness.DialSIP2(t, doors[0].SIP2Addr), harness.DialSIP2(t, doors[1].SIP2Addr)}
	for _, k := range kiosks {
		k.Login("user_id", "passw0rd")
	}
	k := kiosks[0]
	if got := k.Send(checkOutMsg(patron, items[1])); !strings.HasPrefix(got, "120") || !strings.Contains(got, "Patron has outstanding fees/fines") {
		t.Fatalf("a check-out owing 15.00 of at most 10.00: %q", got)
	}
	// What the kiosk is told: without the PIN the flags alone; with it
	// the fine counted, listed (63's fine items) and the balance.
	info := k.Send("63001" + harness.SIP2Date() + "   Y      AOdiku|AA" + patron + "|")
	if !strings.HasPrefix(info, "64YYYY      YY  ") || strings.Contains(info, "|AV") || strings.Contains(info, "|BV") {
		t.Fatalf("patron information without the PIN: %q", info)
	}
	c.Do(c.Storage, "POST", "/patron-pin", map[string]any{"id": fine.UserID, "pin": "4711"}).Want(t, http.StatusCreated)
	info = k.Send("63001" + harness.SIP2Date() + "   Y      AOdiku|AA" + patron + "|AD4711|")
	if counts := info[2+14+3+18 : 2+14+3+18+24]; counts != "000000000000000100000000" || harness.SIP2Field(info, "BV") != "15.00" ||
		harness.SIP2Field(info, "BH") != "USD" || harness.SIP2Field(info, "AV") != fine.ID+" 15.00 USD Overdue fine: Item "+items[0] {
		t.Fatalf("patron information with the PIN: %q", info)
	}

	// Refused, nothing paid: another currency, a type not taken, more
	// than is owed.
	for _, bad := range []string{"0100EURBV15.00", "0109USDBV15.00", "0100USDBV15.01"} {
		got := k.Send("37" + harness.SIP2Date() + bad + "|AOdiku|AA" + patron + "|BKbad-1|")
		if !strings.HasPrefix(got, "38N") {
			t.Fatalf("fee paid %s: %q, want refused", bad, got)
		}
	}
	// A payment that names itself by neither its date nor a transaction
	// id could not be told from itself sent again: refused, twice.
	for range 2 {
		got := k.Send("37" + strings.Repeat(" ", 18) + "0100USDBV5.00|AOdiku|AA" + patron + "|")
		if !strings.HasPrefix(got, "38N") || harness.SIP2Field(got, "AF") != "Please send the payment with its transaction date or a transaction id" {
			t.Fatalf("fee paid with a blank date and no BK: %q, want refused", got)
		}
	}
	if acts := actionsOf(t, c, fine.ID); len(acts) != 1 {
		t.Fatalf("refused payments left actions %+v, want the charge alone", acts)
	}

	// Twenty at once: one payment, one answer.
	payment := "37" + harness.SIP2Date() + "0100USDBV15.00|AOdiku|AA" + patron + "|BKkiosk-7-0001|"
	replies := make([][]string, len(kiosks))
	var wg sync.WaitGroup
	for i, k := range kiosks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := i; n < 20; n += len(kiosks) {
				replies[i] = append(replies[i], sequenced.ReplaceAllString(k.Send(payment), ""))
			}
		}()
	}
	wg.Wait()
	first := replies[0][0]
	if !strings.HasPrefix(first, "38Y") || harness.SIP2Field(first, "BK") != "kiosk-7-0001" || harness.SIP2Field(first, "AF") != "Paid 15.00 USD; 0.00 USD remains" {
		t.Fatalf("the payment: %q", first)
	}
	sent := 0
	for _, rs := range replies {
		for _, r := range rs {
			sent++
			if r != first {
				t.Fatalf("a payment sent again answered %q, want the first %q", r, first)
			}
		}
	}
	acts := actionsOf(t, c, fine.ID)
	if sent != 20 || len(acts) != 2 || acts[1].TypeAction != schemas.ActionPay.Full() || acts[1].AmountAction.String() != "15.00" ||
		acts[1].PaymentMethod != "Cash" {
		t.Fatalf("%d payments sent: actions %+v, want the charge and one payment of 15.00 in cash", sent, acts)
	}
	moneyHolds(t, c)

	// Under the maximum: lent at once, at the kiosk.
	if got := kiosks[2].Send(checkOutMsg(patron, items[1])); !strings.HasPrefix(got, "121") {
		t.Fatalf("a check-out after paying: %q", got)
	}
	if got := k.Send("23001" + harness.SIP2Date() + "AOdiku|AA" + patron + "|"); !strings.HasPrefix(got, "24              ") {
		t.Fatalf("patron status after paying: %q", got)
	}
}
