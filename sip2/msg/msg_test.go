package msg

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/checkoutlock/sip2/wire"
)

func parse(t *testing.T, s string) *wire.Request {
	t.Helper()
	r, err := wire.Parse([]byte(s), wire.IBM850, '|')
	if err != nil {
		t.Fatalf("parse %q: %v", s, err)
	}
	return r
}

func encode(t *testing.T, r *wire.Reply) string {
	t.Helper()
	b, err := r.Encode(wire.IBM850, '|', false, "")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(string(b), "\r")
}

// TestRequestsFixedFields reads every fixed field of every request the
// door carries out.
func TestRequestsFixedFields(t *testing.T) {
	t.Parallel()
	login, err := ReadLogin(parse(t, "9300CNkiosk|COsecret|CPdesk|"))
	if err != nil || login != (Login{UIDAlgorithm: "0", PWDAlgorithm: "0", User: "kiosk", Password: "secret", Location: "desk"}) {
		t.Errorf("93: %+v %v", login, err)
	}
	st, err := ReadSCStatus(parse(t, "9900802.00"))
	if err != nil || st != (SCStatus{Status: "0", MaxPrintWidth: "080", Version: "2.00"}) {
		t.Errorf("99: %+v %v", st, err)
	}
	co, err := ReadCheckOut(parse(t, "11YN20261125    105317                  AOdiku|AA1004|ABbook-101|AC|AD4711|"))
	if err != nil || !co.RenewalPolicy || co.NoBlock || co.TransactionDate != "20261125    105317" ||
		co.NoBlockDueDate != strings.Repeat(" ", 18) || co.Institution != "diku" || co.Patron != "1004" || co.Item != "book-101" ||
		co.PatronPassword != "4711" || !co.Has("AD") || co.Has("BO") {
		t.Errorf("11: %+v %v", co, err)
	}
	ci, err := ReadCheckIn(parse(t, "09Y20261125    10531720261125   Z105400APkiosk-1|AOdiku|ABbook-101|AC|"))
	if err != nil || !ci.NoBlock || ci.TransactionDate != "20261125    105317" || ci.ReturnDate != "20261125   Z105400" ||
		ci.Location != "kiosk-1" || ci.Institution != "diku" || ci.Item != "book-101" {
		t.Errorf("09: %+v %v", ci, err)
	}
	ps, err := ReadPatron(parse(t, "2300120261125    105317AOdiku|AA1004|AC|AD4711|"))
	if err != nil || ps.Information || ps.Language != "001" || ps.TransactionDate != "20261125    105317" || ps.Patron != "1004" ||
		ps.PatronPassword != "4711" || ps.Summary != (Summary{}) {
		t.Errorf("23: %+v %v", ps, err)
	}
	for i, want := range []Summary{{Hold: true}, {Overdue: true}, {Charged: true}, {Fine: true}, {Recall: true}, {Unavailable: true}} {
		summary := []byte(strings.Repeat(" ", 10))
		summary[i] = 'Y'
		pi, err := ReadPatron(parse(t, "63001"+"20261125    105317"+string(summary)+"AOdiku|AA1004|"))
		if err != nil || !pi.Information || pi.Summary != want || pi.Has("AD") {
			t.Errorf("63 summary %q: %+v %v", summary, pi, err)
		}
	}
	it, err := ReadItem(parse(t, "1720261125    105317AOdiku|ABbook-101|"))
	if err != nil || it != (ItemRequest{TransactionDate: "20261125    105317", Institution: "diku", Item: "book-101"}) {
		t.Errorf("17: %+v %v", it, err)
	}
	es, err := ReadEndSession(parse(t, "3520261125    105317AOdiku|AA1004|"))
	if err != nil || es != (EndSession{TransactionDate: "20261125    105317", Institution: "diku", Patron: "1004"}) {
		t.Errorf("35: %+v %v", es, err)
	}
}

// TestMalformedFixedFields: a flag that is not Y or N, a date that is not
// one, a count that is not digits, a summary of other letters.
func TestMalformedFixedFields(t *testing.T) {
	t.Parallel()
	date := "20261125    105317"
	for _, c := range []struct {
		message string
		read    func(*wire.Request) error
	}{
		{"11XN" + date + date + "AA1|AB2|", func(r *wire.Request) error { _, err := ReadCheckOut(r); return err }},
		{"11Y?" + date + date + "AA1|AB2|", func(r *wire.Request) error { _, err := ReadCheckOut(r); return err }},
		{"11YN2026112X    105317" + date + "AA1|AB2|", func(r *wire.Request) error { _, err := ReadCheckOut(r); return err }},
		{"11YN" + date + "20261332    105317AA1|AB2|", func(r *wire.Request) error { _, err := ReadCheckOut(r); return err }},
		{"09Q" + date + date + "AB2|", func(r *wire.Request) error { _, err := ReadCheckIn(r); return err }},
		{"09N" + date + "2026-11-25  105317AB2|", func(r *wire.Request) error { _, err := ReadCheckIn(r); return err }},
		{"23EN1" + date + "AA1|", func(r *wire.Request) error { _, err := ReadPatron(r); return err }},
		{"63001" + date + "  X       AA1|", func(r *wire.Request) error { _, err := ReadPatron(r); return err }},
		{"1720261125    25asdfAB1|", func(r *wire.Request) error { _, err := ReadItem(r); return err }},
		{"99A0802.00", func(r *wire.Request) error { _, err := ReadSCStatus(r); return err }},
		{"3520261125    1053x7AA1|", func(r *wire.Request) error { _, err := ReadEndSession(r); return err }},
	} {
		if err := c.read(parse(t, c.message)); !errors.Is(err, ErrFixedField) {
			t.Errorf("%q: %v, want ErrFixedField", c.message, err)
		}
	}
	// Blanks where a kiosk has nothing to say are not malformed.
	blank := strings.Repeat(" ", 18)
	if _, err := ReadCheckOut(parse(t, "11  "+blank+blank+"AA1|AB2|")); err != nil {
		t.Errorf("blank flags and dates: %v", err)
	}
	if _, err := ReadPatron(parse(t, "63   "+blank+strings.Repeat(" ", 10)+"AA1|")); err != nil {
		t.Errorf("blank language, date and summary: %v", err)
	}
}

// TestReplyLayouts writes every reply the door sends, field by field.
func TestReplyLayouts(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 25, 10, 53, 17, 0, time.Local)
	due := time.Date(2026, 12, 16, 23, 59, 0, 0, time.Local)
	d := "20261125    105317"
	for _, c := range []struct {
		name  string
		reply *wire.Reply
		want  string
	}{
		{"94 ok", LoginResponse{OK: true}.Reply(), "941"},
		{"94 refused", LoginResponse{}.Reply(), "940"},
		{"98", ACSStatus{Online: true, CheckIn: true, CheckOut: true, Timeout: 110, Retries: 3, Date: at, Institution: "diku",
			Supported: "YYYNYYYYYNYNNNYY"}.Reply(), "98YYYNNN110003" + d + "2.00AOdiku|BXYYYNYYYYYNYNNNYY|"},
		{"98 every flag", ACSStatus{RenewalPolicy: true, StatusUpdate: true, Offline: true, Timeout: 5000, Retries: -1, Date: at,
			Message: "m"}.Reply(), "98NNNYYY999000" + d + "2.00AO|BX|AFm|"},
		{"12 lent", CheckOutResponse{OK: true, Date: at, Institution: "diku", Patron: "1004", Item: "book-101", Title: "Middlemarch",
			Due: due}.Reply(), "121NUY" + d + "AOdiku|AA1004|ABbook-101|AJMiddlemarch|AH20261216    235900|"},
		{"12 refused", CheckOutResponse{Date: at, Institution: "diku", Patron: "1005", Item: "book-102", Due: due,
			Message: "Patron blocked"}.Reply(), "120NUN" + d + "AOdiku|AA1005|ABbook-102|AJ|AH|AFPatron blocked|"},
		{"10 returned", CheckInResponse{OK: true, Date: at, Institution: "diku", Item: "book-101", Title: "Middlemarch",
			Message: "Item checked in"}.Reply(), "101YUN" + d + "AOdiku|ABbook-101|AQ|AJMiddlemarch|AFItem checked in|"},
		{"10 refused", CheckInResponse{Date: at, Institution: "diku", Item: "x"}.Reply(), "100NUN" + d + "AOdiku|ABx|AQ|AJ|"},
		{"24 may borrow", PatronResponse{Code: "24", Date: at, Institution: "diku", Patron: "1001", Name: "Alice Archer", Valid: true}.Reply(),
			"24              000" + d + "AOdiku|AA1001|AEAlice Archer|BLY|"},
		{"24 at the limit", PatronResponse{Code: "24", Status: PatronStatus{ChargeDenied: true, RenewalDenied: true, RecallDenied: true,
			HoldDenied: true, TooManyCharged: true}, Date: at, Patron: "1001", Valid: true, Message: "limit",
			PasswordChecked: true}.Reply(), "24YYYY Y        000" + d + "AO|AA1001|AE|BLY|CQN|AFlimit|"},
		{"24 every flag", PatronResponse{Code: "24", Status: PatronStatus{CardLost: true, TooManyOverdue: true, TooManyRenewals: true,
			TooManyClaimsReturned: true, TooManyLost: true, ExcessiveFines: true, ExcessiveFees: true, RecallOverdue: true,
			TooManyBilled: true}, Date: at}.Reply(), "24    Y YYYYYYYY000" + d + "AO|AA|AE|BLN|"},
		{"64 with items", PatronResponse{Code: "64", Date: at, Counts: Counts{Hold: 1, Overdue: 2, Charged: 3, Fine: 4, Recall: 5,
			Unavailable: 12345}, Institution: "diku", Patron: "1004", Name: "Dave Dunn", Valid: true, PasswordChecked: true,
			PasswordValid: true, ChargedLimit: 5, Charged: []string{"book-101", "dvd-1"}, Overdue: []string{"late-1"}}.Reply(),
			"64              000" + d + "000100020003000400059999" + "AOdiku|AA1004|AEDave Dunn|CB0005|ATlate-1|AUbook-101|AUdvd-1|BLY|CQY|"},
		{"64 with fines", PatronResponse{Code: "64", Status: PatronStatus{ExcessiveFines: true, ExcessiveFees: true}, Date: at,
			Counts: Counts{Fine: 2}, Institution: "diku", Patron: "1004", Valid: true, PasswordChecked: true, PasswordValid: true,
			FineItems: []string{"f1 15.00 USD Overdue fine: Middlemarch"}, FeeAmount: "20.00", Currency: "USD"}.Reply(),
			"64          YY  000" + d + "000000000000000200000000" + "AOdiku|AA1004|AE|AVf1 15.00 USD Overdue fine: Middlemarch|BLY|CQY|BHUSD|BV20.00|"},
		{"24 owing", PatronResponse{Code: "24", Date: at, Patron: "1004", Valid: true, FeeAmount: "0.00", Currency: "EUR"}.Reply(),
			"24              000" + d + "AO|AA1004|AE|BLY|BHEUR|BV0.00|"},
		{"38 paid", FeePaidResponse{Accepted: true, Date: at, Institution: "diku", Patron: "1004", TransactionID: "t-17",
			Message: "Paid 6.00 USD; 9.00 USD remains"}.Reply(), "38Y" + d + "AOdiku|AA1004|BKt-17|AFPaid 6.00 USD; 9.00 USD remains|"},
		{"38 refused", FeePaidResponse{Date: at, Patron: "1004"}.Reply(), "38N" + d + "AO|AA1004|"},
		{"64 unknown patron", PatronResponse{Code: "64", Status: Denied, Date: at, Patron: "x", Message: "No patron"}.Reply(),
			"64YYYY          000" + d + strings.Repeat("0", 24) + "AO|AAx|AE|BLN|AFNo patron|"},
		{"18 on loan", ItemResponse{Status: CirculationStatus("Checked out"), Date: at, Item: "book-101", Title: "Middlemarch",
			Due: due}.Reply(), "18040001" + d + "ABbook-101|AJMiddlemarch|AH20261216    235900|"},
		{"18 unknown", ItemResponse{Status: "01", Date: at, Item: "x", Message: "No item"}.Reply(), "18010001" + d + "ABx|AJ|AFNo item|"},
		{"36", EndSessionResponse{End: true, Date: at, Institution: "diku", Patron: "1004"}.Reply(), "36Y" + d + "AOdiku|AA1004|"},
		{"30 renewed", RenewResponse{OK: true, Date: at, Institution: "diku", Patron: "1004", Item: "book-101", Title: "Middlemarch",
			Due: due}.Reply(), "301YUU" + d + "AOdiku|AA1004|ABbook-101|AJMiddlemarch|AH20261216    235900|"},
		{"30 refused", RenewResponse{Date: at, Institution: "diku", Patron: "1004", Item: "book-101", Due: due,
			Message: "loan is not renewable"}.Reply(), "300NUU" + d + "AOdiku|AA1004|ABbook-101|AJ|AH|AFloan is not renewable|"},
		{"66", RenewAllResponse{OK: true, Date: at, Institution: "diku", Renewed: []string{"a", "b"}, NotRenewed: []string{"c"},
			Message: "c: loan is not renewable"}.Reply(), "6610002" + "0001" + d + "AOdiku|BMa|BMb|BNc|AFc: loan is not renewable|"},
	} {
		if got := encode(t, c.reply); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
}

// TestRefusals: every request of SIP2 2.00 but 97 and 96 has its own
// negative reply, of its reply's code, carrying the screen message.
func TestRefusals(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 25, 10, 53, 17, 0, time.Local)
	replyOf := map[string]string{"93": "94", "11": "12", "09": "10", "35": "36", "23": "24", "01": "24", "25": "26", "63": "64",
		"17": "18", "19": "20", "37": "38", "15": "16", "29": "30", "65": "66"}
	for _, code := range BXOrder {
		r, ok := Refusal(code, at, "diku", "Not here")
		want, isRequest := replyOf[code]
		if code == "99" || code == "97" {
			// 99 is answered with the status (the door's own), 97 with
			// the last reply.
			continue
		}
		if ok != isRequest || (ok && r.Code != want) {
			t.Errorf("Refusal(%s) = %+v, %v; want %s", code, r, ok, want)
			continue
		}
		if code == "93" {
			continue // 94 has no screen message
		}
		if got := encode(t, r); !strings.HasSuffix(got, "|AFNot here|") {
			t.Errorf("Refusal(%s) = %q, want the screen message last", code, got)
		}
	}
	if _, ok := Refusal("96", at, "", ""); ok {
		t.Error("96 is not a request with a refusal")
	}
}

func TestCirculationStatus(t *testing.T) {
	t.Parallel()
	for folio, want := range map[string]string{"On order": "02", "Available": "03", "Checked out": "04", "In process": "06",
		"In process (non-requestable)": "06", "Awaiting pickup": "08", "Awaiting delivery": "08", "In transit": "10",
		"Claimed returned": "11", "Declared lost": "12", "Aged to lost": "12", "Lost and paid": "12", "Missing": "13",
		"Long missing": "13", "Withdrawn": "01", "": "01"} {
		if got := CirculationStatus(folio); got != want {
			t.Errorf("%q: %s, want %s", folio, got, want)
		}
	}
}

// TestItemWindows: 63's BP and BQ pick items of a list counting from 1;
// absent, the whole list; past its end, what there is.
func TestItemWindows(t *testing.T) {
	t.Parallel()
	list := []string{"a", "b", "c", "d"}
	for _, c := range []struct {
		start, end int
		want       string
	}{
		{0, 0, "abcd"}, {2, 3, "bc"}, {1, 1, "a"}, {3, 0, "cd"}, {0, 2, "ab"}, {3, 9, "cd"}, {5, 6, ""}, {3, 2, ""},
	} {
		if got := strings.Join(Window(list, c.start, c.end), ""); got != c.want {
			t.Errorf("Window(%d, %d) = %q, want %q", c.start, c.end, got, c.want)
		}
	}
	pi, err := ReadPatron(parse(t, "63001"+"20261125    105317"+"  Y       "+"AOdiku|AA1004|BP2|BQ3|"))
	if err != nil || pi.Start != 2 || pi.End != 3 {
		t.Errorf("BP2 BQ3: %+v %v", pi, err)
	}
	var fe *FieldError
	if _, err := ReadPatron(parse(t, "63001"+"20261125    105317"+"  Y       "+"AA1004|BPtwo|")); !errors.As(err, &fe) || fe.ID != "BP" || fe.Value != "two" {
		t.Errorf("BPtwo: %v, want BP malformed", err)
	}
	if _, err := ReadPatron(parse(t, "63001"+"20261125    105317"+"  Y       "+"AA1004|BP1|BQ-3|")); !errors.As(err, &fe) || fe.ID != "BQ" || fe.Value != "-3" {
		t.Errorf("BQ-3: %v, want BQ malformed", err)
	}
}
