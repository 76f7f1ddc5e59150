package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/checkoutlock/integration-tests/harness"
	"github.com/checkoutlock/schemas"
)

// noticeCluster starts an SMTP server (mailpit) and a cluster of n
// circulation and n storage instances sending their notices to it every
// 50 ms, with env besides. The cluster has a database of its own: a
// notice sender sends the notices of every tenant on its database, so two
// tests' senders on one database would mail each other's patrons.
func noticeCluster(t *testing.T, n int, env ...string) (*harness.Mailpit, *harness.Cluster) {
	t.Helper()
	mail := harness.StartMailpit(t)
	c := harness.NewCluster(t, harness.Options{Circulations: n, Storages: n, FeatureOn: true, DatabaseURL: harness.FreshDatabase(t),
		StorageEnv: append(append(mail.Env(), "NOTICE_INTERVAL=50ms"), env...)})
	return mail, c
}

// scheduledNotice is a scheduled notice as storage answers it.
type scheduledNotice struct {
	ID, LoanID, RequestID, RecipientUserID, TriggeringEvent, NextRunTime, BasisDate, Status, LastError, SentDate, MessageID string
	Attempts, Sent                                                                                                          int
}

// noticesOf lists the scheduled notices matching query (e.g. loanId=…),
// as storage serves them.
func noticesOf(t *testing.T, c *harness.Cluster, query string) []scheduledNotice {
	t.Helper()
	var out struct {
		ScheduledNotices []scheduledNotice
		TotalRecords     int
	}
	c.Do(c.Storage, "GET", "/scheduled-notice-storage/scheduled-notices?limit=1000&"+query, nil).Want(t, http.StatusOK).Decode(t, &out)
	return out.ScheduledNotices
}

// noticeTemplate posts a template whose subject and body are header and
// body, in English, and answers its id.
func noticeTemplate(t *testing.T, c *harness.Cluster, name, header, body string) string {
	t.Helper()
	var out struct{ ID string }
	c.Do(c.Storage, "POST", "/templates", map[string]any{"name": name, "active": true, "category": "Loan", "templateResolver": "mustache",
		"outputFormats": []string{"text/plain"}, "localizedTemplates": map[string]any{"en": map[string]any{"header": header, "body": body}}}).
		Want(t, http.StatusCreated).Decode(t, &out)
	return out.ID
}

// noticeOn is a notice policy's email notice of template on the event
// sendWhen, sent as sendHow says (by sendBy when not Upon At).
func noticeOn(template, sendWhen, sendHow string, sendBy map[string]any) map[string]any {
	options := map[string]any{"sendWhen": sendWhen, "sendHow": sendHow}
	if sendBy != nil {
		options["sendBy"] = sendBy
	}
	return map[string]any{"name": sendWhen, "templateId": template, "format": "Email", "frequency": "One time", "realTime": true,
		"sendOptions": options}
}

// useNoticePolicy posts a notice policy of the loan and request notices
// and makes it the rules' fallback, beside the library's loan policy
// (loanPolicy), and answers its id.
func useNoticePolicy(t *testing.T, c *harness.Cluster, loanPolicy string, loanNotices, requestNotices []map[string]any) string {
	t.Helper()
	var out struct{ ID string }
	policy := map[string]any{"name": "Notices", "active": true}
	if loanNotices != nil {
		policy["loanNotices"] = loanNotices
	}
	if requestNotices != nil {
		policy["requestNotices"] = requestNotices
	}
	c.Do(c.Storage, "POST", "/patron-notice-policy-storage/patron-notice-policies", policy).Want(t, http.StatusCreated).Decode(t, &out)
	c.Do(c.Storage, "PUT", "/circulation-rules-storage", map[string]any{"fallbackLoanPolicyId": loanPolicy,
		"fallbackNoticePolicyId": out.ID, "rules": []any{}}).Want(t, http.StatusNoContent)
	return out.ID
}

// useReceipts gives the library's loans a receipt on check-out: a
// template "Checked out: <the item's barcode>", "Due <the due date>.", in
// the notice policy useNoticePolicy makes the rules' fallback.
func useReceipts(t *testing.T, c *harness.Cluster, lib harness.Library) {
	t.Helper()
	receipt := noticeTemplate(t, c, "Receipt", "Checked out: {{item.barcode}}", "Due {{loan.dueDate}}.")
	useNoticePolicy(t, c, lib.PolicyID, []map[string]any{noticeOn(receipt, schemas.NoticeCheckOut, schemas.NoticeUponAt, nil)}, nil)
}

// giveEmail sets the patron's (barcode) email address, and first name,
// and answers the address.
func giveEmail(t *testing.T, c *harness.Cluster, barcode string) string {
	t.Helper()
	id := c.IDOf(t, "/users", "users", barcode)
	var doc map[string]any
	c.Do(c.Storage, "GET", "/users/"+id, nil).Want(t, http.StatusOK).Decode(t, &doc)
	delete(doc, "metadata")
	address := strings.ToLower(barcode) + "@patrons.test"
	personal := doc["personal"].(map[string]any)
	personal["email"], personal["firstName"] = address, "Reader"
	c.Do(c.Storage, "PUT", "/users/"+id, doc).Want(t, http.StatusNoContent)
	return address
}

// noticeRounds is how many rounds of the notice sender storage has led
// (patron_notice_rounds_total), read from its metrics.
func noticeRounds(t *testing.T, c *harness.Cluster, p *harness.Process) float64 {
	t.Helper()
	var total float64
	for _, result := range []string{"done", "failed"} {
		v, _ := c.Metric(t, p, `patron_notice_rounds_total{result="`+result+`"}`)
		total += v
	}
	return total
}

// waitRounds waits until storage has led n more rounds of the notice
// sender than it had (from), so that what a round would do has been done.
func waitRounds(t *testing.T, c *harness.Cluster, p *harness.Process, from float64, n int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d rounds of the notice sender", n), func() bool { return noticeRounds(t, c, p) >= from+float64(n) })
}

// TestAHoldMadeReadySendsOneNotice: a book with a hold waiting, checked
// in at the hold's pickup desk, goes on the hold shelf, and its
// requester is sent one mail (the notice policy's Available notice,
// FOLIO's "hold ready for pickup") through a real SMTP server: to their
// address, the template's tokens filled in (their name, the title, the
// barcode, the pickup desk, the hold shelf's expiration), with the
// Message-ID storage records as the notice's; rounds after, still one.
// The book's owner, whose loan the check-in closed, is sent nothing (the
// policy has no check-in notice), and the requester's notice is Sent.
func TestAHoldMadeReadySendsOneNotice(t *testing.T) {
	t.Parallel()
	mail, c := noticeCluster(t, 1)
	lib := c.SetupLibrary(2, 1, 0)
	owner, requester, book := lib.Patrons[0], lib.Patrons[1], lib.Items[0][0]
	address := giveEmail(t, c, requester)
	giveEmail(t, c, owner)
	keepHolds(t, c, harness.ServicePoint, 3, "Days")
	ready := noticeTemplate(t, c, "Hold ready", "Ready for pickup: {{item.title}}",
		"Dear {{user.firstName}} {{user.lastName}}, {{item.title}} ({{item.barcode}}) waits for you at {{request.servicePointPickup}} until {{request.holdShelfExpirationDate}}.")
	useNoticePolicy(t, c, lib.PolicyID, nil, []map[string]any{noticeOn(ready, schemas.NoticeAvailable, schemas.NoticeUponAt, nil)})
	// A policy with a notice FOLIO's settings offer and this service does
	// not send is taken as FOLIO's clients write it, and kept.
	c.Do(c.Storage, "POST", "/patron-notice-policy-storage/patron-notice-policies", map[string]any{"name": "Aged", "active": true,
		"loanNotices": []map[string]any{noticeOn(ready, "Aged to lost", schemas.NoticeUponAt, nil)}}).Want(t, http.StatusCreated)
	c.CheckOut(0, book, owner).Want(t, http.StatusCreated)
	requesterID := c.IDOf(t, "/users", "users", requester)
	var hold struct{ ID string }
	c.Do(c.Storage, "POST", "/request-storage/requests", map[string]any{"requestType": "Hold", "requestLevel": "Item",
		"requestDate": "2026-01-01T10:00:00.000Z", "requesterId": requesterID,
		"itemId": c.IDOf(t, "/item-storage/items", "items", book), "status": "Open - Not yet filled", "position": 1,
		"fulfillmentPreference": "Hold Shelf", "pickupServicePointId": harness.ServicePoint}).Want(t, http.StatusCreated).Decode(t, &hold)
	c.Do(c.Circulations[0], "POST", "/circulation/check-in-by-barcode", map[string]string{"itemBarcode": book,
		"servicePointId": harness.ServicePoint}).Want(t, http.StatusOK)

	got := mail.WaitMessages(1, 30*time.Second)
	r := readRequest(t, c, hold.ID)
	if r.Status != schemas.RequestAwaitingPickup {
		t.Fatalf("the hold is %q, want on the hold shelf", r.Status)
	}
	m, err := mail.Message(context.Background(), got[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	var spName string
	c.DB.QueryRow(context.Background(), fmt.Sprintf(`SELECT name FROM %s.service_point WHERE id = $1::uuid`, c.Schema), harness.ServicePoint).Scan(&spName)
	shelfUntil, err := schemas.ParseDateTime(r.HoldShelfExpiration)
	if err != nil {
		t.Fatal(err)
	}
	var title string
	c.DB.QueryRow(context.Background(), fmt.Sprintf(`SELECT jsonb ->> 'title' FROM %s.item WHERE barcode = $1`, c.Schema), book).Scan(&title)
	wantBody := fmt.Sprintf("Dear Reader Patron %s, %s (%s) waits for you at %s until %s.", requester, title, book, spName,
		shelfUntil.UTC().Format("2006-01-02 15:04 MST"))
	if len(m.To) != 1 || m.To[0].Address != address || m.Subject != "Ready for pickup: "+title || strings.TrimSpace(m.Text) != wantBody {
		t.Errorf("the mail: to %v, subject %q, body %q; want to %s, %q, %q", m.To, m.Subject, m.Text, address, "Ready for pickup: "+title, wantBody)
	}
	var notices []scheduledNotice
	waitFor(t, "the hold's notice settled after its mail", func() bool {
		notices = noticesOf(t, c, "requestId="+hold.ID)
		return len(notices) != 1 || notices[0].Status != schemas.NoticeScheduled
	})
	if len(notices) != 1 || notices[0].Status != schemas.NoticeSent || notices[0].Sent != 1 || notices[0].TriggeringEvent != schemas.NoticeAvailable ||
		notices[0].RecipientUserID != requesterID || "<"+m.MessageID+">" != notices[0].MessageID {
		t.Errorf("the hold's notices %+v, want one Available notice Sent once to the requester as mail %s", notices, m.MessageID)
	}
	waitRounds(t, c, c.Storage, noticeRounds(t, c, c.Storage), 5)
	if all, err := mail.Messages(context.Background()); err != nil || len(all) != 1 {
		t.Errorf("after five more rounds: %d mails (%v), want the one", len(all), err)
	}
	if n := noticesOf(t, c, "status=Scheduled"); len(n) != 0 {
		t.Errorf("notices still scheduled: %+v, want none (the check-in closing the owner's loan calls for none)", n)
	}
}

// twoHourPolicy posts a loan policy lending for two hours, renewed from
// the current due date, and answers its id.
func twoHourPolicy(t *testing.T, c *harness.Cluster) string {
	t.Helper()
	var out struct{ ID string }
	c.Do(c.Storage, "POST", "/loan-policy-storage/loan-policies", map[string]any{"name": "Two hours", "loanable": true, "renewable": true,
		"loansPolicy":    map[string]any{"profileId": "Rolling", "period": map[string]any{"duration": 2, "intervalId": "Hours"}},
		"renewalsPolicy": map[string]any{"unlimited": true, "renewFromId": "CURRENT_DUE_DATE"}}).Want(t, http.StatusCreated).Decode(t, &out)
	return out.ID
}

// minutePolicy posts a loan policy lending for a minute, and answers its
// id.
func minutePolicy(t *testing.T, c *harness.Cluster) string {
	t.Helper()
	var out struct{ ID string }
	c.Do(c.Storage, "POST", "/loan-policy-storage/loan-policies", map[string]any{"name": "A minute", "loanable": true,
		"loansPolicy": map[string]any{"profileId": "Rolling", "period": map[string]any{"duration": 1, "intervalId": "Minutes"}}}).
		Want(t, http.StatusCreated).Decode(t, &out)
	return out.ID
}

// sharedSchema is the schema of the tables every tenant shares, quoted:
// where a test's own trigger on them goes, whatever a connection's
// search_path.
func sharedSchema(t *testing.T, c *harness.Cluster) string {
	t.Helper()
	var schema string
	if err := c.DB.QueryRow(context.Background(), `SELECT quote_ident(table_schema) FROM information_schema.tables
		WHERE table_name = 'scheduled_notice' AND table_type = 'BASE TABLE'`).Scan(&schema); err != nil {
		t.Fatal(err)
	}
	return schema
}

// dueSoon is a loan notice an hour before its due date, of a template
// "Due soon: <the item's title>", "Due <the due date>.".
func dueSoon(t *testing.T, c *harness.Cluster) map[string]any {
	t.Helper()
	soon := noticeTemplate(t, c, "Due soon", "Due soon: {{item.title}}", "Due {{loan.dueDate}}.")
	return noticeOn(soon, schemas.NoticeDueDate, schemas.NoticeBefore, map[string]any{"duration": 1, "intervalId": "Hours"})
}

// TestARenewalMovesTheDueSoonNotice: a loan's notice an hour before its
// due date is scheduled at its check-out for then; renewed, the due date
// two hours later, the patron is mailed the renewal notice (its tokens
// filled in), that notice is Obsolete and one for an hour before the new
// due date is Scheduled; returned, that one is Obsolete too, and nothing
// else was sent (no due date notice was due).
func TestARenewalMovesTheDueSoonNotice(t *testing.T) {
	t.Parallel()
	mail, c := noticeCluster(t, 1)
	lib := c.SetupLibrary(1, 1, 0)
	patron, book := lib.Patrons[0], lib.Items[0][0]
	giveEmail(t, c, patron)
	again := noticeTemplate(t, c, "Renewed", "Renewed: {{item.barcode}}", "Renewed {{loan.numberOfRenewalsTaken}} time(s), due {{loan.dueDate}}.")
	useNoticePolicy(t, c, twoHourPolicy(t, c), []map[string]any{dueSoon(t, c), noticeOn(again, schemas.NoticeRenewed, schemas.NoticeUponAt, nil)}, nil)
	var loan struct{ ID, DueDate string }
	c.CheckOut(0, book, patron).Want(t, http.StatusCreated).Decode(t, &loan)
	// scheduledFor waits for the loan's one Scheduled notice and holds it
	// to an hour before due.
	scheduledFor := func(due string) scheduledNotice {
		t.Helper()
		var n []scheduledNotice
		waitFor(t, "the loan's notice scheduled from "+due, func() bool {
			n = noticesOf(t, c, "loanId="+loan.ID+"&status=Scheduled")
			return len(n) == 1 && n[0].BasisDate == due
		})
		at, err := schemas.ParseDateTime(n[0].NextRunTime)
		dueAt, err2 := schemas.ParseDateTime(due)
		if err != nil || err2 != nil || !at.Equal(dueAt.Add(-time.Hour)) || n[0].TriggeringEvent != schemas.NoticeDueDate {
			t.Errorf("the due soon notice %+v, want at an hour before %s", n[0], due)
		}
		return n[0]
	}
	first := scheduledFor(loan.DueDate)
	var renewed struct{ DueDate string }
	c.Do(c.Circulations[0], "POST", "/circulation/renew-by-barcode", map[string]any{"itemBarcode": book, "userBarcode": patron}).
		Want(t, http.StatusOK).Decode(t, &renewed)
	was, _ := schemas.ParseDateTime(loan.DueDate)
	now, _ := schemas.ParseDateTime(renewed.DueDate)
	if !now.Equal(was.Add(2 * time.Hour)) {
		t.Fatalf("renewed: due %s, want two hours after %s", renewed.DueDate, loan.DueDate)
	}
	second := scheduledFor(renewed.DueDate)
	got := mail.WaitMessages(1, 30*time.Second)
	m, err := mail.Message(context.Background(), got[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if m.Subject != "Renewed: "+book || strings.TrimSpace(m.Text) != "Renewed 1 time(s), due "+now.UTC().Format("2006-01-02 15:04 MST")+"." {
		t.Errorf("the renewal's mail: %q, %q", m.Subject, m.Text)
	}
	waitFor(t, "the renewal's notice settled after its mail", func() bool {
		return len(noticesOf(t, c, "loanId="+loan.ID+"&status=Sent")) == 1
	})
	all := noticesOf(t, c, "loanId="+loan.ID+"&status=Obsolete")
	all = append(all, noticesOf(t, c, "loanId="+loan.ID+"&status=Scheduled")...)
	byID := map[string]scheduledNotice{}
	for _, n := range all {
		byID[n.ID] = n
	}
	if len(all) != 2 || byID[first.ID].Status != schemas.NoticeObsolete || byID[second.ID].Status != schemas.NoticeScheduled {
		t.Errorf("the loan's notices %+v, want the first Obsolete and the second Scheduled", all)
	}
	c.Do(c.Circulations[0], "POST", "/circulation/check-in-by-barcode", map[string]string{"itemBarcode": book,
		"servicePointId": harness.ServicePoint}).Want(t, http.StatusOK)
	waitFor(t, "the returned loan's notice obsolete", func() bool {
		return len(noticesOf(t, c, "loanId="+loan.ID+"&status=Obsolete")) == 2
	})
	if sent := noticesOf(t, c, "loanId="+loan.ID+"&status=Sent"); len(sent) != 1 || sent[0].TriggeringEvent != schemas.NoticeRenewed {
		t.Errorf("the loan's notices sent: %+v, want the renewal's", sent)
	}
	if got, err := mail.Messages(context.Background()); err != nil || len(got) != 1 {
		t.Errorf("%d mails sent (%v), want the renewal's alone", len(got), err)
	}
}

// TestARecordsChangesAreTakenInOrder: a change of a loan that cannot be
// taken for a while (here its check-out's, refused by a trigger while a
// flag is set) holds up the loan's later changes, not only itself: its
// renewal's change, recorded after it, waits, and once the check-out's is
// taken the renewal's is, so the loan's notice before its due date is
// scheduled from the renewed due date. Taken out of order, the check-out's
// change would schedule from the first due date and make the renewal's
// notice obsolete, and the notice would never be sent (at its time the
// loan is due later). Five rounds pass with the flag set.
func TestARecordsChangesAreTakenInOrder(t *testing.T) {
	t.Parallel()
	_, c := noticeCluster(t, 1)
	lib := c.SetupLibrary(1, 1, 0)
	patron, book := lib.Patrons[0], lib.Items[0][0]
	giveEmail(t, c, patron)
	useNoticePolicy(t, c, twoHourPolicy(t, c), []map[string]any{dueSoon(t, c)}, nil)
	ctx := context.Background()
	schema := sharedSchema(t, c)
	if _, err := c.DB.Exec(ctx, strings.ReplaceAll(`
CREATE TABLE @.check_out_change_refused (refused boolean NOT NULL);
INSERT INTO @.check_out_change_refused VALUES (true);
CREATE FUNCTION @.refuse_check_out_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF OLD.event = '`+schemas.NoticeCheckOut+`' AND (SELECT refused FROM @.check_out_change_refused) THEN
    RAISE EXCEPTION 'the check-out''s change, refused for now';
  END IF;
  RETURN OLD;
END $$;
CREATE TRIGGER refuse_check_out_change BEFORE DELETE ON @.notice_change FOR EACH ROW EXECUTE FUNCTION @.refuse_check_out_change();`,
		"@", schema)); err != nil {
		t.Fatal(err)
	}
	var loan struct{ ID, DueDate string }
	c.CheckOut(0, book, patron).Want(t, http.StatusCreated).Decode(t, &loan)
	var renewed struct{ DueDate string }
	c.Do(c.Circulations[0], "POST", "/circulation/renew-by-barcode", map[string]any{"itemBarcode": book, "userBarcode": patron}).
		Want(t, http.StatusOK).Decode(t, &renewed)
	if renewed.DueDate == loan.DueDate {
		t.Fatalf("renewed: due %s, as before", renewed.DueDate)
	}
	waitRounds(t, c, c.Storage, noticeRounds(t, c, c.Storage), 5)
	if _, err := c.DB.Exec(ctx, `UPDATE `+schema+`.check_out_change_refused SET refused = false`); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the loan's changes taken", func() bool {
		var left int
		if err := c.DB.QueryRow(ctx, `SELECT count(*) FROM `+schema+`.notice_change WHERE record_id = $1`, loan.ID).Scan(&left); err != nil {
			t.Fatal(err)
		}
		return left == 0
	})
	if n := noticesOf(t, c, "loanId="+loan.ID+"&status=Scheduled"); len(n) != 1 || n[0].BasisDate != renewed.DueDate ||
		n[0].TriggeringEvent != schemas.NoticeDueDate {
		t.Errorf("the loan's notices Scheduled: %+v, want one before its renewed due date %s", n, renewed.DueDate)
	}
}

// TestADateLeftWhereItWasSendsNoNoticeAgain: a change that reschedules a
// record's notices of a date but leaves the date where it was sends none
// of them again. An overdue loan's notice upon its due date is mailed;
// a recall, which keeps a due date already passed, leaves that notice
// Sent and schedules no other. The recall, on the hold shelf once the
// book is returned, has its notice two hours before the hold shelf's
// expiration mailed; its request expiration date moved, the hold
// shelf's not, that notice is not mailed again. Five rounds after each,
// each patron has had one mail.
func TestADateLeftWhereItWasSendsNoNoticeAgain(t *testing.T) {
	t.Parallel()
	mail, c := noticeCluster(t, 1)
	lib := c.SetupLibrary(2, 1, 0)
	borrower, recaller, book := lib.Patrons[0], lib.Patrons[1], lib.Items[0][0]
	giveEmail(t, c, borrower)
	giveEmail(t, c, recaller)
	keepHolds(t, c, harness.ServicePoint, 1, "Hours")
	tpl := func(what string) string { return noticeTemplate(t, c, what, what+": {{item.barcode}}", what+".") }
	useNoticePolicy(t, c, minutePolicy(t, c),
		[]map[string]any{noticeOn(tpl("Due"), schemas.NoticeDueDate, schemas.NoticeUponAt, nil)},
		[]map[string]any{noticeOn(tpl("Last hours"), schemas.NoticeHoldExpiration, schemas.NoticeBefore, map[string]any{"duration": 2, "intervalId": "Hours"})})
	loan := checkOutOn(t, c, book, borrower, schemas.FormatTime(time.Now().Add(-10*time.Minute)))
	loanID := fmt.Sprint(loan["id"])
	mail.WaitMessages(1, 30*time.Second)
	waitFor(t, "the due date's notice sent", func() bool { return len(noticesOf(t, c, "loanId="+loanID+"&status=Sent")) == 1 })

	var recall struct{ ID string }
	c.DoWith(c.Circulations[0], "POST", "/circulation/requests", map[string]any{"requestType": "Recall", "requestDate": "2026-03-01T10:00:00.000Z",
		"requesterId": c.IDOf(t, "/users", "users", recaller), "itemId": c.IDOf(t, "/item-storage/items", "items", book),
		"fulfillmentPreference": "Hold Shelf", "pickupServicePointId": harness.ServicePoint},
		map[string]string{schemas.HeaderTenant: c.Tenant, schemas.HeaderToken: c.Token(schemas.RoleLibrarian)}).
		Want(t, http.StatusCreated).Decode(t, &recall)
	if got := storedDoc(t, c, "loan", loanID); got["dueDateChangedByRecall"] != true || got["dueDate"] != loan["dueDate"] {
		t.Fatalf("the recalled loan: due %v, dueDateChangedByRecall %v; want due %v still, and recalled", got["dueDate"], got["dueDateChangedByRecall"], loan["dueDate"])
	}
	waitRounds(t, c, c.Storage, noticeRounds(t, c, c.Storage), 5)
	if n := noticesOf(t, c, "loanId="+loanID); len(n) != 1 || n[0].Status != schemas.NoticeSent || n[0].TriggeringEvent != schemas.NoticeDueDate {
		t.Errorf("the recalled loan's notices %+v, want its due date's one, Sent", n)
	}
	if got, err := mail.Messages(context.Background()); err != nil || len(got) != 1 {
		t.Errorf("after the recall: %d mails (%v), want the due date's one", len(got), err)
	}

	c.CheckIn(0, book).Want(t, http.StatusOK)
	if r := readRequest(t, c, recall.ID); r.Status != schemas.RequestAwaitingPickup {
		t.Fatalf("the recall is %q, want on the hold shelf", r.Status)
	}
	mail.WaitMessages(2, 30*time.Second)
	waitFor(t, "the hold shelf's notice sent", func() bool { return len(noticesOf(t, c, "requestId="+recall.ID+"&status=Sent")) == 1 })
	var doc map[string]any
	c.Do(c.Storage, "GET", "/request-storage/requests/"+recall.ID, nil).Want(t, http.StatusOK).Decode(t, &doc)
	delete(doc, "metadata")
	shelf := doc["holdShelfExpirationDate"]
	doc["requestExpirationDate"] = schemas.FormatTime(time.Now().AddDate(0, 1, 0))
	c.Do(c.Storage, "PUT", "/request-storage/requests/"+recall.ID, doc).Want(t, http.StatusNoContent)
	waitRounds(t, c, c.Storage, noticeRounds(t, c, c.Storage), 5)
	if n := noticesOf(t, c, "requestId="+recall.ID); len(n) != 1 || n[0].Status != schemas.NoticeSent || n[0].BasisDate != shelf {
		t.Errorf("the recall's notices %+v, want the hold shelf's one, Sent, from %v", n, shelf)
	}
	if got, err := mail.Messages(context.Background()); err != nil || len(got) != 2 {
		t.Errorf("after the request's expiration date moved: %d mails (%v), want two (the due date's, the hold shelf's)", len(got), err)
	}
}

// TestAPatronWithoutEmailIsRecordedNotRetried: two patrons check out, one
// with an email address and one without; the first is sent the check-out
// notice, the second's is recorded No email with why, tried once, and
// stays so rounds after: nothing is sent to them, nothing tried again.
func TestAPatronWithoutEmailIsRecordedNotRetried(t *testing.T) {
	t.Parallel()
	mail, c := noticeCluster(t, 1, "NOTICE_FIRST_RETRY=10ms")
	lib := c.SetupLibrary(2, 1, 0)
	address := giveEmail(t, c, lib.Patrons[0])
	useReceipts(t, c, lib)
	c.CheckOut(0, lib.Items[0][0], lib.Patrons[0]).Want(t, http.StatusCreated)
	var loan struct{ ID string }
	c.CheckOut(0, lib.Items[1][0], lib.Patrons[1]).Want(t, http.StatusCreated).Decode(t, &loan)
	got := mail.WaitMessages(1, 30*time.Second)
	if got[0].To[0].Address != address || got[0].Subject != "Checked out: "+lib.Items[0][0] {
		t.Errorf("the mail %+v, want the receipt to %s", got[0], address)
	}
	var n []scheduledNotice
	waitFor(t, "the notice of the patron without email settled", func() bool {
		n = noticesOf(t, c, "loanId="+loan.ID)
		return len(n) == 1 && n[0].Status != schemas.NoticeScheduled
	})
	settled := n[0]
	if settled.Status != schemas.NoticeNoEmail || settled.Attempts != 0 || settled.Sent != 0 || !strings.Contains(settled.LastError, "no email") {
		t.Errorf("the notice of a patron without email: %+v, want No email, never tried, saying why", settled)
	}
	waitRounds(t, c, c.Storage, noticeRounds(t, c, c.Storage), 10)
	if n := noticesOf(t, c, "loanId="+loan.ID); len(n) != 1 || n[0] != settled {
		t.Errorf("ten rounds later: %+v, want %+v unchanged", n, settled)
	}
	if all, err := mail.Messages(context.Background()); err != nil || len(all) != 1 {
		t.Errorf("%d mails (%v), want the one", len(all), err)
	}
	if v, _ := c.Metric(t, c.Storage, `patron_notices_total{status="No email"}`); v != 1 {
		t.Errorf("patron_notices_total{status=\"No email\"} = %v, want 1", v)
	}
}

// TestNoticesReachPatronsOnceThroughKills: 1,000 loans of a minute, lent
// so that they fall due one every 10 ms over ten seconds, under a policy
// sending a notice at the due date; while they fall due, the two storage
// instances, each the sender when it leads, are killed (SIGKILL) and
// started again, one after the other, again and again, and the SMTP
// server every seventh time: every notice is delivered exactly once (1,000 mails, one
// per notice, each with the Message-ID storage recorded for it, every
// notice Sent once), none before its loan was due, and each patron's in
// the order their loans fell due (one tried again, the SMTP server down,
// holds back that patron's later ones).
func TestNoticesReachPatronsOnceThroughKills(t *testing.T) {
	t.Parallel()
	const patrons, each = 50, 20
	mail, c := noticeCluster(t, 2, "NOTICE_FIRST_RETRY=100ms")
	lib := c.SetupLibrary(patrons, each, 0)
	for _, p := range lib.Patrons {
		giveEmail(t, c, p)
	}
	due := noticeTemplate(t, c, "Due", "Due now: {{item.barcode}}", "{{item.barcode}} was due {{loan.dueDate}}.")
	useNoticePolicy(t, c, minutePolicy(t, c), []map[string]any{noticeOn(due, schemas.NoticeDueDate, schemas.NoticeUponAt, nil)}, nil)

	// The i-th loan falls due at first + i×10 ms: lent a minute before.
	// Lending the thousand takes some 10 s alone, and over 20 s under
	// make test's load on two cores.
	first := time.Now().Add(45 * time.Second).Truncate(time.Millisecond)
	type lend struct{ item, patron string }
	var lends []lend
	// A patron's loans fall due one after the other, 10 ms apart: a
	// notice tried again later than that would be overtaken by the next
	// if the sender did not hold the patron's later ones back.
	for p := range patrons {
		for k := range each {
			lends = append(lends, lend{lib.Items[p][k], lib.Patrons[p]})
		}
	}
	work := make(chan int)
	errs := make(chan error, len(lends))
	var done sync.WaitGroup
	for w := range 8 {
		done.Add(1)
		go func() {
			defer done.Done()
			for i := range work {
				at := schemas.FormatTime(first.Add(time.Duration(i)*10*time.Millisecond - time.Minute))
				res := c.Do(c.Circulations[w%2], "POST", "/circulation/check-out-by-barcode", map[string]any{"itemBarcode": lends[i].item,
					"userBarcode": lends[i].patron, "servicePointId": harness.ServicePoint, "loanDate": at})
				if res.Err != nil || res.Status != http.StatusCreated {
					errs <- fmt.Errorf("check-out %d: %v %d %s", i, res.Err, res.Status, res.Body)
				}
			}
		}()
	}
	for i := range lends {
		work <- i
	}
	close(work)
	done.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if time.Now().After(first) {
		t.Fatalf("the check-outs ended after the first loan fell due: the test needs more time before it")
	}

	// The faults, from a little before the first notice is due until every
	// mail is in.
	stop, stopped := make(chan struct{}), make(chan [2]int)
	go func() {
		kills, mailKills := 0, 0
		pause := time.NewTimer(time.Until(first) - time.Second)
		defer pause.Stop()
		for {
			select {
			case <-stop:
				stopped <- [2]int{kills, mailKills}
				return
			case <-pause.C:
			}
			s := c.Storages[kills%2]
			s.Kill()
			s.Start()
			if kills%7 == 3 {
				mail.Kill()
				mail.Start()
				mailKills++
			}
			kills++
			pause.Reset(time.Duration(100+rand.IntN(400)) * time.Millisecond)
		}
	}()
	mail.WaitMessages(len(lends), time.Until(first)+90*time.Second)
	close(stop)
	kills := <-stopped
	waitRounds(t, c, c.Storage, noticeRounds(t, c, c.Storage), 5)
	got, err := mail.Messages(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	notices := noticesOf(t, c, "")
	byMessage := map[string]scheduledNotice{}
	for _, n := range notices {
		if n.Status != schemas.NoticeSent || n.Sent != 1 || n.MessageID == "" {
			t.Errorf("notice %+v, want Sent once", n)
		}
		byMessage[n.MessageID] = n
	}
	seen := map[string]bool{}
	early, outOfOrder := 0, 0
	latest := map[string]time.Time{} // the latest due date mailed to each patron
	slices.SortFunc(got, func(a, b harness.Mail) int { return a.Created.Compare(b.Created) })
	for _, m := range got {
		n, ok := byMessage["<"+m.MessageID+">"]
		if !ok || seen[m.MessageID] {
			t.Errorf("mail %s (%s): a notice's %v, delivered before %v", m.MessageID, m.Subject, ok, seen[m.MessageID])
		}
		seen[m.MessageID] = true
		at, err := schemas.ParseDateTime(n.NextRunTime)
		if err != nil || m.Created.Before(at) {
			early++
		}
		if at.Before(latest[n.RecipientUserID]) {
			outOfOrder++
		}
		latest[n.RecipientUserID] = at
	}
	if len(notices) != len(lends) || len(got) != len(lends) || early != 0 || outOfOrder != 0 {
		t.Errorf("%d notices, %d mails delivered, %d before their loan was due, %d after a later one to the same patron; want %d, %d, none, none",
			len(notices), len(got), early, outOfOrder, len(lends), len(lends))
	}
	t.Logf("%d mails delivered through %d kills of storage and %d of the SMTP server", len(got), kills[0], kills[1])
}

// TestANoticeSentButNotRecordedIsMailedOnce: the SMTP server takes a
// check-out receipt's mail, and the record of it is lost (a trigger of the
// test's own fails the update that marks the notice sent, once, as an
// instance stopped between the two would leave it): the notice is still
// Scheduled, its try counted as failed, and it is sent again after
// NOTICE_FIRST_RETRY (10 ms here) with the Message-ID of its first try,
// which the server has delivered, so it delivers nothing more.
// The patron has one mail, the notice is Sent once as that mail (its
// first try's failure kept as its lastError), and rounds after, still one. TestNoticesReachPatronsOnceThroughKills has
// instances stopped at random; this loses the record every time.
func TestANoticeSentButNotRecordedIsMailedOnce(t *testing.T) {
	t.Parallel()
	mail, c := noticeCluster(t, 1, "NOTICE_FIRST_RETRY=10ms")
	lib := c.SetupLibrary(1, 1, 0)
	giveEmail(t, c, lib.Patrons[0])
	useReceipts(t, c, lib)
	ctx := context.Background()
	schema := sharedSchema(t, c)
	if _, err := c.DB.Exec(ctx, strings.ReplaceAll(`
CREATE SEQUENCE @.notice_record_lost;
CREATE FUNCTION @.lose_notice_record() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.jsonb ? 'messageId' AND NOT OLD.jsonb ? 'messageId' AND nextval('@.notice_record_lost') = 1 THEN
    RAISE EXCEPTION 'the record of a sent notice, lost';
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER lose_notice_record BEFORE UPDATE ON @.scheduled_notice FOR EACH ROW EXECUTE FUNCTION @.lose_notice_record();`, "@", schema)); err != nil {
		t.Fatal(err)
	}
	var loan struct{ ID string }
	c.CheckOut(0, lib.Items[0][0], lib.Patrons[0]).Want(t, http.StatusCreated).Decode(t, &loan)
	var n []scheduledNotice
	waitFor(t, "the receipt Sent", func() bool {
		n = noticesOf(t, c, "loanId="+loan.ID)
		return len(n) == 1 && n[0].Status == schemas.NoticeSent
	})
	var tries int
	if err := c.DB.QueryRow(ctx, `SELECT last_value FROM `+schema+`.notice_record_lost`).Scan(&tries); err != nil || tries != 2 {
		t.Fatalf("the sent notice was recorded at try %d (%v), want the second, the first's record lost", tries, err)
	}
	waitRounds(t, c, c.Storage, noticeRounds(t, c, c.Storage), 5)
	got, err := mail.Messages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || n[0].Sent != 1 || n[0].MessageID != "<"+got[0].MessageID+">" || !strings.Contains(n[0].LastError, "the record of a sent notice, lost") {
		t.Errorf("%d mails %+v; the receipt %+v: want one mail, the receipt Sent once as it", len(got), got, n[0])
	}
}

// TestASlowMailIsSentOnce: a mail server that takes longer to take a
// notice's mail than storage lets a transaction sit idle elsewhere
// (REQUEST_TIMEOUT, 2 s here) still has it once. The sender's transaction,
// holding the notice while the server takes the mail, is let sit for the
// mail's own bound; were PostgreSQL to end its session, the mail would
// land and its record would not, and the notice would be mailed again at
// every round without a try counted. Here the server is held at the mail's
// MAIL FROM until the transaction has sat longer than REQUEST_TIMEOUT:
// the session is still there, the notice is Sent on its first try, no
// round failed, and the patron has one mail.
func TestASlowMailIsSentOnce(t *testing.T) {
	t.Parallel()
	mail := harness.StartMailpit(t)
	slow := harness.NewProxy(t, mail.SMTP)
	c := harness.NewCluster(t, harness.Options{Circulations: 1, Storages: 1, FeatureOn: true, DatabaseURL: harness.FreshDatabase(t),
		StorageEnv: []string{"NOTICE_SMTP_ADDR=" + slow.Addr(), "NOTICE_FROM=library@checkoutlock.test", "NOTICE_INTERVAL=50ms",
			"REQUEST_TIMEOUT=2s"}})
	lib := c.SetupLibrary(1, 1, 0)
	giveEmail(t, c, lib.Patrons[0])
	useReceipts(t, c, lib)
	arrived, release := slow.Hold("MAIL FROM")
	defer release()
	var loan struct{ ID string }
	c.CheckOut(0, lib.Items[0][0], lib.Patrons[0]).Want(t, http.StatusCreated).Decode(t, &loan)
	select {
	case <-arrived:
	case <-time.After(20 * time.Second):
		t.Fatal("the receipt's mail never reached the server")
	}
	// The sender's session: idle in the transaction that holds the
	// notice (a lock on the notices' table).
	ctx := context.Background()
	var sat, there int
	waitFor(t, "the sender's transaction idle past REQUEST_TIMEOUT, or its session ended", func() bool {
		if err := c.DB.QueryRow(ctx, `SELECT count(*) FILTER (WHERE now() - a.state_change > interval '2500 ms'), count(*)
			FROM pg_stat_activity a WHERE a.datname = current_database() AND a.state = 'idle in transaction'
			 AND EXISTS (SELECT 1 FROM pg_locks l JOIN pg_class r ON r.oid = l.relation
			              WHERE l.pid = a.pid AND r.relname = 'scheduled_notice' AND r.relkind = 'r')`).Scan(&sat, &there); err != nil {
			t.Fatal(err)
		}
		return sat > 0 || there == 0
	})
	release()
	if sat == 0 {
		t.Errorf("the sender's session ended while the server took the mail")
	}
	var n []scheduledNotice
	waitFor(t, "the receipt Sent", func() bool {
		n = noticesOf(t, c, "loanId="+loan.ID)
		return len(n) == 1 && n[0].Status == schemas.NoticeSent
	})
	waitRounds(t, c, c.Storage, noticeRounds(t, c, c.Storage), 5)
	got, err := mail.Messages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	failed, _ := c.Metric(t, c.Storage, `patron_notice_rounds_total{result="failed"}`)
	n = noticesOf(t, c, "loanId="+loan.ID)
	if len(got) != 1 || len(n) != 1 || n[0].Sent != 1 || n[0].Attempts != 0 || failed != 0 {
		t.Errorf("%d mails; the receipt %+v; %v rounds failed: want one mail, the receipt Sent at its first try, no round failed", len(got), n, failed)
	}
}

// TestANoticeThatCannotBeSettledHoldsUpNoOther: notices whose record
// cannot be written once mailed (a trigger refuses it, for two patrons'
// receipts) are tried again later, each failure counted as a failed mail
// is, until their tries are spent and they are Failed, with why. With as
// many of them as the sender reads at once (NOTICE_BATCH=2), a third
// patron's receipt, due after them, is still sent: they do not stay first
// among the notices due.
func TestANoticeThatCannotBeSettledHoldsUpNoOther(t *testing.T) {
	t.Parallel()
	_, c := noticeCluster(t, 1, "NOTICE_BATCH=2", "NOTICE_MAX_ATTEMPTS=3", "NOTICE_FIRST_RETRY=2s")
	lib := c.SetupLibrary(3, 1, 0)
	for _, p := range lib.Patrons {
		giveEmail(t, c, p)
	}
	useReceipts(t, c, lib)
	ctx := context.Background()
	schema := sharedSchema(t, c)
	stuck := []string{c.IDOf(t, "/users", "users", lib.Patrons[0]), c.IDOf(t, "/users", "users", lib.Patrons[1])}
	if _, err := c.DB.Exec(ctx, strings.ReplaceAll(strings.ReplaceAll(`
CREATE FUNCTION @.refuse_notice_record() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.jsonb ? 'messageId' AND NOT OLD.jsonb ? 'messageId' AND OLD.recipient_id IN (%) THEN
    RAISE EXCEPTION 'the record of this sent notice is refused';
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER refuse_notice_record BEFORE UPDATE ON @.scheduled_notice FOR EACH ROW EXECUTE FUNCTION @.refuse_notice_record();`,
		"@", schema), "%", "'"+stuck[0]+"', '"+stuck[1]+"'")); err != nil {
		t.Fatal(err)
	}
	var loans [3]struct{ ID string }
	for i := range 2 {
		c.CheckOut(0, lib.Items[i][0], lib.Patrons[i]).Want(t, http.StatusCreated).Decode(t, &loans[i])
	}
	tried := func(i int) scheduledNotice {
		t.Helper()
		var n []scheduledNotice
		waitFor(t, "patron "+lib.Patrons[i]+"'s receipt tried", func() bool {
			n = noticesOf(t, c, "loanId="+loans[i].ID)
			return len(n) == 1 && n[0].Attempts >= 1
		})
		return n[0]
	}
	for i := range 2 {
		tried(i)
	}
	c.CheckOut(0, lib.Items[2][0], lib.Patrons[2]).Want(t, http.StatusCreated).Decode(t, &loans[2])
	waitFor(t, "the third patron's receipt Sent", func() bool {
		n := noticesOf(t, c, "loanId="+loans[2].ID)
		return len(n) == 1 && n[0].Status == schemas.NoticeSent
	})
	// Sent while the two were still waiting for their next tries, not
	// once they were Failed.
	for i := range 2 {
		if n := noticesOf(t, c, "loanId="+loans[i].ID); len(n) != 1 || n[0].Status != schemas.NoticeScheduled {
			t.Errorf("patron %s's receipt when the third was sent: %+v, want it Scheduled, its next try to come", lib.Patrons[i], n)
		}
	}
	for i := range 2 {
		var n []scheduledNotice
		waitFor(t, "patron "+lib.Patrons[i]+"'s receipt Failed", func() bool {
			n = noticesOf(t, c, "loanId="+loans[i].ID)
			return len(n) == 1 && n[0].Status == schemas.NoticeFailed
		})
		if n[0].Attempts != 3 || !strings.Contains(n[0].LastError, "the record of this sent notice is refused") || n[0].Sent != 0 {
			t.Errorf("patron %s's receipt: %+v, want three tries, each refused its record", lib.Patrons[i], n[0])
		}
	}
}

// TestANoticeThatCannotBeSentIsADeadLetterOnTheConsole: the SMTP server
// gone (nothing listens where NOTICE_SMTP_ADDR points), a check-out's
// receipt is tried NOTICE_MAX_ATTEMPTS times, then Failed with why; the
// operator's console lists it (GET /circulation/notices/failed: the
// patron by name and barcode, the event, the tries, the failure), and its
// page shows it; a self-check machine may not read it (403).
func TestANoticeThatCannotBeSentIsADeadLetterOnTheConsole(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, Storages: 1, FeatureOn: true, DatabaseURL: harness.FreshDatabase(t),
		StorageEnv: []string{"NOTICE_SMTP_ADDR=" + harness.FreeAddr(t), "NOTICE_INTERVAL=50ms", "NOTICE_FIRST_RETRY=10ms", "NOTICE_MAX_ATTEMPTS=2"}})
	lib := c.SetupLibrary(1, 1, 0)
	giveEmail(t, c, lib.Patrons[0])
	useReceipts(t, c, lib)
	var loan struct{ ID string }
	c.CheckOut(0, lib.Items[0][0], lib.Patrons[0]).Want(t, http.StatusCreated).Decode(t, &loan)
	var n []scheduledNotice
	waitFor(t, "the receipt failed", func() bool {
		n = noticesOf(t, c, "loanId="+loan.ID)
		return len(n) == 1 && n[0].Status == schemas.NoticeFailed
	})
	if n[0].Attempts != 2 || !strings.Contains(n[0].LastError, "connection refused") || n[0].Sent != 0 {
		t.Errorf("the failed receipt: %+v, want two tries, the last refused", n[0])
	}
	var dead struct {
		Notices []struct {
			ID, Patron, TriggeringEvent, LastError string
			Attempts                               int
		}
		TotalRecords int
	}
	operator := map[string]string{schemas.HeaderTenant: c.Tenant, schemas.HeaderToken: c.Token(schemas.RoleOperator)}
	c.DoWith(c.Circulations[0], "GET", "/circulation/notices/failed", nil, operator).Want(t, http.StatusOK).Decode(t, &dead)
	want := "Reader Patron " + lib.Patrons[0] + " (" + lib.Patrons[0] + ")"
	if dead.TotalRecords != 1 || len(dead.Notices) != 1 || dead.Notices[0].ID != n[0].ID || dead.Notices[0].Patron != want ||
		dead.Notices[0].TriggeringEvent != schemas.NoticeCheckOut || dead.Notices[0].Attempts != 2 || dead.Notices[0].LastError != n[0].LastError {
		t.Errorf("the console's dead letters: %+v, want the receipt for %s", dead, want)
	}
	c.DoWith(c.Circulations[0], "GET", "/circulation/notices/failed", nil,
		map[string]string{schemas.HeaderTenant: c.Tenant, schemas.HeaderToken: c.Token(schemas.RoleSelfCheck)}).Want(t, http.StatusForbidden)

	c.Account(t, "olga", "Olga", "Operator", schemas.RoleOperator, "olga-password")
	ctx := browser(t)
	signIn(t, ctx, c, "/ui/locks.html", "olga", "olga-password")
	waitUntil(t, ctx, "the dead letter on the console", `document.querySelectorAll("#failed-notices tbody tr").length === 1`)
	row := textOf(t, ctx, "#failed-notices tbody tr")
	for _, w := range []string{want, schemas.NoticeCheckOut, "connection refused"} {
		if !strings.Contains(row, w) {
			t.Errorf("the console's row %q does not say %q", row, w)
		}
	}
	if got := textOf(t, ctx, "#notices-status"); got != "1 notice could not be sent." {
		t.Errorf("the console says %q", got)
	}
}

// TestOverdueNoticesRecurWithoutFlooding: a loan due nine minutes ago,
// under a policy mailing a notice a minute after the due date and again
// every minute while overdue, is mailed once, not once for each minute it
// missed, and its notice is scheduled again for the next minute after
// now; returned, the notice is Obsolete and nothing more is mailed.
func TestOverdueNoticesRecurWithoutFlooding(t *testing.T) {
	t.Parallel()
	mail, c := noticeCluster(t, 1)
	lib := c.SetupLibrary(1, 1, 0)
	giveEmail(t, c, lib.Patrons[0])
	overdue := noticeTemplate(t, c, "Overdue", "Overdue: {{item.barcode}}", "Due {{loan.dueDate}}.")
	every := noticeOn(overdue, schemas.NoticeDueDate, schemas.NoticeAfter, map[string]any{"duration": 1, "intervalId": "Minutes"})
	every["frequency"] = schemas.NoticeRecurring
	every["sendOptions"].(map[string]any)["sendEvery"] = map[string]any{"duration": 1, "intervalId": "Minutes"}
	useNoticePolicy(t, c, minutePolicy(t, c), []map[string]any{every}, nil)
	loan := checkOutOn(t, c, lib.Items[0][0], lib.Patrons[0], schemas.FormatTime(time.Now().Add(-10*time.Minute)))
	mail.WaitMessages(1, 30*time.Second)
	var n []scheduledNotice
	waitFor(t, "the overdue notice sent once and scheduled again", func() bool {
		n = noticesOf(t, c, fmt.Sprint("loanId=", loan["id"]))
		return len(n) == 1 && n[0].Sent == 1
	})
	next, err := schemas.ParseDateTime(n[0].NextRunTime)
	if err != nil || n[0].Status != schemas.NoticeScheduled || !next.After(time.Now()) || next.After(time.Now().Add(time.Minute)) {
		t.Errorf("the overdue notice after its first mail: %+v, want Scheduled for within the next minute", n[0])
	}
	waitRounds(t, c, c.Storage, noticeRounds(t, c, c.Storage), 5)
	if got, err := mail.Messages(context.Background()); err != nil || len(got) != 1 {
		t.Errorf("%d mails (%v), want one for the nine minutes missed", len(got), err)
	}
	c.CheckIn(0, lib.Items[0][0]).Want(t, http.StatusOK)
	waitFor(t, "the returned loan's notice obsolete", func() bool {
		n = noticesOf(t, c, fmt.Sprint("loanId=", loan["id"]))
		return len(n) == 1 && n[0].Status == schemas.NoticeObsolete
	})
}

// TestNoDueDateNoticeForAClaimedReturnedItem: of two loans due in ten
// seconds under a policy mailing a notice at the due date, the one whose
// item its patron claims returned before then is sent none (its notice
// Obsolete, as mod-circulation finds it irrelevant), the other is mailed.
func TestNoDueDateNoticeForAClaimedReturnedItem(t *testing.T) {
	t.Parallel()
	mail, c := noticeCluster(t, 1)
	lib := c.SetupLibrary(2, 1, 0)
	for _, p := range lib.Patrons {
		giveEmail(t, c, p)
	}
	due := noticeTemplate(t, c, "Due", "Due: {{item.barcode}}", "Due {{loan.dueDate}}.")
	useNoticePolicy(t, c, minutePolicy(t, c), []map[string]any{noticeOn(due, schemas.NoticeDueDate, schemas.NoticeUponAt, nil)}, nil)
	lent := schemas.FormatTime(time.Now().Add(-50 * time.Second))
	kept := checkOutOn(t, c, lib.Items[0][0], lib.Patrons[0], lent)
	claimed := checkOutOn(t, c, lib.Items[1][0], lib.Patrons[1], lent)
	c.Do(c.Circulations[0], "POST", fmt.Sprint("/circulation/loans/", claimed["id"], "/claim-item-returned"),
		map[string]string{"itemClaimedReturnedDateTime": schemas.FormatTime(time.Now())}).Want(t, http.StatusNoContent)
	mail.WaitMessages(1, time.Minute)
	waitFor(t, "the claimed loan's due date notice obsolete", func() bool {
		n := noticesOf(t, c, fmt.Sprint("loanId=", claimed["id"]))
		return len(n) == 1 && n[0].Status == schemas.NoticeObsolete && n[0].Sent == 0
	})
	if n := noticesOf(t, c, fmt.Sprint("loanId=", kept["id"])); len(n) != 1 || n[0].Status != schemas.NoticeSent {
		t.Errorf("the kept loan's notices %+v, want one Sent", n)
	}
	waitRounds(t, c, c.Storage, noticeRounds(t, c, c.Storage), 3)
	got, err := mail.Messages(context.Background())
	if err != nil || len(got) != 1 || got[0].Subject != "Due: "+lib.Items[0][0] {
		t.Errorf("mails %+v (%v), want one, \"Due: %s\"", got, err, lib.Items[0][0])
	}
}

// TestARequestsNoticesFollowIt: under a policy telling a requester when a
// hold is placed, when it is ready, a day before the hold shelf lets it go
// and when it is cancelled, a hold placed, put on the hold shelf and
// cancelled mails the requester three notices in that order (placed,
// ready, cancelled); the notice before the hold shelf's expiration,
// scheduled when it went on the shelf for a day before its date, moves
// when the desk keeps the book two days longer (the first Obsolete), and
// is Obsolete once the request is cancelled, never sent.
func TestARequestsNoticesFollowIt(t *testing.T) {
	t.Parallel()
	mail, c := noticeCluster(t, 1)
	lib := c.SetupLibrary(2, 1, 0)
	owner, requester, book := lib.Patrons[0], lib.Patrons[1], lib.Items[0][0]
	giveEmail(t, c, requester)
	keepHolds(t, c, harness.ServicePoint, 3, "Days")
	tpl := func(what string) string { return noticeTemplate(t, c, what, what+": {{item.barcode}}", what+".") }
	useNoticePolicy(t, c, lib.PolicyID, nil, []map[string]any{
		noticeOn(tpl("Placed"), schemas.NoticeHoldRequest, schemas.NoticeUponAt, nil),
		noticeOn(tpl("Ready"), schemas.NoticeAvailable, schemas.NoticeUponAt, nil),
		noticeOn(tpl("Last day"), schemas.NoticeHoldExpiration, schemas.NoticeBefore, map[string]any{"duration": 1, "intervalId": "Days"}),
		noticeOn(tpl("Cancelled"), schemas.NoticeRequestCancellation, schemas.NoticeUponAt, nil)})
	c.CheckOut(0, book, owner).Want(t, http.StatusCreated)
	var hold struct{ ID string }
	c.Do(c.Storage, "POST", "/request-storage/requests", map[string]any{"requestType": "Hold", "requestLevel": "Item",
		"requestDate": "2026-01-01T10:00:00.000Z", "requesterId": c.IDOf(t, "/users", "users", requester),
		"itemId": c.IDOf(t, "/item-storage/items", "items", book), "status": "Open - Not yet filled", "position": 1,
		"fulfillmentPreference": "Hold Shelf", "pickupServicePointId": harness.ServicePoint}).Want(t, http.StatusCreated).Decode(t, &hold)
	mail.WaitMessages(1, 30*time.Second)
	c.CheckIn(0, book).Want(t, http.StatusOK)
	mail.WaitMessages(2, 30*time.Second)
	var lastDay []scheduledNotice
	waitFor(t, "the notice before the hold shelf's expiration scheduled", func() bool {
		lastDay = noticesOf(t, c, "requestId="+hold.ID+"&status=Scheduled")
		return len(lastDay) == 1
	})
	r := readRequest(t, c, hold.ID)
	expires, err := schemas.ParseDateTime(r.HoldShelfExpiration)
	at, err2 := schemas.ParseDateTime(lastDay[0].NextRunTime)
	if err != nil || err2 != nil || !at.Equal(expires.AddDate(0, 0, -1)) || lastDay[0].TriggeringEvent != schemas.NoticeHoldExpiration {
		t.Errorf("the last day's notice %+v, want a day before %s", lastDay[0], r.HoldShelfExpiration)
	}
	// The desk keeps it two days longer: the notice moves with the date.
	var doc map[string]any
	c.Do(c.Storage, "GET", "/request-storage/requests/"+hold.ID, nil).Want(t, http.StatusOK).Decode(t, &doc)
	delete(doc, "metadata")
	longer := schemas.FormatTime(expires.AddDate(0, 0, 2))
	doc["holdShelfExpirationDate"] = longer
	c.Do(c.Storage, "PUT", "/request-storage/requests/"+hold.ID, doc).Want(t, http.StatusNoContent)
	var moved []scheduledNotice
	waitFor(t, "the notice before the hold shelf's expiration moved", func() bool {
		moved = noticesOf(t, c, "requestId="+hold.ID+"&status=Scheduled")
		return len(moved) == 1 && moved[0].ID != lastDay[0].ID
	})
	if at, err := schemas.ParseDateTime(moved[0].NextRunTime); err != nil || !at.Equal(expires.AddDate(0, 0, 1)) || moved[0].BasisDate != longer {
		t.Errorf("the last day's notice after the date moved: %+v, want a day before %s", moved[0], longer)
	}
	c.Do(c.Storage, "GET", "/request-storage/requests/"+hold.ID, nil).Want(t, http.StatusOK).Decode(t, &doc)
	delete(doc, "metadata")
	doc["status"] = "Closed - Cancelled"
	c.Do(c.Storage, "PUT", "/request-storage/requests/"+hold.ID, doc).Want(t, http.StatusNoContent)
	got := mail.WaitMessages(3, 30*time.Second)
	slices.SortFunc(got, func(a, b harness.Mail) int { return a.Created.Compare(b.Created) })
	var subjects []string
	for _, m := range got {
		subjects = append(subjects, m.Subject)
	}
	if want := []string{"Placed: " + book, "Ready: " + book, "Cancelled: " + book}; !slices.Equal(subjects, want) {
		t.Errorf("the requester was mailed %q, want %q", subjects, want)
	}
	waitFor(t, "both last day's notices obsolete", func() bool {
		return len(noticesOf(t, c, "requestId="+hold.ID+"&status=Obsolete")) == 2
	})
}

// TestAFeeFineChargedIsToldOnce: an overdue fine charged at a late
// return, its fee/fine type naming a charge notice (chargeNoticeId,
// mod-feesfines'), mails the patron once, the template's feeCharge tokens
// filled in (the type, the amount and what remains of it, the owner) with
// the item's; the notice is Sent, and five rounds later still one mail.
func TestAFeeFineChargedIsToldOnce(t *testing.T) {
	t.Parallel()
	mail, c := noticeCluster(t, 1)
	lib := setUpFees(t, c, 1, 1, facultyStandard(), lostPolicy(10, 5))
	patron, book := lib.Patrons[0], lib.Items[0][0]
	address := giveEmail(t, c, patron)
	fine := noticeTemplate(t, c, "Fine", "{{feeCharge.type}}: {{feeCharge.amount}}",
		"{{feeCharge.type}} of {{feeCharge.amount}} ({{feeCharge.remainingAmount}} to pay) for {{item.barcode}}, {{feeCharge.owner}}.")
	var doc map[string]any
	c.Do(c.Storage, "GET", "/feefines/"+lib.OverdueType, nil).Want(t, http.StatusOK).Decode(t, &doc)
	delete(doc, "metadata")
	doc["chargeNoticeId"] = fine
	c.Do(c.Storage, "PUT", "/feefines/"+lib.OverdueType, doc).Want(t, http.StatusNoContent)
	checkOutOn(t, c, book, patron, schemas.FormatTime(time.Now().AddDate(0, 0, -30)))
	c.CheckIn(0, book).Want(t, http.StatusOK)
	got := mail.WaitMessages(1, 30*time.Second)
	fees := accountsOf(t, c, c.IDOf(t, "/users", "users", patron))
	if len(fees) != 1 || fees[0].FeeFineType != schemas.FeeFineOverdueFine {
		t.Fatalf("the late return charged %+v, want an overdue fine", fees)
	}
	amount := fees[0].Amount.String()
	m, err := mail.Message(context.Background(), got[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	wantBody := fmt.Sprintf("Overdue fine of %s (%s to pay) for %s, Main desk.", amount, amount, book)
	if m.To[0].Address != address || m.Subject != "Overdue fine: "+amount || strings.TrimSpace(m.Text) != wantBody {
		t.Errorf("the charge's mail: to %v, %q, %q; want %s, %q, %q", m.To, m.Subject, m.Text, address, "Overdue fine: "+amount, wantBody)
	}
	var n []scheduledNotice
	waitFor(t, "the charge's notice settled after its mail", func() bool {
		n = noticesOf(t, c, "feeFineId="+fees[0].ID)
		return len(n) != 1 || n[0].Status != schemas.NoticeScheduled
	})
	if len(n) != 1 || n[0].Status != schemas.NoticeSent || n[0].TriggeringEvent != schemas.NoticeFeeFineCharged {
		t.Errorf("the charge's notices %+v, want one Sent", n)
	}
	waitRounds(t, c, c.Storage, noticeRounds(t, c, c.Storage), 5)
	if all, err := mail.Messages(context.Background()); err != nil || len(all) != 1 {
		t.Errorf("%d mails (%v), want the one", len(all), err)
	}
}
