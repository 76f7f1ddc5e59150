package msg

import (
	"testing"

	"github.com/checkoutlock/sip2/wire"
)

// sealed is message s with error detection: its sequence number and its
// checksum.
func sealed(s, seq string) string {
	s += "AY" + seq + "AZ"
	return s + wire.Checksum([]byte(s))
}

// TestATransactionSentAgainHasItsKey: a write message sent again as it
// was has the key it had; another transaction has another, also within
// the same second (its sequence number tells them apart); a message
// whose transaction date is blank has none.
func TestATransactionSentAgainHasItsKey(t *testing.T) {
	t.Parallel()
	const date = "20260305    120000"
	checkOut := func(line string) string {
		m, err := ReadCheckOut(parse(t, line))
		if err != nil {
			t.Fatal(err)
		}
		return m.Key()
	}
	first := checkOut(sealed("11YN"+date+date+"AOdiku|AA1001|ABbook-1|AC|", "1"))
	if first == "" || checkOut(sealed("11YN"+date+date+"AOdiku|AA1001|ABbook-1|AC|", "1")) != first {
		t.Errorf("a check-out sent again as it was: key %q, then another", first)
	}
	for name, other := range map[string]string{
		"another sequence number": sealed("11YN"+date+date+"AOdiku|AA1001|ABbook-1|AC|", "2"),
		"another item":            sealed("11YN"+date+date+"AOdiku|AA1001|ABbook-2|AC|", "1"),
		"another patron":          sealed("11YN"+date+date+"AOdiku|AA1002|ABbook-1|AC|", "1"),
		"no block":                sealed("11YY"+date+date+"AOdiku|AA1001|ABbook-1|AC|", "1"),
		"another second":          sealed("11YN20260305    120001"+date+"AOdiku|AA1001|ABbook-1|AC|", "1"),
	} {
		if k := checkOut(other); k == first || k == "" {
			t.Errorf("%s: key %q, want one of its own", name, k)
		}
	}
	if k := checkOut("11YN" + "                  " + date + "AOdiku|AA1001|ABbook-1|AC|"); k != "" {
		t.Errorf("a blank transaction date: key %q, want none", k)
	}
	in, err := ReadCheckIn(parse(t, sealed("09N"+date+date+"APdesk|AOdiku|ABbook-1|AC|", "3")))
	if err != nil {
		t.Fatal(err)
	}
	renew, err := ReadRenew(parse(t, sealed("29NN"+date+date+"AOdiku|AA1001|ABbook-1|", "3")))
	if err != nil {
		t.Fatal(err)
	}
	all, err := ReadRenewAll(parse(t, sealed("65"+date+"AOdiku|AA1001|", "3")))
	if err != nil {
		t.Fatal(err)
	}
	noBlock, err := ReadCheckOut(parse(t, sealed("11YY"+date+date+"AOdiku|AA1001|ABbook-1|AC|", "1")))
	if err != nil {
		t.Fatal(err)
	}
	// A no-block check-out sent as made offline, and made a live one.
	if again, _ := ReadCheckOut(parse(t, sealed("11YY"+date+date+"AOdiku|AA1001|ABbook-1|AC|", "1"))); noBlock.OfflineKey() != again.OfflineKey() {
		t.Errorf("a no-block check-out sent again: offline key %q, then %q", noBlock.OfflineKey(), again.OfflineKey())
	}
	keys := map[string]string{"11": first, "11 no block": noBlock.Key(), "11 offline": noBlock.OfflineKey(), "09": in.Key(), "29": renew.Key(),
		"65 book-1": all.Key("book-1"), "65 book-2": all.Key("book-2")}
	seen := map[string]string{}
	for name, k := range keys {
		if k == "" || seen[k] != "" {
			t.Errorf("%s: key %q (also %s's)", name, k, seen[k])
		}
		seen[k] = name
	}
}
