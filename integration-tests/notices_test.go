package integration

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/checkoutlock/integration-tests/harness"
	"github.com/checkoutlock/schemas"
)

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
	mail := harness.StartMailpit(t)
	c := harness.NewCluster(t, harness.Options{Circulations: 1, Storages: 1, FeatureOn: true,
		StorageEnv: append(mail.Env(), "NOTICE_INTERVAL=50ms")})
	lib := c.SetupLibrary(2, 1, 0)
	owner, requester, book := lib.Patrons[0], lib.Patrons[1], lib.Items[0][0]
	address := giveEmail(t, c, requester)
	giveEmail(t, c, owner)
	keepHolds(t, c, harness.ServicePoint, 3, "Days")
	ready := noticeTemplate(t, c, "Hold ready", "Ready for pickup: {{item.title}}",
		"Dear {{user.firstName}} {{user.lastName}}, {{item.title}} ({{item.barcode}}) waits for you at {{request.servicePointPickup}} until {{request.holdShelfExpirationDate}}.")
	useNoticePolicy(t, c, lib.PolicyID, nil, []map[string]any{noticeOn(ready, schemas.NoticeAvailable, schemas.NoticeUponAt, nil)})
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
	notices := noticesOf(t, c, "requestId="+hold.ID)
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
