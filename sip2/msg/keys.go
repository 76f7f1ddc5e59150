package msg

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// A kiosk that sends a transaction again (its reply lost, its connection
// gone, to this door or another) sends the same message: the same code,
// transaction date, institution, patron and item, and, with error
// detection, the same sequence number (AY). Each write message's Key is
// made from those alone, so the transaction sent again carries the same
// Idempotency-Key to circulation, which answers it as it answered it
// first and writes it once; two transactions within one second (a
// transaction date's resolution) differ by their sequence numbers. A
// message whose transaction date is blank has no key: nothing tells its
// sending again from a new transaction (a payment without one is refused,
// unless BK names it).

// transactionKey is the key of a transaction: date its transaction date,
// the rest what names it; "" for a blank date.
func transactionKey(code, date, seq string, parts ...string) string {
	if strings.TrimSpace(date) == "" {
		return ""
	}
	return key(append([]string{"sip2", code, date, seq}, parts...)...)
}

// key is the Idempotency-Key made of parts.
func key(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return "sip2-" + hex.EncodeToString(h.Sum(nil))
}

// Key is the check-out's Idempotency-Key as a live one.
func (m CheckOut) Key() string {
	nb := "N"
	if m.NoBlock {
		nb = "Y"
	}
	return transactionKey("11", m.TransactionDate, m.seq, nb, m.Institution, m.Patron, m.Item)
}

// OfflineKey is the Idempotency-Key of a no-block check-out sent as made
// offline: another than Key, which the same transaction carries when it
// is made a live one (storage saw the kiosk on line then), so that
// whichever way it is sent again, each call meets its own write.
func (m CheckOut) OfflineKey() string {
	return transactionKey("11", m.TransactionDate, m.seq, "offline", m.Institution, m.Patron, m.Item)
}

// Key is the renewal's Idempotency-Key.
func (m Renew) Key() string {
	return transactionKey("29", m.TransactionDate, m.seq, m.Institution, m.Patron, m.Item)
}

// Key is the check-in's Idempotency-Key.
func (m CheckIn) Key() string {
	return transactionKey("09", m.TransactionDate, m.seq, m.ReturnDate, m.Institution, m.Item)
}

// Key is the Idempotency-Key of the renew all's renewal of item.
func (m RenewAll) Key(item string) string {
	return transactionKey("65", m.TransactionDate, m.seq, m.Institution, m.Patron, item)
}

// Key is the payment of machine's Idempotency-Key. A kiosk that names
// its transaction (BK) is paid once per transaction id, whatever date
// and sequence number it sends it with again; the id is the machine's
// own (machine, the location code it gave at login, is in the key, and
// circulation makes the write's id for the kiosk's account), so two
// machines' ids never meet, though they share an account and number
// their transactions alike. One that names none is paid once, as any
// other transaction is, by its date.
func (m FeePaid) Key(machine string) string {
	id := strings.TrimSpace(m.TransactionID)
	switch {
	case id != "" && machine != "":
		return key("sip2", "37", "BK", machine, m.Institution, m.Patron, id)
	case id != "":
		// A machine that gave no location code: the key doors of the
		// release before made, so that a payment sent again across an
		// upgrade of its door is the same payment.
		return key("sip2", "37", "BK", m.Institution, m.Patron, id)
	}
	return transactionKey("37", m.TransactionDate, m.seq, m.Institution, m.Patron, m.FeeID, m.Amount, m.PaymentType, m.Currency)
}
