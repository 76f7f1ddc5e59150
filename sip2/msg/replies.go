package msg

import (
	"strings"
	"time"

	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/sip2/wire"
)

// Version is the protocol version the door speaks.
const Version = "2.00"

// LoginResponse is 94.
type LoginResponse struct{ OK bool }

// Reply builds the message.
func (m LoginResponse) Reply() *wire.Reply {
	return &wire.Reply{Code: "94", Fixed: wire.Bit(m.OK)}
}

// ACSStatus is 98: what the door does, how long a kiosk should wait for an
// answer (tenths of a second) and how often it may try again.
type ACSStatus struct {
	Online, CheckIn, CheckOut, RenewalPolicy, StatusUpdate, Offline bool
	Timeout, Retries                                                int
	Date                                                            time.Time
	Institution                                                     string
	// Supported is BX: sixteen Y/N, one per request (see Supported).
	Supported string
	Message   string
}

// Reply builds the message.
func (m ACSStatus) Reply() *wire.Reply {
	r := &wire.Reply{Code: "98", Fixed: wire.YN(m.Online) + wire.YN(m.CheckIn) + wire.YN(m.CheckOut) + wire.YN(m.RenewalPolicy) +
		wire.YN(m.StatusUpdate) + wire.YN(m.Offline) + wire.Width(m.Timeout) + wire.Width(m.Retries) + wire.Date(m.Date) + Version}
	r.Add("AO", m.Institution).Add("BX", m.Supported)
	return optional(r, "AF", m.Message)
}

// BXOrder is SIP2's sixteen requests in the order of 98's BX field:
// patron status, checkout, checkin, block patron, SC/ACS status, resend,
// login, patron information, end session, fee paid, item information,
// item status update, patron enable, hold, renew, renew all.
var BXOrder = []string{"23", "11", "09", "01", "99", "97", "93", "63", "35", "37", "17", "19", "25", "15", "29", "65"}

// Supported is BX for the requests implemented.
func Supported(implemented func(code string) bool) string {
	var b strings.Builder
	for _, code := range BXOrder {
		b.WriteString(wire.YN(implemented(code)))
	}
	return b.String()
}

// CheckOutResponse is 12. The door never renews in a check-out and knows
// nothing of magnetic media ("U"); a lent item is to be desensitized. Its
// variable fields are AO, AA, AB, AJ and AH, all required (empty when
// there is nothing to say), then AF.
type CheckOutResponse struct {
	OK                  bool
	Date                time.Time
	Institution         string
	Patron, Item, Title string
	Due                 time.Time // AH, when OK
	Message             string
}

// Reply builds the message.
func (m CheckOutResponse) Reply() *wire.Reply {
	r := &wire.Reply{Code: "12", Fixed: wire.Bit(m.OK) + "N" + "U" + wire.YN(m.OK) + wire.Date(m.Date)}
	// AH is required: the due date when lent, empty when not.
	due := ""
	if m.OK {
		due = wire.Date(m.Due)
	}
	r.Add("AO", m.Institution).Add("AA", m.Patron).Add("AB", m.Item).Add("AJ", m.Title).Add("AH", due)
	return optional(r, "AF", m.Message)
}

// CheckInResponse is 10: a returned item is to be resensitized; magnetic
// media unknown ("U"), no alert.
type CheckInResponse struct {
	OK                bool
	Date              time.Time
	Institution, Item string
	Title             string
	Message           string
	// AlertType is CV, why a sorter or a book drop should set the item
	// aside: AlertHoldHere or AlertHoldElsewhere ("" for none, alert N);
	// Destination (CT) is where an item for a hold elsewhere goes.
	AlertType, Destination string
}

// The alert types (CV) of a 10, as Koha, Evergreen and edge-sip2 send
// them: the item is for a hold at this library, or at another.
const (
	AlertHoldHere      = "01"
	AlertHoldElsewhere = "02"
)

// Reply builds the message; AQ (the permanent location, required) is
// empty: the door does not know it. The alert is Y exactly when there is
// an alert type.
func (m CheckInResponse) Reply() *wire.Reply {
	r := &wire.Reply{Code: "10", Fixed: wire.Bit(m.OK) + wire.YN(m.OK) + "U" + wire.YN(m.AlertType != "") + wire.Date(m.Date)}
	r.Add("AO", m.Institution).Add("AB", m.Item).Add("AQ", "").Add("AJ", m.Title)
	optional(r, "CV", m.AlertType)
	optional(r, "CT", m.Destination)
	return optional(r, "AF", m.Message)
}

// PatronStatus is the fourteen flags of 24, 26 and 64, in SIP2's order.
type PatronStatus struct {
	ChargeDenied, RenewalDenied, RecallDenied, HoldDenied bool
	CardLost, TooManyCharged, TooManyOverdue              bool
	TooManyRenewals, TooManyClaimsReturned, TooManyLost   bool
	ExcessiveFines, ExcessiveFees, RecallOverdue          bool
	TooManyBilled                                         bool
}

// Denied is a status that grants nothing: charge, renewal, recall and
// hold privileges denied.
var Denied = PatronStatus{ChargeDenied: true, RenewalDenied: true, RecallDenied: true, HoldDenied: true}

// String is the fourteen characters: "Y" where a flag is set, a blank
// where not (as SIP2 defines them, and as Evergreen and edge-sip2 write
// them).
func (s PatronStatus) String() string {
	flags := []bool{s.ChargeDenied, s.RenewalDenied, s.RecallDenied, s.HoldDenied, s.CardLost, s.TooManyCharged,
		s.TooManyOverdue, s.TooManyRenewals, s.TooManyClaimsReturned, s.TooManyLost, s.ExcessiveFines, s.ExcessiveFees,
		s.RecallOverdue, s.TooManyBilled}
	b := []byte(strings.Repeat(" ", len(flags)))
	for i, f := range flags {
		if f {
			b[i] = 'Y'
		}
	}
	return string(b)
}

// Counts are 64's six counts of items.
type Counts struct {
	Hold, Overdue, Charged, Fine, Recall, Unavailable int
}

func (c Counts) String() string {
	return wire.Counter(c.Hold) + wire.Counter(c.Overdue) + wire.Counter(c.Charged) + wire.Counter(c.Fine) +
		wire.Counter(c.Recall) + wire.Counter(c.Unavailable)
}

// PatronResponse is 24 (patron status), 26 (patron enable) and 64
// (patron information): one layout, 64 adding its counts, its limit and
// its list of items. The variable fields come in the specification's
// order: AO, AA, AE, then 64's CB, AT, AU and AV, then BL, CQ, BH, BV
// and AF.
type PatronResponse struct {
	// Code is "24", "26" or "64".
	Code   string
	Status PatronStatus
	Date   time.Time
	// Counts are 64's counts (zeros for a patron the door could not
	// look up, as Evergreen answers).
	Counts      Counts
	Institution string
	Patron      string
	Name        string
	Valid       bool
	Message     string
	// PasswordChecked says CQ is sent, PasswordValid its value.
	PasswordChecked, PasswordValid bool
	// ChargedLimit is CB (64), sent when positive.
	ChargedLimit int
	// Charged and Overdue are the items listed (64's AU and AT), as the
	// request's summary asked; FineItems its fees/fines (64's AV).
	Charged, Overdue, FineItems []string
	// FeeAmount is what the patron owes (BV, with the currency BH), sent
	// when not "".
	FeeAmount, Currency string
}

// Reply builds the message. The language is always "000" (unknown).
func (m PatronResponse) Reply() *wire.Reply {
	fixed := m.Status.String() + "000" + wire.Date(m.Date)
	if m.Code == "64" {
		fixed += m.Counts.String()
	}
	r := &wire.Reply{Code: m.Code, Fixed: fixed}
	r.Add("AO", m.Institution).Add("AA", m.Patron).Add("AE", m.Name)
	if m.Code == "64" {
		if m.ChargedLimit > 0 {
			r.Add("CB", wire.Counter(m.ChargedLimit))
		}
		for _, b := range m.Overdue {
			r.Add("AT", b)
		}
		for _, b := range m.Charged {
			r.Add("AU", b)
		}
		for _, f := range m.FineItems {
			r.Add("AV", f)
		}
	}
	r.Add("BL", wire.YN(m.Valid))
	if m.PasswordChecked {
		r.Add("CQ", wire.YN(m.PasswordValid))
	}
	if m.FeeAmount != "" {
		optional(r, "BH", m.Currency)
		r.Add("BV", m.FeeAmount)
	}
	return optional(r, "AF", m.Message)
}

// FeePaidResponse is 38 (fee paid): whether the payment was accepted,
// and the kiosk's transaction id (BK) echoed.
type FeePaidResponse struct {
	Accepted      bool
	Date          time.Time
	Institution   string
	Patron        string
	TransactionID string
	Message       string
}

// Reply builds the message.
func (m FeePaidResponse) Reply() *wire.Reply {
	r := &wire.Reply{Code: "38", Fixed: wire.YN(m.Accepted) + wire.Date(m.Date)}
	r.Add("AO", m.Institution).Add("AA", m.Patron)
	optional(r, "BK", m.TransactionID)
	return optional(r, "AF", m.Message)
}

// ItemResponse is 18 (item information): the circulation status, no
// security marker ("00" other), fee type "01" (other), the title and, on
// loan, the due date.
type ItemResponse struct {
	Status  string // CirculationStatus
	Date    time.Time
	Item    string
	Title   string
	Due     time.Time // AH, when not zero
	Message string
}

// Reply builds the message.
func (m ItemResponse) Reply() *wire.Reply {
	r := &wire.Reply{Code: "18", Fixed: m.Status + "00" + "01" + wire.Date(m.Date)}
	r.Add("AB", m.Item).Add("AJ", m.Title)
	if !m.Due.IsZero() {
		r.Add("AH", wire.Date(m.Due))
	}
	return optional(r, "AF", m.Message)
}

// CirculationStatus is 18's circulation status of a FOLIO item status:
// 01 other, 02 on order, 03 available, 04 charged, 06 in process, 08
// waiting on the hold shelf, 10 in transit, 11 claimed returned, 12 lost,
// 13 missing.
func CirculationStatus(folio string) string {
	switch folio {
	case schemas.ItemOnOrder:
		return "02"
	case schemas.ItemAvailable:
		return "03"
	case schemas.ItemCheckedOut:
		return "04"
	case schemas.ItemInProcess, schemas.ItemInProcessNonRequestable:
		return "06"
	case schemas.ItemAwaitingPickup, schemas.ItemAwaitingDelivery:
		return "08"
	case schemas.ItemInTransit:
		return "10"
	case schemas.ItemClaimedReturned:
		return "11"
	case schemas.ItemDeclaredLost, schemas.ItemAgedToLost, schemas.ItemLostAndPaid:
		return "12"
	case schemas.ItemMissing, schemas.ItemLongMissing:
		return "13"
	}
	return "01"
}

// RenewResponse is 30: whether the item was renewed (its renewal ok
// flag the same), magnetic media and desensitize unknown ("U"), AO, AA,
// AB, AJ and AH (the new due date; empty when not renewed), all required,
// then AF.
type RenewResponse struct {
	OK                  bool
	Date                time.Time
	Institution         string
	Patron, Item, Title string
	Due                 time.Time
	Message             string
}

// Reply builds the message.
func (m RenewResponse) Reply() *wire.Reply {
	due := ""
	if m.OK {
		due = wire.Date(m.Due)
	}
	r := &wire.Reply{Code: "30", Fixed: wire.Bit(m.OK) + wire.YN(m.OK) + "U" + "U" + wire.Date(m.Date)}
	r.Add("AO", m.Institution).Add("AA", m.Patron).Add("AB", m.Item).Add("AJ", m.Title).Add("AH", due)
	return optional(r, "AF", m.Message)
}

// RenewAllResponse is 66: ok, the counts of items renewed and not, AO,
// then each item renewed (BM) and not (BN), then AF.
type RenewAllResponse struct {
	OK                  bool
	Date                time.Time
	Institution         string
	Renewed, NotRenewed []string
	Message             string
}

// Reply builds the message.
func (m RenewAllResponse) Reply() *wire.Reply {
	r := &wire.Reply{Code: "66", Fixed: wire.Bit(m.OK) + wire.Counter(len(m.Renewed)) + wire.Counter(len(m.NotRenewed)) + wire.Date(m.Date)}
	r.Add("AO", m.Institution)
	for _, b := range m.Renewed {
		r.Add("BM", b)
	}
	for _, b := range m.NotRenewed {
		r.Add("BN", b)
	}
	return optional(r, "AF", m.Message)
}

// EndSessionResponse is 36.
type EndSessionResponse struct {
	End                 bool
	Date                time.Time
	Institution, Patron string
	Message             string
}

// Reply builds the message.
func (m EndSessionResponse) Reply() *wire.Reply {
	r := &wire.Reply{Code: "36", Fixed: wire.YN(m.End) + wire.Date(m.Date)}
	r.Add("AO", m.Institution).Add("AA", m.Patron)
	return optional(r, "AF", m.Message)
}

// Refusal is the reply to a request the door does not carry out (not
// implemented, malformed, before a login): each request's own answer,
// saying no, with a screen message. ok is false for a code that is not a
// request.
func Refusal(code string, date time.Time, institution, message string) (r *wire.Reply, ok bool) {
	d := wire.Date(date)
	switch code {
	case "93":
		return LoginResponse{}.Reply(), true
	case "11":
		return CheckOutResponse{Date: date, Institution: institution, Message: message}.Reply(), true
	case "09":
		return CheckInResponse{Date: date, Institution: institution, Message: message}.Reply(), true
	case "35":
		return EndSessionResponse{Date: date, Institution: institution, Message: message}.Reply(), true
	case "23", "01":
		return PatronResponse{Code: "24", Status: Denied, Date: date, Institution: institution, Message: message}.Reply(), true
	case "25":
		return PatronResponse{Code: "26", Status: Denied, Date: date, Institution: institution, Message: message}.Reply(), true
	case "63":
		return PatronResponse{Code: "64", Status: Denied, Date: date, Institution: institution, Message: message}.Reply(), true
	case "17":
		return ItemResponse{Status: "01", Date: date, Message: message}.Reply(), true
	case "19":
		return (&wire.Reply{Code: "20", Fixed: "0" + d}).Add("AB", "").Add("AF", message), true
	case "37":
		return FeePaidResponse{Date: date, Institution: institution, Message: message}.Reply(), true
	case "15":
		return (&wire.Reply{Code: "16", Fixed: "0N" + d}).Add("AO", institution).Add("AA", "").Add("AF", message), true
	case "29":
		return RenewResponse{Date: date, Institution: institution, Message: message}.Reply(), true
	case "65":
		return RenewAllResponse{Date: date, Institution: institution, Message: message}.Reply(), true
	}
	return nil, false
}

func optional(r *wire.Reply, id, value string) *wire.Reply {
	if value != "" {
		r.Add(id, value)
	}
	return r
}
