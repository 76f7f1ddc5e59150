// Package msg is SIP2 2.00's messages as the door reads and writes them:
// each request's fixed fields by name, checked as the specification
// defines them, and each reply's layout, written once. Package wire frames
// the messages (fields, error detection, character sets); the door's
// server decides what to say.
package msg

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/checkoutlock/sip2/wire"
)

// ErrFixedField is a request whose fixed fields are not what SIP2 defines
// (a flag that is not Y or N, a date that is not a date): the door answers
// it with the request's refusal.
var ErrFixedField = errors.New("sip2: malformed fixed field")

// FieldError is a request with a variable field that is not what SIP2
// defines (an item number that is not a number): the door answers it with
// the request's refusal, naming the field.
type FieldError struct {
	ID, Value, Want string
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("sip2: malformed variable field %s: %q is not %s", e.ID, e.Value, e.Want)
}

// fixed reads a request's fixed part, field by field, and remembers the
// first field that is not as SIP2 defines it.
type fixed struct {
	s   string
	at  int
	err error
}

func (f *fixed) take(n int) string {
	if f.at+n > len(f.s) {
		f.fail("the fixed part ends early")
		return ""
	}
	v := f.s[f.at : f.at+n]
	f.at += n
	return v
}

func (f *fixed) fail(format string, args ...any) {
	f.failWith(fmt.Errorf("%w at %d: %s", ErrFixedField, f.at, fmt.Sprintf(format, args...)))
}

// failWith remembers err unless an earlier field failed: the request's
// first fault is the one answered.
func (f *fixed) failWith(err error) {
	if f.err == nil {
		f.err = err
	}
}

// yn is a Y/N flag (either case; a blank reads N, as kiosks that leave
// a flag unset send it).
func (f *fixed) yn(name string) bool {
	switch v := f.take(1); v {
	case "Y", "y":
		return true
	case "N", "n", " ", "":
		return false
	default:
		f.fail("%s is %q, not Y or N", name, v)
		return false
	}
}

// date is an 18-character date (YYYYMMDDZZZZHHMMSS), or 18 blanks (a
// kiosk without a clock, or no date to give); it is kept as sent.
func (f *fixed) date(name string) string {
	v := f.take(18)
	if v == "" || strings.TrimSpace(v) == "" {
		return v
	}
	if _, err := ParseDate(v); err != nil {
		f.fail("%s %q: %v", name, v, err)
	}
	return v
}

// digits is n digits, padded with blanks on the left or all blanks
// (nothing to say), as kiosks write them (Evergreen's 99: "990 402.00").
func (f *fixed) digits(name string, n int) string {
	v := f.take(n)
	for _, c := range strings.TrimLeft(v, " ") {
		if c < '0' || c > '9' {
			f.fail("%s %q is not %d digits", name, v, n)
			break
		}
	}
	return v
}

// ParseDate reads SIP2's date: YYYYMMDD, a zone of four characters (four
// blanks for local time, "   Z" for UTC; others are taken as local), and
// HHMMSS. A local time is read in time.Local.
func ParseDate(s string) (time.Time, error) { return ParseDateIn(s, time.Local) }

// ParseDateIn is ParseDate for a date written in loc (a listener's time
// zone) unless it says UTC.
func ParseDateIn(s string, loc *time.Location) (time.Time, error) {
	if len(s) != 18 {
		return time.Time{}, fmt.Errorf("a date is 18 characters, not %d", len(s))
	}
	if s[8:12] == "   Z" {
		loc = time.UTC
	}
	return time.ParseInLocation("20060102150405", s[:8]+s[12:], loc)
}

// Login is 93: the kiosk's account.
type Login struct {
	UIDAlgorithm, PWDAlgorithm string
	User, Password, Location   string
}

// ReadLogin reads a 93.
func ReadLogin(r *wire.Request) (Login, error) {
	f := fixed{s: r.Fixed}
	m := Login{UIDAlgorithm: f.take(1), PWDAlgorithm: f.take(1)}
	m.User, _ = r.Get("CN")
	m.Password, _ = r.Get("CO")
	m.Location, _ = r.Get("CP")
	return m, f.err
}

// SCStatus is 99: the kiosk's status, the width it prints and the version
// it speaks.
type SCStatus struct {
	Status        string // 0 ok, 1 out of paper, 2 shutting down
	MaxPrintWidth string
	Version       string
}

// ReadSCStatus reads a 99.
func ReadSCStatus(r *wire.Request) (SCStatus, error) {
	f := fixed{s: r.Fixed}
	m := SCStatus{Status: f.digits("status code", 1), MaxPrintWidth: f.digits("max print width", 3), Version: f.take(4)}
	return m, f.err
}

// PatronItem is what a check-out (11) and a renewal (29) carry after
// their flags: the two dates, then the institution, the patron, the item
// and the patron's password (PIN).
type PatronItem struct {
	TransactionDate           string
	NoBlockDueDate            string // blanks when none
	Institution, Patron, Item string
	PatronPassword            string
	given                     map[string]bool
	// seq is the message's AY sequence number ("" without one).
	seq string
}

// Has says whether the request carried the variable field id.
func (m PatronItem) Has(id string) bool { return m.given[id] }

// readPatronItem reads the dates from f and the fields from r.
func readPatronItem(f *fixed, r *wire.Request) PatronItem {
	m := PatronItem{TransactionDate: f.date("transaction date"), NoBlockDueDate: f.date("nb due date"), given: given(r), seq: r.Seq}
	m.Institution, _ = r.Get("AO")
	m.Patron, _ = r.Get("AA")
	m.Item, _ = r.Get("AB")
	m.PatronPassword, _ = r.Get("AD")
	return m
}

// CheckOut is 11. Cancel (BI Y) makes it SIP2's way of undoing a
// check-in of the item that did not complete at the kiosk.
type CheckOut struct {
	RenewalPolicy, NoBlock bool
	Cancel                 bool
	PatronItem
}

// ReadCheckOut reads an 11.
func ReadCheckOut(r *wire.Request) (CheckOut, error) {
	f := fixed{s: r.Fixed}
	m := CheckOut{RenewalPolicy: f.yn("SC renewal policy"), NoBlock: f.yn("no block")}
	m.PatronItem = readPatronItem(&f, r)
	cancel, _ := r.Get("BI")
	m.Cancel = cancel == "Y"
	return m, f.err
}

// CheckIn is 09.
type CheckIn struct {
	NoBlock                     bool
	TransactionDate, ReturnDate string
	Location, Institution, Item string
	seq                         string
}

// ReadCheckIn reads a 09.
func ReadCheckIn(r *wire.Request) (CheckIn, error) {
	f := fixed{s: r.Fixed}
	m := CheckIn{NoBlock: f.yn("no block"), seq: r.Seq}
	m.TransactionDate = f.date("transaction date")
	m.ReturnDate = f.date("return date")
	m.Location, _ = r.Get("AP")
	m.Institution, _ = r.Get("AO")
	m.Item, _ = r.Get("AB")
	return m, f.err
}

// Summary is 63's summary: which list of items the kiosk asks for (SIP2
// asks for one at most).
type Summary struct {
	Hold, Overdue, Charged, Fine, Recall, Unavailable bool
}

// PatronRequest is 23 (patron status) and 63 (patron information).
type PatronRequest struct {
	Information     bool // 63
	Language        string
	TransactionDate string
	Summary         Summary // 63 only
	Institution     string
	Patron          string
	PatronPassword  string
	// Start and End are 63's BP and BQ: the first and last item (counting
	// from 1) of the list the summary asks for; 0 when not given (the list
	// from its first, to its last).
	Start, End int
	given      map[string]bool
}

// Has says whether the request carried the variable field id.
func (m PatronRequest) Has(id string) bool { return m.given[id] }

// Window is the part of list, counting from 1, that Start and End ask
// for: all of it when neither is given, nothing when they ask for items
// past its end or End is before Start.
func Window[T any](list []T, start, end int) []T {
	if start < 1 {
		start = 1
	}
	if end < 1 || end > len(list) {
		end = len(list)
	}
	if start > end {
		return nil
	}
	return list[start-1 : end]
}

// ReadPatron reads a 23 or a 63.
func ReadPatron(r *wire.Request) (PatronRequest, error) {
	f := fixed{s: r.Fixed}
	m := PatronRequest{Information: r.Code == "63", Language: f.digits("language", 3)}
	m.TransactionDate = f.date("transaction date")
	if m.Information {
		s := f.take(10)
		flags := make([]bool, len(s))
		for i, c := range s {
			switch c {
			case 'Y':
				flags[i] = true
			case ' ', 'N':
			default:
				f.fail("summary %q: each position is Y or a blank", s)
			}
		}
		if len(flags) == 10 {
			m.Summary = Summary{Hold: flags[0], Overdue: flags[1], Charged: flags[2], Fine: flags[3], Recall: flags[4], Unavailable: flags[5]}
		}
	}
	m.Institution, _ = r.Get("AO")
	m.Patron, _ = r.Get("AA")
	m.PatronPassword, _ = r.Get("AD")
	m.given = given(r)
	if m.Information {
		m.Start, m.End = itemNumber(r, "BP", &f), itemNumber(r, "BQ", &f)
	}
	return m, f.err
}

// itemNumber is the variable field id as an item number (a count from 1),
// 0 when absent; one that is not a number makes the request malformed.
func itemNumber(r *wire.Request, id string, f *fixed) int {
	v, ok := r.Get(id)
	if !ok || strings.TrimSpace(v) == "" {
		return 0
	}
	n := wire.Atoi(strings.TrimSpace(v))
	if n < 0 {
		f.failWith(&FieldError{ID: id, Value: v, Want: "an item number"})
		return 0
	}
	return n
}

// Renew is 29 (renew).
type Renew struct {
	ThirdPartyAllowed, NoBlock bool
	PatronItem
}

// ReadRenew reads a 29.
func ReadRenew(r *wire.Request) (Renew, error) {
	f := fixed{s: r.Fixed}
	m := Renew{ThirdPartyAllowed: f.yn("third party allowed"), NoBlock: f.yn("no block")}
	m.PatronItem = readPatronItem(&f, r)
	return m, f.err
}

// RenewAll is 65 (renew all).
type RenewAll struct {
	TransactionDate     string
	Institution, Patron string
	PatronPassword      string
	given               map[string]bool
	seq                 string
}

// Has says whether the request carried the variable field id.
func (m RenewAll) Has(id string) bool { return m.given[id] }

// ReadRenewAll reads a 65.
func ReadRenewAll(r *wire.Request) (RenewAll, error) {
	f := fixed{s: r.Fixed}
	m := RenewAll{TransactionDate: f.date("transaction date"), seq: r.Seq}
	m.Institution, _ = r.Get("AO")
	m.Patron, _ = r.Get("AA")
	m.PatronPassword, _ = r.Get("AD")
	m.given = given(r)
	return m, f.err
}

// ItemRequest is 17 (item information).
type ItemRequest struct {
	TransactionDate   string
	Institution, Item string
}

// ReadItem reads a 17.
func ReadItem(r *wire.Request) (ItemRequest, error) {
	f := fixed{s: r.Fixed}
	m := ItemRequest{TransactionDate: f.date("transaction date")}
	m.Institution, _ = r.Get("AO")
	m.Item, _ = r.Get("AB")
	return m, f.err
}

// EndSession is 35 (end patron session).
type EndSession struct {
	TransactionDate     string
	Institution, Patron string
}

// ReadEndSession reads a 35.
func ReadEndSession(r *wire.Request) (EndSession, error) {
	f := fixed{s: r.Fixed}
	m := EndSession{TransactionDate: f.date("transaction date")}
	m.Institution, _ = r.Get("AO")
	m.Patron, _ = r.Get("AA")
	return m, f.err
}

func given(r *wire.Request) map[string]bool {
	g := make(map[string]bool, len(r.Fields))
	for _, f := range r.Fields {
		g[f.ID] = true
	}
	return g
}

// FeePaid is 37 (fee paid): a patron's payment at the kiosk. BV is the
// amount, CG the fee/fine it pays (absent: the patron's, oldest first),
// BK the kiosk's own id of the transaction.
type FeePaid struct {
	TransactionDate      string
	FeeType, PaymentType string
	Currency             string
	Amount               string
	Institution, Patron  string
	PatronPassword       string
	FeeID, TransactionID string
	given                map[string]bool
	seq                  string
}

// Has says whether the request carried the variable field id.
func (m FeePaid) Has(id string) bool { return m.given[id] }

// ReadFeePaid reads a 37.
func ReadFeePaid(r *wire.Request) (FeePaid, error) {
	f := fixed{s: r.Fixed}
	m := FeePaid{TransactionDate: f.date("transaction date"), FeeType: f.digits("fee type", 2), PaymentType: f.digits("payment type", 2),
		Currency: f.take(3), seq: r.Seq}
	m.Amount, _ = r.Get("BV")
	m.Institution, _ = r.Get("AO")
	m.Patron, _ = r.Get("AA")
	m.PatronPassword, _ = r.Get("AD")
	m.FeeID, _ = r.Get("CG")
	m.TransactionID, _ = r.Get("BK")
	m.given = given(r)
	return m, f.err
}
