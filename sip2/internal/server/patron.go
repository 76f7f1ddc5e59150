// What a kiosk asks of a patron and of an item (63 patron information,
// 23 patron status, 17 item information), and the PIN a patron gives,
// checked and counted before anything is shown or done.

package server

import (
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/sip2/internal/circ"
	"github.com/checkoutlock/sip2/msg"
	"github.com/checkoutlock/sip2/wire"
)

// patron is 23 → 24 (patron status) and 63 → 64 (patron information):
// whether the patron may borrow, and why not in FOLIO's words; for 63 the
// counts of items out and overdue, the item limit (CB) and, as the
// request's summary asks, the charged (AU) and overdue (AT) items.
func (c *conn) patron(s *circ.Session, req *wire.Request) (*wire.Reply, string) {
	m, err := msg.ReadPatron(req)
	if err != nil {
		return c.malformed(req, err)
	}
	code := "24"
	if m.Information {
		code = "64"
	}
	reply := func(status msg.PatronStatus, counts msg.Counts, name string, valid bool, message string) msg.PatronResponse {
		return msg.PatronResponse{Code: code, Status: status, Date: c.now(), Counts: counts, Institution: c.cfg.Institution,
			Patron: m.Patron, Name: name, Valid: valid, Message: message}
	}
	if m.Patron == "" {
		return reply(msg.Denied, msg.Counts{}, "", false, msgBarcodes).Reply(), "refused"
	}
	ctx, cancel := c.call()
	defer cancel()
	// The patron's name and loans come only with their PIN (AD), which
	// circulation checks with the summary; CQ says whether it was right.
	// Where PINs are required, a patron without theirs is told nothing
	// more; elsewhere, the verdict and the counts.
	pin := m.PatronPassword
	pinChecked := pin != "" || c.cfg.PatronPin == PinRequired
	refused := func(message, outcome string) (*wire.Reply, string) {
		r := reply(msg.Denied, msg.Counts{}, "", true, message)
		r.PasswordChecked = true
		return r.Reply(), outcome
	}
	if pin == "" && c.cfg.PatronPin == PinRequired {
		return refused(msgPinNeeded, "pin_needed")
	}
	sum, err := c.s.circ.PatronSummary(ctx, s, m.Patron, pin)
	var ref *circ.Refusal
	pinOutcome := ""
	if message, outcome, ok := pinRefused(err); ok {
		if c.cfg.PatronPin == PinRequired {
			return refused(message, outcome)
		}
		// PINs are not required here: the verdict, without the PIN.
		pinOutcome = outcome
		sum, err = c.s.circ.PatronSummary(ctx, s, m.Patron, "")
	}
	switch {
	case errors.As(err, &ref) && ref.Status == http.StatusNotFound:
		return reply(msg.Denied, msg.Counts{}, "", false, ref.Message).Reply(), "refused"
	case errors.As(err, &ref) && ref.Code == schemas.CodeTooManyRequests:
		return reply(msg.Denied, msg.Counts{}, "", true, msgBusy).Reply(), "rate_limited"
	case errors.As(err, &ref) && ref.Status/100 == 4 && !ref.Busy():
		// Circulation refused the request itself: its reason, not "busy".
		return reply(msg.Denied, msg.Counts{}, "", false, screenMessage(ref)).Reply(), "refused"
	case err != nil:
		if !errors.As(err, &ref) {
			c.log.Error("patron summary: circulation did not answer", slog.Any("error", err))
		}
		return reply(msg.Denied, msg.Counts{}, "", false, msgBusy).Reply(), busyOutcome(err)
	}
	denied := !sum.CanBorrow
	status := msg.PatronStatus{ChargeDenied: denied, RenewalDenied: denied, RecallDenied: denied, HoldDenied: denied,
		// Too many items charged: at every limit that applies.
		TooManyCharged: sum.AtItemLimit,
		// Owing more than the group may (FOLIO's one balance of fees and
		// fines): both flags.
		ExcessiveFines: sum.ExcessiveFees, ExcessiveFees: sum.ExcessiveFees}
	var reasons []string
	for _, r := range sum.Reasons {
		if r.PatronMessage != "" {
			reasons = append(reasons, r.Message+": "+r.PatronMessage)
			continue
		}
		reasons = append(reasons, r.Message)
	}
	// The patron may borrow, but not every kind of item: the limits
	// reached, named as a check-out would refuse at them.
	groupLimit := 0
	for _, l := range sum.ItemLimits {
		if l.Reached && sum.CanBorrow {
			reasons = append(reasons, l.Message)
		}
		if l.AllLoans {
			groupLimit = l.ItemLimit
		}
	}
	name := strings.TrimSpace(sum.Patron.FirstName + " " + sum.Patron.LastName)
	r := reply(status, msg.Counts{Overdue: sum.OverdueCount, Charged: sum.OpenLoanCount, Fine: sum.FeeFineCount}, name, true, strings.Join(reasons, "; "))
	r.PasswordChecked, r.PasswordValid = pinChecked, pin != "" && sum.View == "full"
	// What the patron owes, in the full view only (with their PIN).
	r.FeeAmount, r.Currency = sum.FeeFineBalance, sum.Currency
	if m.Information {
		// CB is the limit on all the patron's loans (their group's), when
		// there is one; limits by material or loan type are not one count.
		r.ChargedLimit = groupLimit
		var charged, overdue []string
		for _, l := range sum.OpenLoans {
			charged = append(charged, l.ItemBarcode)
			// Overdue as storage judged it, by the database's clock, as
			// its count (the door's clock is not asked).
			if l.Overdue {
				overdue = append(overdue, l.ItemBarcode)
			}
		}
		// The list the summary asks for, from item BP to item BQ.
		switch {
		case m.Summary.Charged:
			r.Charged = msg.Window(charged, m.Start, m.End)
		case m.Summary.Overdue:
			r.Overdue = msg.Window(overdue, m.Start, m.End)
		case m.Summary.Fine:
			// Each fee/fine: its id (a 37's CG), what remains of it, what
			// it is and for what.
			var fines []string
			for _, f := range sum.FeesFines {
				line := f.ID + " " + f.Remaining + " " + sum.Currency + " " + f.FeeFineType
				if f.Title != "" {
					line += ": " + f.Title
				}
				fines = append(fines, line)
			}
			r.FineItems = msg.Window(fines, m.Start, m.End)
		}
	}
	if pinOutcome != "" {
		return r.Reply(), pinOutcome
	}
	return r.Reply(), "ok"
}

// Screen messages about PINs.
const (
	msgPinNeeded = "Please enter your PIN"
	msgPinWrong  = "Wrong PIN"
	msgPinLocked = "Too many wrong PINs: please try again later or ask at the desk"
)

// pinRefused is circulation's refusal of a patron's PIN as a kiosk is
// told it, with the outcome to log (the PIN itself never is): missing
// where the tenant requires it, wrong, or locked after too many wrong
// ones; ok false for any other answer.
func pinRefused(err error) (message, outcome string, ok bool) {
	var ref *circ.Refusal
	if !errors.As(err, &ref) {
		return "", "", false
	}
	switch ref.Code {
	case schemas.CodePinRequired:
		return msgPinNeeded, "pin_needed", true
	case schemas.CodePinInvalid:
		return msgPinWrong, "pin_wrong", true
	case schemas.CodePinLocked:
		return msgPinLocked, "pin_locked", true
	}
	return "", "", false
}

// item is 17 → 18 (item information): the item's circulation status as
// SIP2 names FOLIO's statuses, its title and, on loan, its due date.
func (c *conn) item(s *circ.Session, req *wire.Request) (*wire.Reply, string) {
	m, err := msg.ReadItem(req)
	if err != nil {
		return c.malformed(req, err)
	}
	reply := func(status, title string, due time.Time, message string) *wire.Reply {
		if !due.IsZero() {
			due = due.In(c.cfg.location)
		}
		return msg.ItemResponse{Status: status, Date: c.now(), Item: m.Item, Title: title, Due: due, Message: message}.Reply()
	}
	if m.Item == "" {
		return reply("01", "", time.Time{}, msgBarcodes), "refused"
	}
	ctx, cancel := c.call()
	defer cancel()
	sum, err := c.s.circ.ItemSummary(ctx, s, m.Item)
	var ref *circ.Refusal
	switch {
	case errors.As(err, &ref) && ref.Status == http.StatusNotFound:
		return reply("01", "", time.Time{}, "No item with barcode "+m.Item+" could be found"), "refused"
	case errors.As(err, &ref) && ref.Status/100 == 4 && !ref.Busy():
		// Circulation refused the request itself: its reason, not "busy".
		return reply("01", "", time.Time{}, screenMessage(ref)), "refused"
	case err != nil:
		if !errors.As(err, &ref) {
			c.log.Error("item summary: circulation did not answer", slog.Any("error", err))
		}
		return reply("01", "", time.Time{}, msgBusy), busyOutcome(err)
	}
	return reply(msg.CirculationStatus(sum.Status), sum.Title, sum.DueDate, ""), "ok"
}
