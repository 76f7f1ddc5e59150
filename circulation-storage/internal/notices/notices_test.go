package notices

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/checkoutlock/schemas"
)

// TestWhenANoticeIsDue: a notice upon its event is due at the change; one
// before or after a loan's due date by its sendBy, from the due date the
// change wrote, on every change that sets it (a check-out, a renewal, a
// recall, a librarian's change, a due date changed) but a return; a
// librarian's change told upon it, and only it; one before a hold shelf's
// expiration from the change that put the request there; none for a change
// of another event.
func TestWhenANoticeIsDue(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	loan := json.RawMessage(`{"dueDate":"2026-12-14T23:59:59.000Z"}`)
	shelf := json.RawMessage(`{"holdShelfExpirationDate":"2026-12-03T21:00:00.000Z"}`)
	shelved := json.RawMessage(`{"status":"Open - Awaiting pickup","holdShelfExpirationDate":"2026-12-03T21:00:00.000Z"}`)
	waiting := json.RawMessage(`{"status":"Open - Not yet filled","requestExpirationDate":"2026-12-10T12:00:00.000Z"}`)
	due := time.Date(2026, 12, 14, 23, 59, 59, 0, time.UTC)
	notice := func(when, how string, by *Period) Notice {
		var n Notice
		n.SendOptions.SendWhen, n.SendOptions.SendHow, n.SendOptions.SendBy = when, how, by
		return n
	}
	day := &Period{Duration: 1, IntervalID: "Days"}
	for _, c := range []struct {
		name   string
		notice Notice
		change change
		want   time.Time
		basis  string
	}{
		{"a check-out receipt", notice(schemas.NoticeCheckOut, "", nil), change{kind: "loan", event: schemas.NoticeCheckOut, record: loan, at: at}, at, ""},
		{"no receipt on a renewal", notice(schemas.NoticeCheckOut, "", nil), change{kind: "loan", event: schemas.NoticeRenewed, record: loan, at: at}, time.Time{}, ""},
		{"at the due date", notice(schemas.NoticeDueDate, schemas.NoticeUponAt, nil), change{kind: "loan", event: schemas.NoticeCheckOut, record: loan, at: at}, due, "2026-12-14T23:59:59.000Z"},
		{"a day before, renewed", notice(schemas.NoticeDueDate, schemas.NoticeBefore, day), change{kind: "loan", event: schemas.NoticeRenewed, record: loan, at: at}, due.AddDate(0, 0, -1), "2026-12-14T23:59:59.000Z"},
		{"a day after, recalled", notice(schemas.NoticeDueDate, schemas.NoticeAfter, day), change{kind: "loan", event: schemas.NoticeItemRecalled, record: loan, at: at}, due.AddDate(0, 0, 1), "2026-12-14T23:59:59.000Z"},
		{"moved", notice(schemas.NoticeDueDate, schemas.NoticeBefore, day), change{kind: "loan", event: eventDueDateChanged, record: loan, at: at}, due.AddDate(0, 0, -1), "2026-12-14T23:59:59.000Z"},
		{"changed by a librarian", notice(schemas.NoticeDueDate, schemas.NoticeBefore, day), change{kind: "loan", event: schemas.NoticeManualDueDateChange, record: loan, at: at}, due.AddDate(0, 0, -1), "2026-12-14T23:59:59.000Z"},
		{"a librarian's change told", notice(schemas.NoticeManualDueDateChange, "", nil), change{kind: "loan", event: schemas.NoticeManualDueDateChange, record: loan, at: at}, at, ""},
		{"not told on another move", notice(schemas.NoticeManualDueDateChange, "", nil), change{kind: "loan", event: eventDueDateChanged, record: loan, at: at}, time.Time{}, ""},
		{"returned", notice(schemas.NoticeDueDate, schemas.NoticeUponAt, nil), change{kind: "loan", event: schemas.NoticeCheckIn, record: loan, at: at}, time.Time{}, ""},
		{"hold ready", notice(schemas.NoticeAvailable, schemas.NoticeUponAt, nil), change{kind: "request", event: schemas.NoticeAvailable, record: shelf, at: at}, at, ""},
		{"a day before the hold shelf expires", notice(schemas.NoticeHoldExpiration, schemas.NoticeBefore, day), change{kind: "request", event: schemas.NoticeAvailable, record: shelf, at: at}, time.Date(2026, 12, 2, 21, 0, 0, 0, time.UTC), "2026-12-03T21:00:00.000Z"},
		{"the hold shelf expired", notice(schemas.NoticeHoldExpiration, schemas.NoticeUponAt, nil), change{kind: "request", event: schemas.NoticeHoldExpiration, record: shelf, at: at}, at, ""},
		{"not before a hold placed", notice(schemas.NoticeHoldExpiration, schemas.NoticeBefore, day), change{kind: "request", event: schemas.NoticeHoldRequest, record: shelf, at: at}, time.Time{}, ""},
		{"the hold shelf's date moved", notice(schemas.NoticeHoldExpiration, schemas.NoticeBefore, day), change{kind: "request", event: eventRequestDatesChanged, record: shelved, at: at}, time.Date(2026, 12, 2, 21, 0, 0, 0, time.UTC), "2026-12-03T21:00:00.000Z"},
		{"not from a date moved while not on the shelf", notice(schemas.NoticeHoldExpiration, schemas.NoticeBefore, day), change{kind: "request", event: eventRequestDatesChanged, record: shelf, at: at}, time.Time{}, ""},
		{"the request's expiration moved", notice(schemas.NoticeRequestExpiration, schemas.NoticeBefore, day), change{kind: "request", event: eventRequestDatesChanged, record: waiting, at: at}, time.Date(2026, 12, 9, 12, 0, 0, 0, time.UTC), "2026-12-10T12:00:00.000Z"},
		{"a request placed, before its expiration", notice(schemas.NoticeRequestExpiration, schemas.NoticeBefore, day), change{kind: "request", event: schemas.NoticeRecallRequest, record: waiting, at: at}, time.Date(2026, 12, 9, 12, 0, 0, 0, time.UTC), "2026-12-10T12:00:00.000Z"},
	} {
		got, basis, ok := when(c.notice, c.change)
		if ok != !c.want.IsZero() || !got.Equal(c.want) || basis != c.basis {
			t.Errorf("%s: due %v (%v) from %q, want %v from %q", c.name, got, ok, basis, c.want, c.basis)
		}
	}
}

// TestANoticeIsWrittenWithFOLIOsTokens: the template's English text, its
// tokens filled in from the patron, the item, the loan and the request,
// dates in the tenant's zone; HTML escapes what the tokens insert, plain
// text does not; a template that does not exist is an error.
func TestANoticeIsWrittenWithFOLIOsTokens(t *testing.T) {
	t.Parallel()
	zone, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Skip("no time zone data:", err)
	}
	data := tokens(zone, json.RawMessage(`{"barcode":"1002","personal":{"firstName":"Bob","lastName":"Baker & Sons","email":"bob@library.test"}}`),
		json.RawMessage(`{"loanDate":"2026-11-30T09:00:00.000Z","dueDate":"2026-12-14T22:59:59.000Z","renewalCount":2}`), nil,
		json.RawMessage(`{"title":"Middlemarch","barcode":"book-151","itemLevelCallNumber":"PR4662"}`), "book", "Can circulate", "")
	plain := json.RawMessage(`{"outputFormats":["text/plain"],"localizedTemplates":{"de":{"header":"x","body":"y"},
		"en":{"header":"Due: {{item.title}}","body":"{{user.firstName}} {{user.lastName}}: {{item.barcode}} ({{item.callNumber}}, {{item.materialType}}) due {{loan.dueDate}}, renewed {{loan.numberOfRenewalsTaken}}"}}}`)
	m, err := render(plain, data)
	if err != nil {
		t.Fatal(err)
	}
	if want := "Bob Baker & Sons: book-151 (PR4662, book) due 2026-12-14 23:59 CET, renewed 2"; m.Subject != "Due: Middlemarch" || m.Body != want || m.HTML {
		t.Errorf("plain: %+v, want %q", m, want)
	}
	html := json.RawMessage(`{"outputFormats":["text/html"],"localizedTemplates":{"en":{"header":"Due","body":"<p>{{user.lastName}}</p>"}}}`)
	if m, err := render(html, data); err != nil || m.Body != "<p>Baker &amp; Sons</p>" || !m.HTML {
		t.Errorf("html: %+v %v", m, err)
	}
	if _, err := render(nil, data); err == nil {
		t.Error("a template that does not exist rendered")
	}
}

// TestADueDateNoticeIsNotSentForALostOrClaimedItem: a notice before, at
// or after an open loan's due date is still due while its item is
// checked out, and not once the item is declared lost, aged to lost or
// claimed returned, as mod-circulation finds such notices irrelevant.
func TestADueDateNoticeIsNotSentForALostOrClaimedItem(t *testing.T) {
	t.Parallel()
	soon := schemas.FormatTime(time.Now().Add(time.Hour))
	past := schemas.FormatTime(time.Now().Add(-time.Hour))
	loan := func(due string) json.RawMessage {
		return json.RawMessage(`{"status":{"name":"Open"},"dueDate":"` + due + `"}`)
	}
	item := func(status string) json.RawMessage {
		return json.RawMessage(`{"status":{"name":"` + status + `"}}`)
	}
	for _, timing := range []string{schemas.NoticeBefore, schemas.NoticeUponAt, schemas.NoticeAfter} {
		var n sent
		n.TriggeringEvent, n.NoticeConfig.Timing, n.BasisDate = schemas.NoticeDueDate, timing, soon
		due := loan(soon)
		if timing == schemas.NoticeAfter {
			n.BasisDate, due = past, loan(past)
		}
		for status, want := range map[string]bool{schemas.ItemCheckedOut: true, schemas.ItemDeclaredLost: false,
			schemas.ItemAgedToLost: false, schemas.ItemClaimedReturned: false} {
			if got := stillDue(n, due, nil, item(status)); got != want {
				t.Errorf("%s the due date, the item %s: still due %v, want %v", timing, status, got, want)
			}
		}
	}
}

// TestANoticeBeforeADatePassedIsNotSent: a notice before a loan's due
// date, due while the loan is open and due then, is still due; one whose
// due date has passed (sent late) is not, nor one whose loan moved or
// closed; a notice upon an event always is.
func TestANoticeBeforeADatePassedIsNotSent(t *testing.T) {
	t.Parallel()
	soon := schemas.FormatTime(time.Now().Add(time.Hour))
	past := schemas.FormatTime(time.Now().Add(-time.Hour))
	before := func(basis string) sent {
		var n sent
		n.TriggeringEvent, n.BasisDate, n.NoticeConfig.Timing = schemas.NoticeDueDate, basis, schemas.NoticeBefore
		return n
	}
	open := func(due string) json.RawMessage {
		return json.RawMessage(`{"status":{"name":"Open"},"dueDate":"` + due + `"}`)
	}
	after := before(past)
	after.NoticeConfig.Timing = schemas.NoticeAfter
	for _, c := range []struct {
		name string
		n    sent
		loan json.RawMessage
		want bool
	}{
		{"due soon", before(soon), open(soon), true},
		{"its date passed", before(past), open(past), false},
		{"its due date moved", before(soon), open(past), false},
		{"returned", before(soon), json.RawMessage(`{"status":{"name":"Closed"},"dueDate":"` + soon + `"}`), false},
		{"overdue", after, open(past), true},
		{"upon check-out", sent{TriggeringEvent: schemas.NoticeCheckOut}, nil, true},
	} {
		if got := stillDue(c.n, c.loan, nil, nil); got != c.want {
			t.Errorf("%s: still due %v, want %v", c.name, got, c.want)
		}
	}
}
