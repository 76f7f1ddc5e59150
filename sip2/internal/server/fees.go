// What a kiosk does with a patron's money: 37 fee paid.

package server

import (
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/checkoutlock/sip2/internal/circ"
	"github.com/checkoutlock/sip2/msg"
	"github.com/checkoutlock/sip2/wire"
)

// Screen messages about payments.
const (
	msgFeeNeeded    = "Please give the patron's barcode and the amount paid"
	msgPaymentType  = "This kind of payment is not taken here"
	msgCurrencyPref = "Payments here are in "
	msgPaymentKey   = "Please send the payment with its transaction date or a transaction id"
)

// feePaid is 37 → 38 (fee paid): the patron's payment of BV, of the
// fee/fine CG or, without one, of their open fees/fines oldest first, in
// the listener's currency, recorded as the payment method its payment
// type names. Paid once per kiosk account and transaction id (BK; a
// kiosk that names none, per transaction date and sequence number): the
// same 37 sent again, on any connection or door, is answered the first
// 38, dated when the payment was made, and pays nothing more. A 37 that
// names neither (a blank transaction date, no BK) is refused. More than
// is owed is refused, as is a currency or a payment type not taken here.
func (c *conn) feePaid(s *circ.Session, req *wire.Request) (*wire.Reply, string) {
	m, err := msg.ReadFeePaid(req)
	if err != nil {
		return c.malformed(req, err)
	}
	reply := func(ok bool, at time.Time, message string) *wire.Reply {
		return msg.FeePaidResponse{Accepted: ok, Date: at, Institution: c.cfg.Institution, Patron: m.Patron,
			TransactionID: m.TransactionID, Message: message}.Reply()
	}
	amount := strings.TrimSpace(m.Amount)
	if m.Patron == "" || amount == "" {
		return reply(false, c.now(), msgFeeNeeded), "refused"
	}
	if m.Key(s.Location) == "" {
		// Neither a transaction date nor a transaction id: nothing would
		// tell this payment sent again from a new one, and money is paid
		// once.
		return reply(false, c.now(), msgPaymentKey), "refused"
	}
	method, ok := c.cfg.PaymentMethods[m.PaymentType]
	if !ok {
		return reply(false, c.now(), msgPaymentType), "refused"
	}
	if c.cfg.PatronPin == PinRequired && (!m.Has("AD") || m.PatronPassword == "") {
		return reply(false, c.now(), msgPinNeeded), "pin_needed"
	}
	ctx, cancel := c.call()
	defer cancel()
	// The tenant's currency, as its locale settings name it: a payment
	// in another is refused (a blank currency is taken as the tenant's).
	settings, err := c.s.circ.SelfCheckSettings(ctx, s)
	if err != nil {
		return c.feeNotPaid(err, reply)
	}
	currency := settings.Currency
	if sent := strings.TrimSpace(m.Currency); sent != "" && sent != currency {
		return reply(false, c.now(), msgCurrencyPref+currency), "refused"
	}
	p, err := c.s.circ.PayFees(ctx, s, m.Patron, m.PatronPassword, amount, method, c.cfg.ServicePointID, strings.ToLower(m.FeeID),
		m.TransactionID, m.Key(s.Location))
	if err == nil {
		at := c.now()
		if !p.PaidAt.IsZero() {
			at = p.PaidAt.In(c.cfg.location)
		}
		return reply(true, at, "Paid "+p.Amount+" "+currency+"; "+p.Remaining+" "+currency+" remains"), "ok"
	}
	return c.feeNotPaid(err, reply)
}

// feeNotPaid is the 38 of a payment circulation did not take: its
// refusal's words, or busy.
func (c *conn) feeNotPaid(err error, reply func(ok bool, at time.Time, message string) *wire.Reply) (*wire.Reply, string) {
	if message, outcome, ok := pinRefused(err); ok {
		return reply(false, c.now(), message), outcome
	}
	var ref *circ.Refusal
	if errors.As(err, &ref) && ref.Status/100 == 4 && !ref.Busy() {
		return reply(false, c.now(), screenMessage(ref)), "refused"
	}
	if !errors.As(err, &ref) {
		c.log.Error("fee paid: circulation did not answer", slog.Any("error", err))
	}
	return reply(false, c.now(), msgBusy), busyOutcome(err)
}
