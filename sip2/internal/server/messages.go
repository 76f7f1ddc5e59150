package server

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/sip2/internal/circ"
	"github.com/checkoutlock/sip2/wire"
)

// implemented is what the door answers, by request code.
var implemented = map[string]bool{"11": true, "09": true, "99": true, "97": true, "93": true, "35": true,
	"23": true, "63": true, "17": true}

// bxOrder is SIP2's sixteen requests in the order of the status reply's
// BX field: patron status, checkout, checkin, block patron, SC/ACS status,
// resend, login, patron information, end session, fee paid, item
// information, item status update, patron enable, hold, renew, renew all.
var bxOrder = []string{"23", "11", "09", "01", "99", "97", "93", "63", "35", "37", "17", "19", "25", "15", "29", "65"}

// Supported is the status reply's BX: exactly what is implemented.
var Supported = func() string {
	var b strings.Builder
	for _, code := range bxOrder {
		b.WriteString(wire.YN(implemented[code]))
	}
	return b.String()
}()

// Screen messages (AF).
const (
	msgBusy        = "System busy, please try again"
	msgLogInFirst  = "Please log in first"
	msgMalformed   = "The message's fixed fields are malformed"
	msgUnsupported = "This request is not supported here"
	msgBarcodes    = "Scan the patron's card and the item"
	msgCheckedIn   = "Item checked in"
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
	case err == nil && req.Checked && c.lastReply != nil && bytes.Equal(line, c.lastRaw):
		// The kiosk lost the reply and sent the same message again, with
		// the same sequence number: the reply again, nothing done twice.
		reply, outcome = c.lastReply, "replayed"
	case err != nil:
		c.bad++
		outcome = "malformed"
		if neg, ok := negative[req.Code]; ok && req.Code != "" {
			reply = c.encode(req, neg(c, msgMalformed))
		} else {
			reply = resendReply
		}
	default:
		c.bad = 0
		var r *wire.Reply
		r, outcome = c.dispatch(req)
		item, _ = req.Get("AB")
		reply = c.encode(req, r)
		c.lastRaw, c.lastReply = append(c.lastRaw[:0], line...), reply
	}
	werr := c.write(reply)
	code := "unknown"
	if req != nil && knownCode[req.Code] {
		code = req.Code
	}
	elapsed := time.Since(started)
	c.s.metrics.messages.WithLabelValues(code, outcome).Inc()
	c.s.metrics.duration.WithLabelValues(code).Observe(elapsed.Seconds())
	attrs := []any{slog.String("tenant", c.cfg.Tenant), slog.String("peer", c.peer), slog.String("message", code),
		slog.String("outcome", outcome), slog.Float64("duration_ms", float64(elapsed.Microseconds())/1000)}
	if s := c.sessionOf(); s != nil {
		attrs = append(attrs, slog.String("kiosk", s.Username))
	}
	if item != "" {
		attrs = append(attrs, slog.String("item", item))
	}
	if werr != nil {
		attrs = append(attrs, slog.String("write_error", werr.Error()))
	}
	c.s.logger.Info("sip2", attrs...)
	return c.bad < 3 && werr == nil
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
// 97 (handled before); a request the door does not implement gets its
// negative reply.
func (c *conn) dispatch(req *wire.Request) (*wire.Reply, string) {
	if req.Code == "93" {
		return c.login(req)
	}
	if req.Code == "99" {
		return c.status(), "ok"
	}
	neg, known := negative[req.Code]
	if !known {
		// A response code, or 96: nothing to answer but "again".
		return &wire.Reply{Code: "96"}, "unexpected"
	}
	s := c.sessionOf()
	if s == nil {
		return neg(c, msgLogInFirst), "not_logged_in"
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
	case "35":
		patron, _ := req.Get("AA")
		r := &wire.Reply{Code: "36", Fixed: "Y" + c.now()}
		r.Add("AO", c.cfg.Institution).Add("AA", patron)
		return r, "ok"
	}
	return neg(c, msgUnsupported), "unsupported"
}

func (c *conn) now() string { return wire.Date(time.Now().In(c.cfg.location)) }

func (c *conn) call() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), c.s.opts.CallTimeout)
}

// login is 93: the kiosk's account, checked once for the connection.
// The door counts nothing itself: circulation's login (storage's) counts
// every attempt before it checks the password, by account and kiosk
// address, which the door names; guesses from one kiosk lock that kiosk
// out, never the shared account at the others.
func (c *conn) login(req *wire.Request) (*wire.Reply, string) {
	user, _ := req.Get("CN")
	password, _ := req.Get("CO")
	fail := &wire.Reply{Code: "94", Fixed: "0"}
	if user == "" || password == "" {
		return fail, "refused"
	}
	ctx, cancel := c.call()
	defer cancel()
	s, err := c.s.circ.Login(ctx, c.cfg.Tenant, user, password, c.peer)
	switch {
	case err == nil:
		c.mu.Lock()
		c.session = s
		c.mu.Unlock()
		return &wire.Reply{Code: "94", Fixed: "1"}, "ok"
	case errors.Is(err, circ.ErrLoginLocked):
		return fail, "locked"
	case errors.Is(err, circ.ErrLoginFailed):
		return fail, "refused"
	case errors.Is(err, circ.ErrTooMuch):
		c.s.logger.Warn("a kiosk account holds more than the self-check role: refused",
			slog.String("tenant", c.cfg.Tenant), slog.String("kiosk", user))
		return fail, "too_much"
	}
	c.s.logger.Error("login: circulation did not answer", slog.String("tenant", c.cfg.Tenant), slog.Any("error", err))
	return fail, "error"
}

// status is 98: online, check-out and check-in allowed, the timeout a
// kiosk should wait (a second more than the door waits for circulation),
// what is supported.
func (c *conn) status() *wire.Reply {
	timeout := min((c.s.opts.CallTimeout+time.Second)/(100*time.Millisecond), 999)
	r := &wire.Reply{Code: "98", Fixed: "YYYNNN" + wire.Width(int(timeout)) + "003" + c.now() + "2.00"}
	r.Add("AO", c.cfg.Institution).Add("BX", Supported)
	return r
}

// checkOut is 11 → 12, through circulation's check-out: under the
// patron's lock, the item limit and the kiosk's permissions.
func (c *conn) checkOut(s *circ.Session, req *wire.Request) (*wire.Reply, string) {
	patron, _ := req.Get("AA")
	item, _ := req.Get("AB")
	reply := func(ok bool, due time.Time, title, msg string) *wire.Reply {
		fixed := "0NUN"
		if ok {
			fixed = "1NUY"
		}
		r := &wire.Reply{Code: "12", Fixed: fixed + c.now()}
		r.Add("AO", c.cfg.Institution).Add("AA", patron).Add("AB", item).Add("AJ", title)
		if ok {
			r.Add("AH", wire.Date(due.In(c.cfg.location)))
		}
		if msg != "" {
			r.Add("AF", msg)
		}
		return r
	}
	if patron == "" || item == "" {
		return reply(false, time.Time{}, "", msgBarcodes), "refused"
	}
	ctx, cancel := c.call()
	defer cancel()
	if c.cfg.PatronPin == PinRequired {
		if ok, msg, outcome := c.pinGiven(ctx, s, req, patron); !ok {
			return reply(false, time.Time{}, "", msg), outcome
		}
	}
	loan, err := c.s.circ.CheckOut(ctx, s, item, patron, c.cfg.ServicePointID)
	if err == nil {
		return reply(true, loan.DueDate, loan.Title, ""), "ok"
	}
	var ref *circ.Refusal
	switch {
	case errors.As(err, &ref) && ref.Busy():
		return reply(false, time.Time{}, "", msgBusy), "busy"
	case errors.As(err, &ref) && ref.Status/100 == 4:
		if due, own := ref.OwnLoan(); own {
			// Already on loan to this patron: a retry whose first reply
			// was lost.
			return reply(true, due, "", ""), "ok_again"
		}
		return reply(false, time.Time{}, "", screenMessage(ref)), "refused"
	}
	c.s.logger.Error("check-out: circulation did not answer", slog.String("tenant", c.cfg.Tenant), slog.Any("error", err))
	return reply(false, time.Time{}, "", msgBusy), "error"
}

// checkIn is 09 → 10.
func (c *conn) checkIn(s *circ.Session, req *wire.Request) (*wire.Reply, string) {
	item, _ := req.Get("AB")
	reply := func(ok bool, title, msg string) *wire.Reply {
		fixed := "0NUN"
		if ok {
			fixed = "1YUN"
		}
		r := &wire.Reply{Code: "10", Fixed: fixed + c.now()}
		r.Add("AO", c.cfg.Institution).Add("AB", item).Add("AQ", "").Add("AJ", title)
		if msg != "" {
			r.Add("AF", msg)
		}
		return r
	}
	if item == "" {
		return reply(false, "", msgBarcodes), "refused"
	}
	ctx, cancel := c.call()
	defer cancel()
	ret, err := c.s.circ.CheckIn(ctx, s, item, c.cfg.ServicePointID, time.Now())
	if err == nil {
		return reply(true, ret.Title, msgCheckedIn), "ok"
	}
	var ref *circ.Refusal
	if errors.As(err, &ref) && ref.Status/100 == 4 && !ref.Busy() {
		return reply(false, "", ref.Message), "refused"
	}
	if !errors.As(err, &ref) {
		c.s.logger.Error("check-in: circulation did not answer", slog.String("tenant", c.cfg.Tenant), slog.Any("error", err))
	}
	return reply(false, "", msgBusy), "busy"
}

// patron is 23 → 24 (patron status) and 63 → 64 (patron information):
// whether the patron may borrow, and why not in FOLIO's words; for 63 the
// counts of items out and overdue, the item limit (CB) and, as the
// request's summary asks, the charged (AU) and overdue (AT) items.
func (c *conn) patron(s *circ.Session, req *wire.Request) (*wire.Reply, string) {
	barcode, _ := req.Get("AA")
	info := req.Code == "63"
	code := "24"
	if info {
		code = "64"
	}
	reply := func(status, counts, name string, valid bool, msg string) *wire.Reply {
		r := &wire.Reply{Code: code, Fixed: status + "000" + c.now() + counts}
		r.Add("AO", c.cfg.Institution).Add("AA", barcode).Add("AE", name).Add("BL", wire.YN(valid))
		if msg != "" {
			r.Add("AF", msg)
		}
		return r
	}
	noCounts := ""
	if info {
		noCounts = strings.Repeat("    ", 6)
	}
	if barcode == "" {
		return reply(deniedStatus, noCounts, "", false, msgBarcodes), "refused"
	}
	ctx, cancel := c.call()
	defer cancel()
	// The patron's name and loans come only with their PIN (AD), which
	// circulation checks with the summary; CQ says whether it was right.
	// Where PINs are required, a patron without theirs is told nothing
	// more; elsewhere, the verdict and the counts.
	pin, _ := req.Get("AD")
	pinChecked := pin != "" || c.cfg.PatronPin == PinRequired
	refused := func(msg, outcome string) (*wire.Reply, string) {
		r := reply(deniedStatus, noCounts, "", true, msg)
		r.Add("CQ", "N")
		return r, outcome
	}
	if pin == "" && c.cfg.PatronPin == PinRequired {
		return refused(msgPinNeeded, "pin_needed")
	}
	sum, err := c.s.circ.PatronSummary(ctx, s, barcode, pin)
	var ref *circ.Refusal
	pinOutcome := ""
	if errors.As(err, &ref) && (ref.Code == schemas.CodePinInvalid || ref.Code == schemas.CodePinLocked) {
		msg, outcome := msgPinWrong, "pin_wrong"
		if ref.Code == schemas.CodePinLocked {
			msg, outcome = msgPinLocked, "pin_locked"
		}
		if c.cfg.PatronPin == PinRequired {
			return refused(msg, outcome)
		}
		// PINs are not required here: the verdict, without the PIN.
		pinOutcome = outcome
		sum, err = c.s.circ.PatronSummary(ctx, s, barcode, "")
	}
	switch {
	case errors.As(err, &ref) && ref.Status == http.StatusNotFound:
		return reply(deniedStatus, noCounts, "", false, ref.Message), "refused"
	case errors.As(err, &ref) && ref.Code == schemas.CodeTooManyRequests:
		return reply(deniedStatus, noCounts, "", true, msgBusy), "rate_limited"
	case err != nil:
		if !errors.As(err, &ref) {
			c.s.logger.Error("patron summary: circulation did not answer", slog.String("tenant", c.cfg.Tenant), slog.Any("error", err))
		}
		return reply(deniedStatus, noCounts, "", false, msgBusy), "busy"
	}
	pinOK := pin != "" && sum.View == "full"
	denied := !sum.CanBorrow
	status := []byte(wire.YN(denied) + wire.YN(denied) + wire.YN(denied) + wire.YN(denied) + strings.Repeat(" ", 10))
	if sum.AtItemLimit {
		status[5] = 'Y' // too many items charged: every limit that applies
	}
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
	counts := ""
	if info {
		counts = "0000" + wire.Counter(sum.OverdueCount) + wire.Counter(sum.OpenLoanCount) + "0000" + "0000" + "0000"
	}
	r := reply(string(status), counts, name, true, strings.Join(reasons, "; "))
	if pinChecked {
		r.Add("CQ", wire.YN(pinOK))
	}
	if info {
		// CB is the limit on all the patron's loans (their group's), when
		// there is one; limits by material or loan type are not one count.
		if groupLimit > 0 {
			r.Add("CB", wire.Counter(groupLimit))
		}
		summary := req.Fixed[21:]
		now := time.Now()
		for _, l := range sum.OpenLoans {
			switch {
			case summary[2] == 'Y':
				r.Add("AU", l.ItemBarcode)
			case summary[1] == 'Y' && !l.DueDate.IsZero() && l.DueDate.Before(now):
				r.Add("AT", l.ItemBarcode)
			}
		}
	}
	if pinOutcome != "" {
		return r, pinOutcome
	}
	return r, "ok"
}

// Screen messages about PINs.
const (
	msgPinNeeded = "Please enter your PIN"
	msgPinWrong  = "Wrong PIN"
	msgPinLocked = "Too many wrong PINs: please try again later or ask at the desk"
)

// pinGiven checks the patron's PIN (AD): whether it matches, and when not
// the screen message and the outcome to log (the PIN itself never is).
func (c *conn) pinGiven(ctx context.Context, s *circ.Session, req *wire.Request, patron string) (ok bool, msg, outcome string) {
	pin, given := req.Get("AD")
	if !given || pin == "" {
		return false, msgPinNeeded, "pin_needed"
	}
	err := c.s.circ.VerifyPin(ctx, s, patron, pin)
	var ref *circ.Refusal
	switch {
	case err == nil:
		return true, "", ""
	case errors.As(err, &ref) && ref.Code == schemas.CodePinInvalid:
		return false, msgPinWrong, "pin_wrong"
	case errors.As(err, &ref) && ref.Code == schemas.CodePinLocked:
		return false, msgPinLocked, "pin_locked"
	}
	if !errors.As(err, &ref) {
		c.s.logger.Error("PIN: circulation did not answer", slog.String("tenant", c.cfg.Tenant), slog.Any("error", err))
	}
	return false, msgBusy, "busy"
}

// deniedStatus is a patron status that grants nothing: charge, renewal,
// recall and hold privileges denied.
const deniedStatus = "YYYY          "

// item is 17 → 18 (item information): the item's circulation status as
// SIP2 names FOLIO's statuses, its title and, on loan, its due date.
func (c *conn) item(s *circ.Session, req *wire.Request) (*wire.Reply, string) {
	barcode, _ := req.Get("AB")
	reply := func(status, title string, due time.Time, msg string) *wire.Reply {
		r := &wire.Reply{Code: "18", Fixed: status + "00" + "01" + c.now()}
		r.Add("AB", barcode).Add("AJ", title)
		if !due.IsZero() {
			r.Add("AH", wire.Date(due.In(c.cfg.location)))
		}
		if msg != "" {
			r.Add("AF", msg)
		}
		return r
	}
	if barcode == "" {
		return reply("01", "", time.Time{}, msgBarcodes), "refused"
	}
	ctx, cancel := c.call()
	defer cancel()
	sum, err := c.s.circ.ItemSummary(ctx, s, barcode)
	var ref *circ.Refusal
	switch {
	case errors.As(err, &ref) && ref.Status == http.StatusNotFound:
		return reply("01", "", time.Time{}, "No item with barcode "+barcode+" could be found"), "refused"
	case err != nil:
		if !errors.As(err, &ref) {
			c.s.logger.Error("item summary: circulation did not answer", slog.String("tenant", c.cfg.Tenant), slog.Any("error", err))
		}
		return reply("01", "", time.Time{}, msgBusy), "busy"
	}
	return reply(circulationStatus(sum.Status), sum.Title, sum.DueDate, ""), "ok"
}

// circulationStatus is SIP2's circulation status (18's first field) of a
// FOLIO item status: 01 other, 02 on order, 03 available, 04 charged, 06
// in process, 08 waiting on the hold shelf, 10 in transit, 11 claimed
// returned, 12 lost, 13 missing.
func circulationStatus(folio string) string {
	switch folio {
	case "On order":
		return "02"
	case "Available":
		return "03"
	case "Checked out":
		return "04"
	case "In process", "In process (non-requestable)":
		return "06"
	case "Awaiting pickup", "Awaiting delivery":
		return "08"
	case "In transit":
		return "10"
	case "Claimed returned":
		return "11"
	case "Declared lost", "Aged to lost", "Lost and paid":
		return "12"
	case "Missing", "Long missing":
		return "13"
	}
	return "01"
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
var knownCode = map[string]bool{}

func init() {
	for code := range negative {
		knownCode[code] = true
	}
	for _, code := range []string{"93", "99", "97", "96"} {
		knownCode[code] = true
	}
}

// negative is each request's refusal, with a screen message: a request
// the door does not implement, or a malformed one, is answered in SIP2,
// never with silence.
var negative = map[string]func(c *conn, msg string) *wire.Reply{
	"93": func(c *conn, msg string) *wire.Reply { return &wire.Reply{Code: "94", Fixed: "0"} },
	"99": func(c *conn, msg string) *wire.Reply { return c.status().Add("AF", msg) },
	"11": func(c *conn, msg string) *wire.Reply {
		return (&wire.Reply{Code: "12", Fixed: "0NUN" + c.now()}).Add("AO", c.cfg.Institution).Add("AA", "").Add("AB", "").
			Add("AJ", "").Add("AF", msg)
	},
	"09": func(c *conn, msg string) *wire.Reply {
		return (&wire.Reply{Code: "10", Fixed: "0NUN" + c.now()}).Add("AO", c.cfg.Institution).Add("AB", "").Add("AQ", "").
			Add("AF", msg)
	},
	"35": func(c *conn, msg string) *wire.Reply {
		return (&wire.Reply{Code: "36", Fixed: "N" + c.now()}).Add("AO", c.cfg.Institution).Add("AA", "").Add("AF", msg)
	},
	"23": patronStatusRefused("24"),
	"63": func(c *conn, msg string) *wire.Reply {
		return (&wire.Reply{Code: "64", Fixed: deniedStatus + "000" + c.now() + strings.Repeat("    ", 6)}).
			Add("AO", c.cfg.Institution).Add("AA", "").Add("AE", "").Add("BL", "N").Add("AF", msg)
	},
	"01": patronStatusRefused("24"),
	"25": patronStatusRefused("26"),
	"17": func(c *conn, msg string) *wire.Reply {
		return (&wire.Reply{Code: "18", Fixed: "010101" + c.now()}).Add("AB", "").Add("AJ", "").Add("AF", msg)
	},
	"19": func(c *conn, msg string) *wire.Reply {
		return (&wire.Reply{Code: "20", Fixed: "0" + c.now()}).Add("AB", "").Add("AF", msg)
	},
	"37": func(c *conn, msg string) *wire.Reply {
		return (&wire.Reply{Code: "38", Fixed: "N" + c.now()}).Add("AO", c.cfg.Institution).Add("AA", "").Add("AF", msg)
	},
	"15": func(c *conn, msg string) *wire.Reply {
		return (&wire.Reply{Code: "16", Fixed: "0N" + c.now()}).Add("AO", c.cfg.Institution).Add("AA", "").Add("AF", msg)
	},
	"29": func(c *conn, msg string) *wire.Reply {
		return (&wire.Reply{Code: "30", Fixed: "0NUN" + c.now()}).Add("AO", c.cfg.Institution).Add("AA", "").Add("AB", "").
			Add("AJ", "").Add("AF", msg)
	},
	"65": func(c *conn, msg string) *wire.Reply {
		return (&wire.Reply{Code: "66", Fixed: "0" + "0000" + "0000" + c.now()}).Add("AO", c.cfg.Institution).Add("AF", msg)
	},
}

// patronStatusRefused is a patron status reply (24, 26) that says nothing
// about the patron: every privilege denied, not a valid patron.
func patronStatusRefused(code string) func(c *conn, msg string) *wire.Reply {
	return func(c *conn, msg string) *wire.Reply {
		return (&wire.Reply{Code: code, Fixed: deniedStatus + "000" + c.now()}).Add("AO", c.cfg.Institution).
			Add("AA", "").Add("AE", "").Add("BL", "N").Add("AF", msg)
	}
}
