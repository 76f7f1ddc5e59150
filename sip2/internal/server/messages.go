package server

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/selfcheck"
	"github.com/checkoutlock/serverkit/tracing"
	"github.com/checkoutlock/sip2/internal/circ"
	"github.com/checkoutlock/sip2/msg"
	"github.com/checkoutlock/sip2/wire"
)

// implemented is what the door answers, by request code.
var implemented = map[string]bool{"11": true, "09": true, "99": true, "97": true, "93": true, "35": true,
	"23": true, "63": true, "17": true, "29": true, "65": true, "37": true}

// Supported is the status reply's BX: exactly what is implemented.
var Supported = msg.Supported(func(code string) bool { return implemented[code] })

// Screen messages (AF).
const (
	msgBusy = "System busy, please try again"
	// msgReturnedBeforeLoan: a check-in dated before the item was lent
	// again closed nothing.
	msgReturnedBeforeLoan = "Returned while it was already back: recorded for the desk"
	// msgOfflineTooOld refuses a transaction made offline longer ago than
	// the door takes (SIP2_OFFLINE_WITHIN).
	msgOfflineTooOld = "This offline transaction is too old to record here: please see the desk"
	msgLogInFirst    = "Please log in first"
	// msgCancelUnsupported refuses an 11 that cancels a check-in.
	msgCancelUnsupported = "A cancel cannot be done here: please see the desk"
	// msgRecordedOffline answers a check-out made offline, recorded.
	msgRecordedOffline = "Recorded: lent while offline"
	msgMalformed       = "The message's fixed fields are malformed"
	msgUnsupported     = "This request is not supported here"
	msgBarcodes        = "Scan the patron's card and the item"
	msgCheckedIn       = "Item checked in"
	// A check-in whose item a request waits for: on the hold shelf here,
	// or in transit to the request's pickup point.
	msgHoldHere      = "Item checked in: put it on the hold shelf"
	msgHoldElsewhere = "Item checked in: send it on in transit"
)

// resendReply is 96 (request the message again), with error detection:
// exactly "96AZFEF6".
var resendReply = []byte("96AZFEF6\r")

// handle answers one message and says whether the connection goes on
// (not after three bad messages in a row).
func (c *conn) handle(line []byte) bool {
	started := time.Now()
	c.mu.Lock()
	c.last, c.messages = started, c.messages+1
	c.mu.Unlock()
	req, err := wire.Parse(line, c.cfg.Charset, c.cfg.delimiter())
	// Each message a span, while tracing is on: circulation's request, and
	// everything under it, continue it.
	ctx, span := tracing.Tracer().Start(c.s.calls, "SIP2 "+messageCode(req), trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("sip2.tenant", c.cfg.Tenant), attribute.String("client.address", c.peer)))
	c.msgCtx = ctx
	defer func() {
		c.msgCtx = nil
		span.End()
	}()
	var reply []byte
	var outcome string
	var item string
	switch {
	case errors.Is(err, wire.ErrChecksum):
		reply, outcome = resendReply, "checksum"
		c.bad++
	case err == nil && req.Code == "97":
		reply, outcome = c.lastReply, "resent"
		if reply == nil {
			reply = resendReply
		}
	case err == nil && req.Checked && req.Code != "99" && c.lastReply != nil && bytes.Equal(line, c.lastRaw):
		// The kiosk lost the reply and sent the same message again, with
		// the same sequence number: the reply again, nothing done twice.
		// Not a 99's: it carries no transaction date, so the same bytes
		// are as often a new question (a kiosk whose sequence number
		// stands still) as one sent again, and answering it does nothing.
		reply, outcome = c.lastReply, "replayed"
	case err != nil:
		c.bad++
		outcome = "malformed"
		if r, ok := c.refusal(req.Code, msgMalformed); ok {
			reply = c.encode(req, r)
		} else {
			reply = resendReply
		}
	default:
		var r *wire.Reply
		r, outcome = c.dispatch(req)
		if outcome == "malformed" {
			c.bad++
		} else {
			c.bad = 0
		}
		item, _ = req.Get("AB")
		reply = c.encode(req, r)
		if r.Code != "96" {
			// A 97 is answered the last reply but a 96.
			c.lastRaw, c.lastReply = append(c.lastRaw[:0], line...), reply
		}
	}
	if outcome == "busy" || outcome == "error" {
		// The library system did not answer the kiosk (busyOutcome): it
		// may go off line, and what it makes meanwhile is made offline.
		c.s.ready.down(started)
	} else if s := c.sessionOf(); s != nil && !s.Ended() {
		// Heard from, signed in, and the library system answering it.
		c.seen(s, false)
	}
	werr := c.write(reply)
	code := messageCode(req)
	span.SetAttributes(attribute.String("sip2.outcome", outcome))
	c.mu.Lock()
	c.lastCode = code
	if refusal[outcome] {
		c.refusals++
	}
	c.mu.Unlock()
	elapsed := time.Since(started)
	c.s.metrics.messages.WithLabelValues(code, outcome).Inc()
	c.s.metrics.duration.WithLabelValues(code).Observe(elapsed.Seconds())
	attrs := []any{slog.String("message", code), slog.String("outcome", outcome),
		slog.Float64("duration_ms", float64(elapsed.Microseconds())/1000)}
	if s := c.sessionOf(); s != nil {
		attrs = append(attrs, slog.String("kiosk", s.Username))
	}
	if item != "" {
		attrs = append(attrs, slog.String("item", item))
	}
	if werr != nil {
		attrs = append(attrs, slog.String("write_error", werr.Error()))
	}
	if sc := span.SpanContext(); sc.IsValid() {
		attrs = append(attrs, slog.String("trace_id", sc.TraceID().String()))
	}
	c.log.Info("sip2", attrs...)
	return c.bad < 3 && werr == nil
}

// refusal are the outcomes of a message the library said no to: a
// refusal in FOLIO's words, a sign-in locked, a PIN needed, wrong or
// locked, a rate reached, a request before the kiosk's login. The
// kiosks' day counts them.
var refusal = map[string]bool{"refused": true, "locked": true, "pin_needed": true, "pin_wrong": true, "pin_locked": true,
	"rate_limited": true, "not_logged_in": true}

// busyOutcome is the outcome of a kiosk told "System busy" for err:
// "patron_busy" when circulation answered for the patron alone (their
// lock held by another check-out past the wait, their PIN's turn not
// come: a 4xx), which marks nothing; "busy" when the library system did
// not answer or could not serve (no answer, a 503, another 5xx), which
// marks it down for the door (handle), so that a kiosk may go off line.
func busyOutcome(err error) string {
	var ref *circ.Refusal
	if errors.As(err, &ref) && ref.Busy() && ref.Status/100 == 4 {
		return "patron_busy"
	}
	return "busy"
}

// messageCode is req's command code as the metrics and spans name it:
// "unknown" for a message not parsed or of a code SIP2 does not have.
func messageCode(req *wire.Request) string {
	if req != nil && knownCode[req.Code] {
		return req.Code
	}
	return "unknown"
}

// encode writes a reply in the listener's character set and delimiter,
// with error detection when the request had it.
func (c *conn) encode(req *wire.Request, r *wire.Reply) []byte {
	b, err := r.Encode(c.cfg.Charset, c.cfg.delimiter(), req.Checked, req.Seq)
	if err != nil {
		// The charset was checked when the configuration was read.
		panic(err)
	}
	return b
}

// dispatch answers a well-formed message: before a login only 93, 99 and
// 97 (handled before); a request the door does not implement, or whose
// fixed fields are malformed, gets its refusal.
func (c *conn) dispatch(req *wire.Request) (*wire.Reply, string) {
	if req.Code == "93" {
		return c.login(req)
	}
	if req.Code == "99" {
		if _, err := msg.ReadSCStatus(req); err != nil {
			return c.status(msgMalformed), "malformed"
		}
		return c.status(""), "ok"
	}
	if _, request := c.refusal(req.Code, ""); !request {
		// A response code, or 96: nothing to answer but "again".
		return &wire.Reply{Code: "96"}, "unexpected"
	}
	s := c.sessionOf()
	if s == nil {
		return c.refuse(req, msgLogInFirst), "not_logged_in"
	}
	switch req.Code {
	case "11":
		return c.checkOut(s, req)
	case "09":
		return c.checkIn(s, req)
	case "23", "63":
		return c.patron(s, req)
	case "17":
		return c.item(s, req)
	case "29":
		return c.renew(s, req)
	case "65":
		return c.renewAll(s, req)
	case "37":
		return c.feePaid(s, req)
	case "35":
		m, err := msg.ReadEndSession(req)
		if err != nil {
			return c.malformed(req, err)
		}
		return msg.EndSessionResponse{End: true, Date: c.now(), Institution: c.cfg.Institution, Patron: m.Patron}.Reply(), "ok"
	}
	return c.refuse(req, msgUnsupported), "unsupported"
}

// refusal is the request's own negative reply, with a screen message; ok
// is false for a code that is not a request.
func (c *conn) refusal(code, message string) (*wire.Reply, bool) {
	if code == "99" {
		return c.status(message), true
	}
	return msg.Refusal(code, c.now(), c.cfg.Institution, message)
}

// malformed answers a request whose fixed fields, or a variable field it
// reads as a number, are not SIP2's: the field named when it is one.
func (c *conn) malformed(req *wire.Request, err error) (*wire.Reply, string) {
	message := msgMalformed
	if fe, ok := errors.AsType[*msg.FieldError](err); ok {
		message = "The message's " + fe.ID + " field is not " + fe.Want
	}
	return c.refuse(req, message), "malformed"
}

// refuse is the negative reply to a request the door read but does not
// carry out: the patron and the item it named (AA, AB) echoed.
func (c *conn) refuse(req *wire.Request, message string) *wire.Reply {
	r, _ := c.refusal(req.Code, message)
	return r.Echo(req, "AA", "AB")
}

// now is the time replies are dated with, in the listener's zone.
func (c *conn) now() time.Time { return time.Now().In(c.cfg.location) }

// call is the deadline of a message's calls to circulation, or of a
// logout: SIP2_CALL_TIMEOUT, cut short when a shutdown runs out of time.
func (c *conn) call() (context.Context, context.CancelFunc) {
	parent := c.s.calls
	if c.msgCtx != nil {
		parent = c.msgCtx
	}
	return context.WithTimeout(parent, c.s.opts.CallTimeout)
}

// login is 93: the kiosk's account, checked once for the connection.
// The door counts nothing itself: circulation's login (storage's) counts
// every attempt before it checks the password, by account and kiosk
// address, which the door names; guesses from one kiosk lock that kiosk
// out, never the shared account at the others. Kiosks behind one address
// logging in together all get in, each in its turn: while their turns
// have not come, circulation answers busy and the door asks again
// (circ.Client's do), within the call's time.
func (c *conn) login(req *wire.Request) (*wire.Reply, string) {
	m, err := msg.ReadLogin(req)
	user := m.User
	fail := msg.LoginResponse{OK: false}.Reply()
	if err != nil {
		return fail, "malformed"
	}
	if m.User == "" || m.Password == "" {
		return fail, "refused"
	}
	ctx, cancel := c.call()
	defer cancel()
	s, err := c.s.circ.Login(ctx, c.cfg.Tenant, m.User, m.Password, c.peer, m.Location)
	switch {
	case err == nil:
		c.mu.Lock()
		before := c.session
		c.session, c.loginAt, c.location = s, time.Now(), s.Location
		c.mu.Unlock()
		c.seen(s, true)
		// A second login on the connection: the session it replaces ends.
		c.endSession(before)
		return msg.LoginResponse{OK: true}.Reply(), "ok"
	case errors.Is(err, circ.ErrLoginBusy):
		// Circulation answered: the account's turn did not come while
		// others from its place were checked. Not the library system
		// failing to answer, which lets kiosks' no-block check-outs be
		// taken as made offline (handle), and no "System busy" told.
		return fail, "login_busy"
	}
	// Refused a login (a verdict on the account, not a turn that did not
	// come): a session the connection had ends with it, and the kiosk is
	// logged in as no one, rather than as whom it was before.
	var outcome string
	switch {
	case errors.Is(err, circ.ErrLoginLocked):
		outcome = "locked"
	case errors.Is(err, circ.ErrLoginFailed):
		outcome = "refused"
	case errors.Is(err, circ.ErrTooMuch):
		c.log.Warn("a kiosk account holds more than the self-check role: refused", slog.String("kiosk", user))
		outcome = "too_much"
	}
	if outcome != "" {
		c.mu.Lock()
		before := c.session
		c.session = nil
		c.mu.Unlock()
		c.endSession(before)
		return fail, outcome
	}
	c.log.Error("login: circulation did not answer", slog.Any("error", err))
	return fail, "error"
}

// status is 98: whether the library system is on line, and with it
// check-out, check-in and renewals allowed (circulation's readiness, as
// the door last asked it: online.go); whether the kiosk may lend offline
// (its library's offlineLending, online.go); the timeout a kiosk should wait (a
// second more than the door waits for circulation); what is supported.
func (c *conn) status(message string) *wire.Reply {
	timeout := min((c.s.opts.CallTimeout+time.Second)/(100*time.Millisecond), 999)
	ctx, cancel := context.WithTimeout(c.s.calls, readinessTimeout)
	defer cancel()
	online := c.s.ready.online(ctx)
	var ask func(context.Context) (bool, error)
	if s := c.sessionOf(); s != nil && online {
		ask = func(ctx context.Context) (bool, error) {
			settings, err := c.s.circ.SelfCheckSettings(ctx, s)
			return settings.OfflineLending != selfcheck.OfflineOff, err
		}
	}
	offline := c.s.offline.taken(ctx, c.cfg.Tenant, ask)
	return msg.ACSStatus{Online: online, CheckIn: online, CheckOut: online, RenewalPolicy: online, Offline: offline,
		Timeout: int(timeout), Retries: 3,
		Date: c.now(), Institution: c.cfg.Institution, Supported: Supported, Message: message}.Reply()
}

// checkOut is 11 → 12, through circulation's check-out: under the
// patron's lock, the item limit and the kiosk's permissions.
func (c *conn) checkOut(s *circ.Session, req *wire.Request) (*wire.Reply, string) {
	m, err := msg.ReadCheckOut(req)
	if err != nil {
		return c.malformed(req, err)
	}
	reply := func(ok bool, due time.Time, title, message string) *wire.Reply {
		return msg.CheckOutResponse{OK: ok, Date: c.now(), Institution: c.cfg.Institution, Patron: m.Patron, Item: m.Item,
			Title: title, Due: due.In(c.cfg.location), Message: message}.Reply()
	}
	if m.Patron == "" || m.Item == "" {
		return reply(false, time.Time{}, "", msgBarcodes), "refused"
	}
	if m.Cancel {
		// SIP2's undoing of a check-in that did not complete at the
		// kiosk: the desk's to judge; nothing is lent for it.
		c.log.Warn("a kiosk asked to cancel a check-in (11 with cancel): refused, for the desk",
			slog.String("patron", m.Patron), slog.String("item", m.Item))
		return reply(false, time.Time{}, "", msgCancelUnsupported), "refused"
	}
	ctx, cancel := c.call()
	defer cancel()
	pinChecked := false
	if m.NoBlock {
		at := c.returnedAt(m.TransactionDate)
		if !c.onLineAt(at) {
			r, outcome, live := c.checkOutOffline(ctx, s, m, at, reply)
			if !live {
				return r, outcome
			}
			// A PIN sent with it was checked, and was right, before
			// storage said the kiosk was on line.
			pinChecked = m.Has("AD") && m.PatronPassword != ""
		}
		// Marked offline, but made while a door saw the kiosk on line
		// (this one, or, storage says, any): a live check-out, judged by
		// every rule and the PIN.
		c.log.Warn("a check-out marked offline (no block) was made while the kiosk was on line: judged as a live one",
			slog.String("item", m.Item), slog.Time("at", at))
	}
	// Where the listener requires PINs, the patron's goes with the
	// check-out, and circulation checks it against the patron before any
	// refusal: a check-out sent again with its key is checked against the
	// patron it lent to, whoever the barcode names by then.
	pin := ""
	if c.cfg.PatronPin == PinRequired && !pinChecked {
		if !m.Has("AD") || m.PatronPassword == "" {
			return reply(false, time.Time{}, "", msgPinNeeded), "pin_needed"
		}
		pin = m.PatronPassword
	}
	loan, err := c.s.circ.CheckOut(ctx, s, m.Item, m.Patron, c.cfg.ServicePointID, pin, m.Key())
	if err == nil {
		if m.NoBlock && strings.TrimSpace(m.NoBlockDueDate) != "" {
			// Marked offline, lent live: the loan is due as its policy
			// says, and the patron may have been shown another date.
			c.log.Warn("a check-out marked offline was lent as a live one: due as the loan policy says, not at its nb due date, for the desk",
				slog.String("patron", m.Patron), slog.String("item", m.Item),
				slog.String("nb_due_date", m.NoBlockDueDate), slog.Time("due", loan.DueDate))
		}
		return reply(true, loan.DueDate, loan.Title, ""), "ok"
	}
	if message, outcome, ok := pinRefused(err); ok {
		return reply(false, time.Time{}, "", message), outcome
	}
	return c.notCheckedOut(err, "check-out", "", reply, func(message, _ string) (*wire.Reply, string) {
		return reply(false, time.Time{}, "", message), "refused"
	})
}

// notCheckedOut answers a check-out (what: live or offline) that
// circulation did not make (err): busy when it could not say; ok, with
// that loan's due date and okMessage, when the book is already on loan to
// this patron (a retry whose first reply was lost, or a check-out stored
// offline and sent again with another date); refuse's answer for any
// other refusal.
func (c *conn) notCheckedOut(err error, what, okMessage string, reply func(ok bool, due time.Time, title, message string) *wire.Reply,
	refuse func(message, code string) (*wire.Reply, string)) (*wire.Reply, string) {
	var ref *circ.Refusal
	switch {
	case errors.As(err, &ref) && ref.Busy():
		return reply(false, time.Time{}, "", msgBusy), busyOutcome(err)
	case errors.As(err, &ref) && ref.Status/100 == 4:
		if due, own := ref.OwnLoan(); own {
			return reply(true, due, "", okMessage), "ok_again"
		}
		return refuse(screenMessage(ref), ref.Code)
	}
	c.log.Error(what+": circulation did not answer", slog.Any("error", err))
	return reply(false, time.Time{}, "", msgBusy), "error"
}

// checkOutOffline is an 11 with no block: a check-out the kiosk made
// while the library system could not answer, sent now with its
// transaction date and the due date it gave (nb due date). It already
// happened: circulation records it dated then, past the rules a live one
// keeps, once however often it is sent, and ok is 1. The patron's PIN,
// typed while nothing could check it, is not asked. It is refused (ok 0,
// a screen message, and a line in the log for the desk) when it is older
// than the door takes (SIP2_OFFLINE_WITHIN), when the library does not
// take check-outs made offline, or for what cannot be lent past (an
// unknown patron or item, an item on loan to someone else); a library
// system that does not answer is "busy": the kiosk keeps it and sends it
// again. When storage says a door saw the kiosk on line at its date, it
// is a live check-out (live), nothing answered yet.
func (c *conn) checkOutOffline(ctx context.Context, s *circ.Session, m msg.CheckOut, at time.Time,
	reply func(ok bool, due time.Time, title, message string) *wire.Reply) (r *wire.Reply, outcome string, live bool) {
	// The kiosk's nb due date is taken when it falls after the loan;
	// otherwise the loan is due as its policy says (dueDropped).
	var due time.Time
	dueDropped := false
	if strings.TrimSpace(m.NoBlockDueDate) != "" {
		if d, err := msg.ParseDateIn(m.NoBlockDueDate, c.cfg.location); err == nil && d.After(at) {
			due = d
		} else {
			dueDropped = true
		}
	}
	refused := func(message, why string) (*wire.Reply, string) {
		c.log.Warn("an offline check-out refused: for the desk",
			slog.String("patron", m.Patron), slog.String("item", m.Item), slog.Time("at", at), slog.String("why", why))
		return reply(false, time.Time{}, "", message), "refused"
	}
	if c.s.opts.OfflineWithin > 0 && time.Since(at) > c.s.opts.OfflineWithin {
		r, outcome = refused(msgOfflineTooOld, "older than SIP2_OFFLINE_WITHIN ("+c.s.opts.OfflineWithin.String()+")")
		return r, outcome, false
	}
	// A PIN sent with it goes with it, and circulation checks it against
	// the patron before any refusal of the patron or the item: a wrong one
	// refuses it (counted as every wrong PIN is), whatever the kiosk let
	// the patron do.
	pin := ""
	if m.Has("AD") {
		pin = m.PatronPassword
	}
	loan, broken, err := c.s.circ.CheckOutOffline(ctx, s, m.Item, m.Patron, c.cfg.ServicePointID, at, due, pin, m.OfflineKey())
	if err == nil {
		if len(broken) > 0 {
			c.log.Warn(schemas.OfflineWords(broken),
				slog.String("patron", m.Patron), slog.String("item", m.Item), slog.Time("at", at))
		}
		if dueDropped {
			// The patron was told a date the loan does not keep: the
			// desk is told which, once the loan is recorded.
			c.log.Warn("an offline check-out's nb due date is not taken: due as the loan policy says, for the desk",
				slog.String("patron", m.Patron), slog.String("item", m.Item),
				slog.Time("at", at), slog.String("nb_due_date", m.NoBlockDueDate), slog.Time("due", loan.DueDate))
		}
		return reply(true, loan.DueDate, loan.Title, msgRecordedOffline), "ok_offline", false
	}
	var ref *circ.Refusal
	if errors.As(err, &ref) && ref.Code == schemas.CodeOfflineWhileOnLine {
		return nil, "", true
	}
	if message, outcome, ok := pinRefused(err); ok {
		c.log.Warn("an offline check-out refused: for the desk",
			slog.String("patron", m.Patron), slog.String("item", m.Item), slog.Time("at", at), slog.String("why", outcome))
		return reply(false, time.Time{}, "", message), outcome, false
	}
	r, outcome = c.notCheckedOut(err, "offline check-out", msgRecordedOffline, reply, refused)
	return r, outcome, false
}

// renew is 29 → 30, through circulation's renewal: FOLIO's reasons in AF
// when it is refused.
func (c *conn) renew(s *circ.Session, req *wire.Request) (*wire.Reply, string) {
	m, err := msg.ReadRenew(req)
	if err != nil {
		return c.malformed(req, err)
	}
	reply := func(ok bool, loan circ.Loan, message string) *wire.Reply {
		return msg.RenewResponse{OK: ok, Date: c.now(), Institution: c.cfg.Institution, Patron: m.Patron, Item: m.Item,
			Title: loan.Title, Due: loan.DueDate.In(c.cfg.location), Message: message}.Reply()
	}
	if m.Patron == "" || m.Item == "" {
		return reply(false, circ.Loan{}, msgBarcodes), "refused"
	}
	// The patron's PIN goes with the renewal, and circulation checks it
	// there: where the listener requires it, nothing is called without
	// it; where the tenant does, circulation refuses the renewal without
	// it, whatever the listener says.
	if c.cfg.PatronPin == PinRequired && (!m.Has("AD") || m.PatronPassword == "") {
		return reply(false, circ.Loan{}, msgPinNeeded), "pin_needed"
	}
	ctx, cancel := c.call()
	defer cancel()
	loan, err := c.s.circ.Renew(ctx, s, m.Item, m.Patron, c.cfg.ServicePointID, m.PatronPassword, m.Key())
	if err == nil {
		return reply(true, loan, ""), "ok"
	}
	if message, outcome, ok := pinRefused(err); ok {
		return reply(false, circ.Loan{}, message), outcome
	}
	var ref *circ.Refusal
	if errors.As(err, &ref) && ref.Status/100 == 4 && !ref.Busy() {
		return reply(false, circ.Loan{}, screenMessage(ref)), "refused"
	}
	if !errors.As(err, &ref) {
		c.log.Error("renew: circulation did not answer", slog.Any("error", err))
	}
	return reply(false, circ.Loan{}, msgBusy), busyOutcome(err)
}

// renewAll is 65 → 66: each of the patron's loans out (the fifty due
// first, which circulation lists with the patron's PIN) renewed in turn;
// BM lists those renewed, BN the others, AF why each of those was not.
// Ok is 1 when the renew all was processed, however many were renewed
// (none, when nothing could be), as Koha and Evergreen answer; 0 when it
// was not (no patron, no PIN or a wrong one, circulation not answering).
func (c *conn) renewAll(s *circ.Session, req *wire.Request) (*wire.Reply, string) {
	m, err := msg.ReadRenewAll(req)
	if err != nil {
		return c.malformed(req, err)
	}
	reply := func(processed bool, renewed, notRenewed []string, message string) *wire.Reply {
		return msg.RenewAllResponse{OK: processed, Date: c.now(),
			Institution: c.cfg.Institution, Renewed: renewed, NotRenewed: notRenewed, Message: message}.Reply()
	}
	if m.Patron == "" {
		return reply(false, nil, nil, msgBarcodes), "refused"
	}
	if m.PatronPassword == "" {
		// Which items are the patron's is told only with their PIN.
		return reply(false, nil, nil, msgPinNeeded), "pin_needed"
	}
	ctx, cancel := c.call()
	defer cancel()
	sum, err := c.s.circ.PatronSummary(ctx, s, m.Patron, m.PatronPassword)
	if message, outcome, ok := pinRefused(err); ok {
		return reply(false, nil, nil, message), outcome
	}
	var ref *circ.Refusal
	switch {
	case errors.As(err, &ref) && ref.Status/100 == 4 && !ref.Busy():
		return reply(false, nil, nil, screenMessage(ref)), "refused"
	case err != nil:
		if !errors.As(err, &ref) {
			c.log.Error("renew all: circulation did not answer", slog.Any("error", err))
		}
		return reply(false, nil, nil, msgBusy), busyOutcome(err)
	}
	var renewed, notRenewed, reasons []string
	// Each renewal carries the PIN, as a 29's does: the tenant may
	// require it of every one.
	for _, l := range sum.OpenLoans {
		_, err := c.s.circ.Renew(ctx, s, l.ItemBarcode, m.Patron, c.cfg.ServicePointID, m.PatronPassword, m.Key(l.ItemBarcode))
		if err == nil {
			renewed = append(renewed, l.ItemBarcode)
			continue
		}
		notRenewed = append(notRenewed, l.ItemBarcode)
		why := msgBusy
		if errors.As(err, &ref) && ref.Status/100 == 4 && !ref.Busy() {
			why = screenMessage(ref)
		}
		reasons = append(reasons, l.ItemBarcode+": "+why)
	}
	return reply(true, renewed, notRenewed, strings.Join(reasons, "; ")), "ok"
}

// returnedAt is when a 09 says its item was returned: its return date
// (a book drop or a sorter checking in what it took offline), read in the
// listener's time zone unless it says UTC, and never after now; now when
// it gives none. Circulation holds it to the loan's date.
func (c *conn) returnedAt(raw string) time.Time {
	now := time.Now()
	if strings.TrimSpace(raw) == "" {
		return now
	}
	d, err := msg.ParseDateIn(raw, c.cfg.location)
	if err != nil {
		return now
	}
	if d.After(now) {
		return now
	}
	return d
}

// checkIn is 09 → 10.
func (c *conn) checkIn(s *circ.Session, req *wire.Request) (*wire.Reply, string) {
	m, err := msg.ReadCheckIn(req)
	if err != nil {
		return c.malformed(req, err)
	}
	item := m.Item
	reply := func(ok bool, title, message string) *wire.Reply {
		return msg.CheckInResponse{OK: ok, Date: c.now(), Institution: c.cfg.Institution, Item: item, Title: title,
			Message: message}.Reply()
	}
	if item == "" {
		return reply(false, "", msgBarcodes), "refused"
	}
	// A check-in the kiosk made offline and sends now (no block) happened
	// at its transaction date when it names no return date: it is dated
	// then, within the door's bound.
	returned := m.ReturnDate
	if m.NoBlock && strings.TrimSpace(returned) == "" {
		returned = m.TransactionDate
	}
	at := c.returnedAt(returned)
	if m.NoBlock && c.s.opts.OfflineWithin > 0 && time.Since(at) > c.s.opts.OfflineWithin {
		c.log.Warn("an offline check-in older than SIP2_OFFLINE_WITHIN: refused, for the desk",
			slog.String("item", item), slog.Time("at", at),
			slog.Duration("offline_within", c.s.opts.OfflineWithin))
		return reply(false, "", msgOfflineTooOld), "refused"
	}
	ctx, cancel := c.call()
	defer cancel()
	ret, err := c.s.circ.CheckIn(ctx, s, item, c.cfg.ServicePointID, at, m.Key())
	if err == nil {
		r := msg.CheckInResponse{OK: true, Date: c.now(), Institution: c.cfg.Institution, Item: item, Title: ret.Title, Message: msgCheckedIn}
		switch ret.Status {
		case schemas.ItemAwaitingPickup:
			r.AlertType, r.Message = msg.AlertHoldHere, msgHoldHere
		case schemas.ItemInTransit:
			r.AlertType, r.Destination, r.Message = msg.AlertHoldElsewhere, ret.Destination, msgHoldElsewhere
		}
		return r.Reply(), "ok"
	}
	var ref *circ.Refusal
	if errors.As(err, &ref) && ref.Code == schemas.CodeReturnedBeforeLoan {
		// Dated before the item was lent again: nothing closed, and the
		// desk has it. The kiosk is told it is done with it (ok), so
		// that it keeps nothing to send again.
		return reply(true, "", msgReturnedBeforeLoan), "returned_before_loan"
	}
	if errors.As(err, &ref) && ref.Status/100 == 4 && !ref.Busy() {
		return reply(false, "", ref.Message), "refused"
	}
	if !errors.As(err, &ref) {
		c.log.Error("check-in: circulation did not answer", slog.Any("error", err))
	}
	return reply(false, "", msgBusy), busyOutcome(err)
}

// screenMessage is a refusal as a kiosk shows it: FOLIO's reasons
// verbatim, each followed by what the library wrote for the patron (a
// block's patron message), when it did.
func screenMessage(ref *circ.Refusal) string {
	if len(ref.Errors) == 0 {
		return ref.Message
	}
	parts := make([]string, 0, len(ref.Errors))
	for _, e := range ref.Errors {
		if m := e.Param("patronMessage"); m != "" {
			parts = append(parts, e.Message+": "+m)
			continue
		}
		parts = append(parts, e.Message)
	}
	return strings.Join(parts, "; ")
}

// knownCode are the requests of SIP2 2.00: the metrics' message label
// takes no other value.
var knownCode = func() map[string]bool {
	known := map[string]bool{"96": true}
	for _, code := range msg.BXOrder {
		known[code] = true
	}
	return known
}()
