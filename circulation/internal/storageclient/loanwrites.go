// The calls that write loans, items and requests at storage (the lock's,
// a check-out's, a check-in's, a return's, a loan action's, a renewal's,
// a request's), the reads of a loan or an item they start from, and
// whether a write landed (Landed).

package storageclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/checkoutlock/schemas/errs"

	"github.com/checkoutlock/circulation"
	"github.com/checkoutlock/schemas"
)

// AcquireLock implements circulation.Storage. The call's own timeout is
// extended by the wait asked for.
func (c *Client) AcquireLock(ctx context.Context, userID, lockID string, ttl, wait time.Duration, holder circulation.LockHolder) (circulation.Lock, error) {
	var l struct {
		ID        string `json:"id"`
		UserID    string `json:"userId"`
		ExpiresAt string `json:"expiresAt"`
	}
	body := map[string]any{"id": lockID, "userId": userID, "ttlMs": ttl.Milliseconds()}
	if holder != (circulation.LockHolder{}) {
		body["holder"] = holder
	}
	if wait > 0 {
		body["waitMs"] = wait.Milliseconds()
	}
	if err := c.callFor(ctx, c.timeout+wait, http.MethodPost, "/check-out-lock-storage", body, &l); err != nil {
		return circulation.Lock{}, err
	}
	return circulation.Lock{ID: l.ID, UserID: l.UserID, ExpiresAt: parseTime(l.ExpiresAt)}, nil
}

// ReleaseLock implements circulation.Storage.
func (c *Client) ReleaseLock(ctx context.Context, lockID string) error {
	return c.call(ctx, http.MethodDelete, "/check-out-lock-storage/"+url.PathEscape(lockID), nil, nil)
}

// UpdateItem implements circulation.Storage: the stored document with the
// new status, written at the version it was read.
func (c *Client) UpdateItem(ctx context.Context, item circulation.Item) (circulation.Item, error) {
	doc, err := withFields(item.Doc, map[string]any{
		"status":   map[string]any{"name": item.Status, "date": schemas.FormatTime(time.Now())},
		"_version": item.Version,
	})
	if err != nil {
		return circulation.Item{}, err
	}
	if err := c.call(ctx, http.MethodPut, "/item-storage/items/"+url.PathEscape(item.ID), doc, nil); err != nil {
		return circulation.Item{}, err
	}
	stored, err := withFields(doc, map[string]any{"_version": item.Version + 1})
	if err != nil {
		return circulation.Item{}, err
	}
	return decodeItem(stored)
}

// CheckOutItem implements circulation.Storage: a loan creation carrying the
// check-out's conditions (the item's version, the lock), which storage
// applies in one transaction with the item's update, with the item limit
// and lock requirement it decides itself, asked to release the lock with
// the loan; storage says whether it did (HeaderLockReleased).
func (c *Client) CheckOutItem(ctx context.Context, loan circulation.Loan, item circulation.Item, lockID string,
	acquire *circulation.LockAcquisition, lifted circulation.Overrides) (circulation.CheckedOut, error) {
	headers := append(writeHeaders(ctx), schemas.HeaderItemVersion, strconv.Itoa(item.Version))
	if lockID != "" {
		headers = append(headers, schemas.HeaderLockID, lockID, schemas.HeaderReleaseLock, "true")
	}
	timeout := c.timeout
	if acquire != nil && lockID != "" {
		headers = append(headers, schemas.HeaderAcquireLock, acquisitionTerms(acquire))
		timeout += acquire.Wait
	}
	var lifts []string
	if lifted.PatronBlock {
		lifts = append(lifts, "patronBlock")
	}
	if lifted.ItemLimit {
		lifts = append(lifts, "itemLimitBlock")
	}
	if lifted.ItemNotLoanable {
		lifts = append(lifts, "itemNotLoanableBlock")
	}
	if lifted.Offline {
		lifts = append(lifts, "offline")
	}
	if len(lifts) > 0 {
		headers = append(headers, schemas.HeaderCheckOutOverride, strings.Join(lifts, ","))
	}
	var stored json.RawMessage
	answer, err := c.exchange(ctx, timeout, http.MethodPost, "/loan-storage/loans", toLoanJSON(loan), &stored, headers...)
	if err != nil {
		return circulation.CheckedOut{}, err
	}
	created, err := decodeLoan(stored)
	if err != nil {
		return circulation.CheckedOut{}, err
	}
	waited, _ := strconv.Atoi(answer.Get(schemas.HeaderLockAcquired))
	return circulation.CheckedOut{Loan: created, Item: item.CheckedOut(),
		LockReleased: lockID != "" && answer.Get(schemas.HeaderLockReleased) == "true",
		LockWaited:   time.Duration(waited) * time.Millisecond, Replayed: answer.Get(schemas.HeaderWriteReplayed) == "true"}, nil
}

// acquisitionTerms is schemas.HeaderAcquireLock of a write that acquires
// its lock on acquire's terms.
func acquisitionTerms(acquire *circulation.LockAcquisition) string {
	terms := url.Values{"ttlMs": {strconv.FormatInt(acquire.TTL.Milliseconds(), 10)}}
	if acquire.Wait > 0 {
		terms.Set("waitMs", strconv.FormatInt(acquire.Wait.Milliseconds(), 10))
	}
	if h := acquire.Holder.Instance; h != "" {
		terms.Set("instance", h)
	}
	if b := acquire.Holder.ItemBarcode; b != "" {
		terms.Set("itemBarcode", b)
	}
	return terms.Encode()
}

// CheckOutInOne implements circulation.Storage: the check-out asked of
// storage in one call (POST /check-out-storage/check-outs), under the
// lock lockID, acquired on acquire's terms and released with the loan.
// A check-out whose write had landed is answered with its loan alone:
// Patron is then nil, and Item the zero Item.
func (c *Client) CheckOutInOne(ctx context.Context, req circulation.CheckOutRequest, loanID, lockID string,
	acquire circulation.LockAcquisition) (circulation.CheckedOutInOne, error) {
	headers := append(writeHeaders(ctx), schemas.HeaderLockID, lockID, schemas.HeaderReleaseLock, "true",
		schemas.HeaderAcquireLock, acquisitionTerms(&acquire))
	// The loan date keeps the offset it was given with: the due date is
	// counted from it in that offset, as the two-call check-out counts it
	// (a month on from 1 February at 01:00+02:00 is 1 March there, not
	// 3 March, as it would be from 31 January at 23:00Z).
	body := checkOutInOneJSON{ID: loanID, ItemBarcode: req.ItemBarcode, UserBarcode: req.UserBarcode, ServicePointID: req.ServicePointID,
		LoanDate: req.LoanDate.Format(schemas.TimeFormat)}
	var v struct {
		Loan         json.RawMessage   `json:"loan"`
		User         *patronJSON       `json:"user"`
		Item         json.RawMessage   `json:"item"`
		MaterialType *materialTypeJSON `json:"materialType"`
	}
	answer, err := c.exchange(ctx, c.timeout+acquire.Wait, http.MethodPost, "/check-out-storage/check-outs", body, &v, headers...)
	if err != nil {
		return circulation.CheckedOutInOne{}, err
	}
	created, err := decodeLoan(v.Loan)
	if err != nil {
		return circulation.CheckedOutInOne{}, err
	}
	waited, _ := strconv.Atoi(answer.Get(schemas.HeaderLockAcquired))
	out := circulation.CheckedOutInOne{CheckedOut: circulation.CheckedOut{Loan: created,
		LockReleased: answer.Get(schemas.HeaderLockReleased) == "true",
		LockWaited:   time.Duration(waited) * time.Millisecond}}
	if u := v.User; u != nil {
		out.Patron = u.patron()
	}
	if v.Item != nil {
		item, err := decodeItemOfType(v.Item, v.MaterialType)
		if err != nil {
			return circulation.CheckedOutInOne{}, err
		}
		out.Item = item.CheckedOut()
	}
	return out, nil
}

// checkOutInOneJSON is schemas/check-out-storage-request.json.
type checkOutInOneJSON struct {
	ID             string `json:"id"`
	ItemBarcode    string `json:"itemBarcode"`
	UserBarcode    string `json:"userBarcode"`
	ServicePointID string `json:"servicePointId"`
	LoanDate       string `json:"loanDate"`
}

func toLoanJSON(l circulation.Loan) loanJSON {
	return loanJSON{ID: l.ID, UserID: l.UserID, ItemID: l.ItemID, LoanDate: schemas.FormatTime(l.LoanDate), DueDate: schemas.FormatTime(l.DueDate),
		ReturnDate: schemas.FormatTime(l.ReturnDate), Action: l.Action, ActionComment: l.ActionComment,
		Status: statusJSON{Name: l.Status}, LoanPolicyID: l.LoanPolicyID,
		CheckoutServicePointID: l.CheckoutServicePointID, CheckinServicePointID: l.CheckinServicePointID,
		PatronGroupAtCheckout: l.PatronGroupIDAtCheckout, Offline: toOfflineJSON(l.Offline)}
}

// toOfflineJSON is a loan's offline as sent: storage writes its broken
// rules itself.
func toOfflineJSON(o *circulation.OfflineRecord) *offlineJSON {
	if o == nil {
		return nil
	}
	return &offlineJSON{TransactionDate: schemas.FormatTime(o.TransactionDate), RecordedBy: o.RecordedBy, Kiosk: o.Kiosk}
}

// checkedInLoan is the stored loan document with the fields check-in
// changes.
func (c *Client) checkedInLoan(loan circulation.Loan) (json.RawMessage, error) {
	fields := map[string]any{"status": statusJSON{Name: loan.Status}, "action": loan.Action}
	if !loan.ReturnDate.IsZero() {
		fields["returnDate"] = schemas.FormatTime(loan.ReturnDate)
	}
	if loan.CheckinServicePointID != "" {
		fields["checkinServicePointId"] = loan.CheckinServicePointID
	}
	doc, err := withFields(loan.Doc, fields)
	if err != nil {
		return nil, err
	}
	return c.readableDates(loan.ID, doc)
}

// optionalLoanDates are the dates a loan may be without: one stored that
// cannot be read is left out of the loan written back.
var optionalLoanDates = []string{"dueDate", "claimedReturnedDate", "declaredLostDate"}

// readableDates is loan id's document doc without the optional dates it
// stores that cannot be read (schemas.ParseDateTime: a value stored before
// storage held dates to it, or written in SQL), logged: a check-in or a
// loan action of such a loan goes through, rather than being refused for a
// date it did not write.
func (c *Client) readableDates(id string, doc json.RawMessage) (json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(doc, &m); err != nil {
		return nil, errs.Errorf(errs.KindInternal, schemas.CodeInternal, "unreadable record").Because(err)
	}
	var dropped []string
	for _, f := range optionalLoanDates {
		raw, ok := m[f]
		if !ok {
			continue
		}
		var v string
		if json.Unmarshal(raw, &v) == nil {
			if _, err := schemas.ParseDateTime(v); err == nil {
				continue
			}
		}
		delete(m, f)
		dropped = append(dropped, f+"="+string(raw))
	}
	if len(dropped) == 0 {
		return doc, nil
	}
	c.logger.Warn("a loan's stored dates cannot be read; the loan is written without them", slog.String("loan_id", id),
		slog.Any("dropped", dropped))
	return json.Marshal(m)
}

// CheckInItem implements circulation.Storage: the loan's replacement
// carrying the item's version, which storage applies in one transaction
// with the item's update, answering what it wrote.
func (c *Client) CheckInItem(ctx context.Context, loan circulation.Loan, item circulation.Item) (circulation.Loan, circulation.Returned, error) {
	doc, err := c.checkedInLoan(loan)
	if err != nil {
		return circulation.Loan{}, circulation.Returned{}, err
	}
	var written checkInWritten
	if err := c.call(ctx, http.MethodPut, "/loan-storage/loans/"+url.PathEscape(loan.ID), doc, &written,
		append(writeHeaders(ctx), schemas.HeaderCheckInItemVersion, strconv.Itoa(item.Version))...); err != nil {
		return circulation.Loan{}, circulation.Returned{}, err
	}
	closed, err := written.closed()
	if err != nil || closed == nil {
		// None closed: the check-in came from before the open loan
		// (returned's BeforeLoan).
		closed = &circulation.Loan{}
	}
	returned, rerr := written.returned()
	return *closed, returned, errors.Join(err, rerr)
}

// closed is the loan a check-in closed, as storage wrote it; nil for a
// check-in of an item without one.
func (w checkInWritten) closed() (*circulation.Loan, error) {
	if len(w.Loan) == 0 || string(w.Loan) == "null" {
		return nil, nil
	}
	loan, err := decodeLoan(w.Loan)
	return &loan, err
}

// checkInWritten is storage's answer to a check-in's write
// (schemas/check-in-written.json).
type checkInWritten struct {
	Item                json.RawMessage              `json:"item"`
	Loan                json.RawMessage              `json:"loan"`
	Request             json.RawMessage              `json:"request"`
	Requester           json.RawMessage              `json:"requester"`
	PickupServicePoint  *circulation.ServicePointRef `json:"pickupServicePoint"`
	CheckInServicePoint *circulation.ServicePointRef `json:"checkInServicePoint"`
	ReturnedBeforeLoan  json.RawMessage              `json:"returnedBeforeLoan"`
}

func (w checkInWritten) returned() (circulation.Returned, error) {
	item, err := decodeItem(w.Item)
	if err != nil {
		return circulation.Returned{}, err
	}
	r := circulation.Returned{Item: item, Request: w.Request, Requester: w.Requester}
	if w.PickupServicePoint != nil {
		r.Pickup = *w.PickupServicePoint
	}
	if w.CheckInServicePoint != nil {
		r.CheckedInAt = *w.CheckInServicePoint
	}
	if len(w.ReturnedBeforeLoan) > 0 && string(w.ReturnedBeforeLoan) != "null" {
		open, err := decodeLoan(w.ReturnedBeforeLoan)
		if err != nil {
			return circulation.Returned{}, err
		}
		r.BeforeLoan = &open
	}
	return r, nil
}

// ReturnItem implements circulation.Storage: the item's replacement with
// the check-in's service point, which storage applies as a check-in of
// an item without an open loan, at the version read, answering what it
// wrote.
func (c *Client) ReturnItem(ctx context.Context, item circulation.Item, servicePointID string) (circulation.Returned, *circulation.Loan, error) {
	var written checkInWritten
	if err := c.call(ctx, http.MethodPut, "/item-storage/items/"+url.PathEscape(item.ID), item.Doc, &written,
		append(writeHeaders(ctx), schemas.HeaderCheckInServicePoint, servicePointID)...); err != nil {
		return circulation.Returned{}, nil, err
	}
	closed, err := written.closed()
	if err != nil {
		return circulation.Returned{}, nil, err
	}
	returned, err := written.returned()
	return returned, closed, err
}

// ActOnLoan implements circulation.Storage: the loan's replacement with
// the action's fields, carrying the item's version, which storage applies
// in one transaction with the item's update (or, for a change of due
// date, its check that the item is as read).
func (c *Client) ActOnLoan(ctx context.Context, loan circulation.Loan, item circulation.Item) error {
	fields := map[string]any{"action": loan.Action}
	// A declaration of loss always writes its comment, "" when none was
	// given, as FOLIO's does; a claim returned only a comment it was given.
	if loan.ActionComment != "" || loan.Action == circulation.ActionDeclaredLost {
		fields["actionComment"] = loan.ActionComment
	}
	if !loan.ClaimedReturnedDate.IsZero() {
		fields["claimedReturnedDate"] = schemas.FormatTime(loan.ClaimedReturnedDate)
	}
	if !loan.DeclaredLostDate.IsZero() {
		fields["declaredLostDate"] = schemas.FormatTime(loan.DeclaredLostDate)
	}
	var gone []string
	if loan.Action == circulation.ActionDueDateChanged {
		// The new due date; the comment was the earlier action's, and the
		// reminders counted from the earlier date start again (FOLIO's
		// resetReminders), as a renewal's and a recall's do.
		fields["dueDate"] = schemas.FormatTime(loan.DueDate)
		gone = append(gone, "actionComment", "reminders")
	}
	doc, err := withFields(loan.Doc, fields)
	if err == nil && len(gone) > 0 {
		doc, err = withoutFields(doc, gone...)
	}
	if err == nil {
		doc, err = c.readableDates(loan.ID, doc)
	}
	if err != nil {
		return err
	}
	headers := append(writeHeaders(ctx), schemas.HeaderLoanActionItemVersion, strconv.Itoa(item.Version))
	if loan.ActionServicePointID != "" {
		headers = append(headers, schemas.HeaderLoanActionServicePoint, loan.ActionServicePointID)
	}
	return c.call(ctx, http.MethodPut, "/loan-storage/loans/"+url.PathEscape(loan.ID), doc, nil, headers...)
}

// ReplaceLoan implements circulation.Storage: the loan's replacement with
// its action and comment, at the version read.
func (c *Client) ReplaceLoan(ctx context.Context, loan circulation.Loan) error {
	doc, err := withFields(loan.Doc, map[string]any{"action": loan.Action, "actionComment": loan.ActionComment})
	if err == nil {
		doc, err = c.readableDates(loan.ID, doc)
	}
	if err != nil {
		return err
	}
	return c.call(ctx, http.MethodPut, "/loan-storage/loans/"+url.PathEscape(loan.ID), doc, nil, writeHeaders(ctx)...)
}

// RenewLoan implements circulation.Storage: the loan's replacement with the
// renewal's fields (reminders gone, and the actionComment but an
// override's, as FOLIO's renewal removes them), carrying the renewal count
// read and the refusals an override lifts.
func (c *Client) RenewLoan(ctx context.Context, loan circulation.Loan, count int, lifted circulation.RenewalOverrides) (circulation.Loan, error) {
	doc, err := withFields(loan.Doc, map[string]any{"dueDate": schemas.FormatTime(loan.DueDate), "action": loan.Action,
		"renewalCount": loan.RenewalCount, "loanPolicyId": loan.LoanPolicyID})
	if err != nil {
		return circulation.Loan{}, err
	}
	if doc, err = withoutFields(doc, "actionComment", "reminders"); err != nil {
		return circulation.Loan{}, err
	}
	headers := append(writeHeaders(ctx), schemas.HeaderRenewalCount, strconv.Itoa(count))
	if blocks := lifted.Blocks(); len(blocks) > 0 {
		if doc, err = withFields(doc, map[string]any{"actionComment": loan.ActionComment}); err != nil {
			return circulation.Loan{}, err
		}
		headers = append(headers, schemas.HeaderRenewalOverride, strings.Join(blocks, ","))
	}
	var stored json.RawMessage
	if err := c.call(ctx, http.MethodPut, "/loan-storage/loans/"+url.PathEscape(loan.ID), doc, &stored, headers...); err != nil {
		return circulation.Loan{}, err
	}
	return decodeLoan(stored)
}

// ItemByID implements circulation.Storage.
func (c *Client) ItemByID(ctx context.Context, id string) (circulation.Item, error) {
	var doc json.RawMessage
	if err := c.call(ctx, http.MethodGet, "/item-storage/items/"+url.PathEscape(id), nil, &doc); err != nil {
		return circulation.Item{}, err
	}
	return decodeItem(doc)
}

// LoanByID implements circulation.Storage.
func (c *Client) LoanByID(ctx context.Context, id string) (circulation.Loan, error) {
	doc, err := c.Loan(ctx, id)
	if err != nil {
		return circulation.Loan{}, err
	}
	return decodeLoan(doc)
}

// Loan implements circulation.Storage.
func (c *Client) Loan(ctx context.Context, id string) (json.RawMessage, error) {
	var doc json.RawMessage
	err := c.call(ctx, http.MethodGet, "/loan-storage/loans/"+url.PathEscape(id), nil, &doc)
	return doc, err
}

// Loans implements circulation.Storage.
func (c *Client) Loans(ctx context.Context, f circulation.LoanFilter) (json.RawMessage, error) {
	var doc json.RawMessage
	err := c.call(ctx, http.MethodGet, "/loan-storage/loans"+query("userId", f.UserID, "itemId", f.ItemID, "status", f.Status, "query", f.Query,
		"offset", fmt.Sprint(f.Offset), "limit", fmt.Sprint(f.Limit)), nil, &doc)
	return doc, err
}

// AnonymizeLoans implements circulation.Storage: POST
// /anonymize-storage-loans.
func (c *Client) AnonymizeLoans(ctx context.Context, ids []string) (circulation.LoansAnonymized, error) {
	var out circulation.LoansAnonymized
	err := c.call(ctx, http.MethodPost, "/anonymize-storage-loans", map[string]any{"loanIds": ids}, &out)
	return out, err
}

// PlaceRequest implements circulation.Storage.
func (c *Client) PlaceRequest(ctx context.Context, id string, doc json.RawMessage) (json.RawMessage, error) {
	var stored json.RawMessage
	err := c.call(ctx, http.MethodPost, "/request-storage/requests", doc, &stored,
		append(writeHeaders(ctx), schemas.HeaderRequestRules, schemas.RequestRulesCirculation)...)
	return stored, err
}

// ReplaceRequest implements circulation.Storage.
func (c *Client) ReplaceRequest(ctx context.Context, id string, doc json.RawMessage) error {
	return c.call(ctx, http.MethodPut, "/request-storage/requests/"+url.PathEscape(id), doc, nil,
		append(writeHeaders(ctx), schemas.HeaderRequestRules, schemas.RequestRulesCirculation)...)
}

// ReorderQueue implements circulation.Storage.
func (c *Client) ReorderQueue(ctx context.Context, item string, order []circulation.QueuePlace) error {
	return c.call(ctx, http.MethodPost, "/request-storage/queues/"+url.PathEscape(item)+"/reorder",
		map[string]any{"reorderedQueue": order}, nil, writeHeaders(ctx)...)
}

// writeHeaders are the headers naming the write ctx carries
// (circulation.WriteOf): its id, and the digest of the client's request
// when its id was made from the client's Idempotency-Key.
func writeHeaders(ctx context.Context) []string {
	w, ok := circulation.WriteOf(ctx)
	switch {
	case !ok:
		return nil
	case w.Keyed:
		return []string{schemas.HeaderWriteID, w.ID, schemas.HeaderWriteDigest, w.Digest}
	}
	return []string{schemas.HeaderWriteID, w.ID}
}

// Landed implements circulation.Storage: GET /write-storage/writes/{id},
// the answer the write kept decoded for its kind.
func (c *Client) Landed(ctx context.Context, id string) (circulation.Landed, bool, error) {
	var w struct {
		Kind   string          `json:"kind"`
		Digest string          `json:"digest"`
		Answer json.RawMessage `json:"answer"`
	}
	err := c.call(ctx, http.MethodGet, "/write-storage/writes/"+url.PathEscape(id), nil, &w)
	switch {
	case errs.IsKind(err, errs.KindNotFound):
		return circulation.Landed{}, false, nil
	case err != nil:
		return circulation.Landed{}, false, err
	}
	l := circulation.Landed{Kind: w.Kind, Digest: w.Digest}
	switch w.Kind {
	case schemas.WriteCheckOut, schemas.WriteRenewal:
		loan, err := decodeLoan(w.Answer)
		if err != nil {
			return circulation.Landed{}, false, err
		}
		l.Loan = &loan
	case schemas.WriteCheckIn:
		var written checkInWritten
		if err := json.Unmarshal(w.Answer, &written); err != nil {
			return circulation.Landed{}, false, errs.Errorf(errs.KindInternal, schemas.CodeInternal, "unreadable check-in").Because(err)
		}
		returned, err := written.returned()
		if err != nil {
			return circulation.Landed{}, false, err
		}
		if l.Loan, err = written.closed(); err != nil {
			return circulation.Landed{}, false, err
		}
		l.Returned = &returned
	case schemas.WriteRequestCreate:
		l.Request = w.Answer
	case schemas.WriteFeeFineAction:
		l.FeeFine = w.Answer
	}
	return l, true, nil
}
