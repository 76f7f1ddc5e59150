// Package notices tells patrons what happened to their loans and
// requests, as FOLIO's patron notice policies say: it schedules the
// notices each change calls for (Schedule) and sends those due over SMTP
// (Send), one instance at a time (Runner).
//
// A change is recorded by the write that makes it, in its own
// transaction (migration 37's triggers add a row of notice_change), so
// none is lost; Schedule takes each change once: it writes the notices
// the change calls for, makes obsolete those it ends (a due date moved,
// a loan returned), and deletes the change, in one transaction.
package notices

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/circulation-storage/internal/rules"
	"github.com/checkoutlock/schemas"
)

// Policy is what a patron notice policy holds that the sender acts on.
type Policy struct {
	Active         *bool    `json:"active"`
	LoanNotices    []Notice `json:"loanNotices"`
	RequestNotices []Notice `json:"requestNotices"`
}

// Notice is one notice of a policy.
type Notice struct {
	TemplateID  string `json:"templateId"`
	Format      string `json:"format"`
	Frequency   string `json:"frequency"`
	RealTime    bool   `json:"realTime"`
	SendOptions struct {
		SendHow   string  `json:"sendHow"`
		SendWhen  string  `json:"sendWhen"`
		SendBy    *Period `json:"sendBy"`
		SendEvery *Period `json:"sendEvery"`
	} `json:"sendOptions"`
}

// Period is a policy's period: {duration, intervalId}.
type Period struct {
	Duration   int    `json:"duration"`
	IntervalID string `json:"intervalId"`
}

// Length is the period, as FOLIO counts its units (a month of 31 days);
// zero for none.
func (p *Period) Length() time.Duration {
	if p == nil {
		return 0
	}
	minutes := int64(p.Duration) * int64(schemas.LoanPeriodMinutes[p.IntervalID])
	return time.Duration(min(minutes, maxPeriodMinutes)) * time.Minute
}

// maxPeriodMinutes bounds a period: a hundred years (a policy's duration
// of months may be larger than a time.Duration holds).
const maxPeriodMinutes = 100 * 366 * 24 * 60

// timing is the notice's sendHow, Upon At when it names none.
func (n Notice) timing() string {
	if n.SendOptions.SendHow == "" {
		return schemas.NoticeUponAt
	}
	return n.SendOptions.SendHow
}

// recurring is whether the notice is sent again every sendEvery: a
// notice before or after a date, whose policy says so.
func (n Notice) recurring() bool {
	return n.Frequency == schemas.NoticeRecurring && n.timing() != schemas.NoticeUponAt && n.SendOptions.SendEvery.Length() > 0
}

// change is a row of notice_change.
type change struct {
	pos             int64
	tenant          storage.Tenant
	kind, id, event string
	record          json.RawMessage
	at              time.Time
}

// dated are the events a notice is sent before, at or after a date of:
// the date's field in the record, and the event whose change sets it.
var dated = map[string]struct{ field, setBy string }{
	schemas.NoticeDueDate:           {"dueDate", ""},
	schemas.NoticeHoldExpiration:    {"holdShelfExpirationDate", schemas.NoticeAvailable},
	schemas.NoticeRequestExpiration: {"requestExpirationDate", ""},
}

// eventRequestDatesChanged is migration 37's name for a request's
// expiration date or hold shelf expiration date changed, its status
// not: no notice is sent on it, its notices before them are scheduled
// again.
const eventRequestDatesChanged = "Request dates changed"

// loanRescheduling are the loan events after which its due date notices
// are scheduled again from its due date as it now is (its earlier ones
// obsolete); a check-in makes them obsolete.
var loanRescheduling = map[string]bool{schemas.NoticeCheckOut: true, schemas.NoticeRenewed: true,
	schemas.NoticeItemRecalled: true, schemas.NoticeManualDueDateChange: true, eventDueDateChanged: true, schemas.NoticeCheckIn: true}

// eventDueDateChanged is migration 37's name for a loan's due date moved
// by anything but a renewal, a recall or a librarian's change (migration
// 42's schemas.NoticeManualDueDateChange): no notice is sent on it, its
// due date notices are scheduled again.
const eventDueDateChanged = "Due date changed"

var (
	changesSQL = postgres.WithTables(`SELECT pos, tenant_id, kind, record_id::text, event, record, changed_at FROM %s ORDER BY pos LIMIT $1`,
		postgres.TableNoticeChange)
	takeChangeSQL = postgres.WithTables(`DELETE FROM %s WHERE pos = $1`, postgres.TableNoticeChange)
	// chargeNoticeSQL is a fee/fine's charge notice's template: its
	// type's chargeNoticeId, else its owner's defaultChargeNoticeId.
	chargeNoticeSQL = postgres.WithTables(`
SELECT coalesce(t.jsonb ->> 'chargeNoticeId', o.jsonb ->> 'defaultChargeNoticeId', '')
  FROM %s t LEFT JOIN %s o ON o.tenant_id = t.tenant_id AND o.id = @owner::uuid
 WHERE t.tenant_id = @tenant AND t.id = @type::uuid`, postgres.TableFeeFineType, postgres.TableFeeFineOwner)
	// policySQL is the notice policy the circulation rules choose for a
	// loan or a request: for its patron's group and its item's material
	// and loan types. Parameters: tenant, patron, item.
	policySQL = postgres.WithTables(`
SELECT np.id::text, np.jsonb
  FROM %[1]s p JOIN %[2]s i ON i.tenant_id = p.tenant_id AND i.id = @item::uuid
  JOIN %[3]s np ON np.tenant_id = p.tenant_id AND np.id = (`+rules.ChosenSQL("notice_policy_id", "p.tenant_id", "p.patron_group_id",
		"i.material_type_id", "coalesce(i.temporary_loan_type_id, i.permanent_loan_type_id)")+`)
 WHERE p.tenant_id = @tenant AND p.id = @patron::uuid`, postgres.TablePatron, postgres.TableItem, postgres.TableNoticePolicy)
	// obsoleteSQL makes a loan's or a request's scheduled notices of the
	// events named obsolete.
	obsoleteSQL = postgres.WithTables(`
UPDATE %s SET jsonb = jsonb || jsonb_build_object('status', '`+schemas.NoticeObsolete+`')
 WHERE tenant_id = @tenant AND (loan_id = @id::uuid OR request_id = @id::uuid) AND status = '`+schemas.NoticeScheduled+`'
   AND jsonb ->> 'triggeringEvent' = ANY(@events::text[]) AND jsonb ? 'basisDate'`, postgres.TableScheduledNotice)
	// scheduledFromSQL is whether a loan's or a request's notices of
	// @event are scheduled from the date @basis: one is there, of any
	// status but Obsolete, and none scheduled from another date waits.
	scheduledFromSQL = postgres.WithTables(`
SELECT EXISTS (SELECT 1 FROM %[1]s WHERE tenant_id = @tenant AND (loan_id = @id::uuid OR request_id = @id::uuid)
                  AND jsonb ->> 'triggeringEvent' = @event AND status <> '`+schemas.NoticeObsolete+`' AND jsonb ->> 'basisDate' = @basis)
   AND NOT EXISTS (SELECT 1 FROM %[1]s WHERE tenant_id = @tenant AND (loan_id = @id::uuid OR request_id = @id::uuid)
                      AND jsonb ->> 'triggeringEvent' = @event AND status = '`+schemas.NoticeScheduled+`'
                      AND jsonb ->> 'basisDate' IS DISTINCT FROM @basis)`, postgres.TableScheduledNotice)
	insertSQL = postgres.WithTables(`INSERT INTO %s (tenant_id, id, jsonb, next_run_at) VALUES (@tenant, @id::uuid, @doc, @at)`,
		postgres.TableScheduledNotice)
)

// Schedule takes up to batch changes, oldest first, each in a
// transaction of its own, and answers how many it took.
func Schedule(ctx context.Context, db *postgres.DB, batch int) (int, error) {
	rows, err := db.Pool.Query(ctx, changesSQL, batch)
	if err != nil {
		return 0, err
	}
	changes, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (change, error) {
		var c change
		err := row.Scan(&c.pos, &c.tenant, &c.kind, &c.id, &c.event, &c.record, &c.at)
		return c, err
	})
	if err != nil {
		return 0, err
	}
	// A change that cannot be taken holds up no other record's: it is
	// tried again at the next round. Its record's later changes wait for
	// it, each change scheduling from the record as it was then: taken
	// after a later one, it would undo what that one scheduled.
	var errs []error
	type record struct {
		tenant   storage.Tenant
		kind, id string
	}
	failed := map[record]bool{}
	for _, c := range changes {
		of := record{c.tenant, c.kind, c.id}
		if failed[of] {
			continue
		}
		if err := db.InTx(ctx, c.tenant, func(tx pgx.Tx) error { return schedule(ctx, tx, c) }); err != nil {
			failed[of] = true
			errs = append(errs, fmt.Errorf("schedule the notices of %s %s (%s): %w", c.kind, c.id, c.event, err))
		}
	}
	return len(changes), errors.Join(errs...)
}

// schedule writes the notices change c calls for, in tx, and deletes it;
// a change another instance took is left.
func schedule(ctx context.Context, tx pgx.Tx, c change) error {
	tag, err := tx.Exec(ctx, takeChangeSQL, c.pos)
	if err != nil || tag.RowsAffected() == 0 {
		return err
	}
	var rec struct {
		UserID      string `json:"userId"`
		RequesterID string `json:"requesterId"`
		ItemID      string `json:"itemId"`
		LoanID      string `json:"loanId"`
		FeeFineID   string `json:"feeFineId"`
		OwnerID     string `json:"ownerId"`
	}
	if err := json.Unmarshal(c.record, &rec); err != nil {
		return err
	}
	if c.kind == "feefine" {
		var template string
		err := tx.QueryRow(ctx, chargeNoticeSQL, pgx.StrictNamedArgs{"tenant": string(c.tenant), "type": rec.FeeFineID,
			"owner": rec.OwnerID}).Scan(&template)
		if errors.Is(err, pgx.ErrNoRows) || err == nil && template == "" {
			return nil // no charge notice
		}
		if err != nil {
			return err
		}
		var n Notice
		n.TemplateID, n.Format, n.RealTime, n.SendOptions.SendWhen = template, schemas.NoticeEmail, true, schemas.NoticeFeeFineCharged
		refs := map[string]any{"feeFineId": c.id}
		if rec.LoanID != "" {
			refs["loanId"] = rec.LoanID
		}
		return insert(ctx, tx, c.tenant, rec.UserID, "", n, c.at, "", refs)
	}
	patron := rec.UserID
	if c.kind == "request" {
		patron = rec.RequesterID
	}
	if patron == "" {
		return nil // no one to tell (a closed loan anonymized as it closed)
	}
	// No policy, or one not active: nothing is sent, and the notices the
	// change moves are made obsolete all the same.
	var list []Notice
	var policyID string
	var doc json.RawMessage
	err = tx.QueryRow(ctx, policySQL, pgx.StrictNamedArgs{"tenant": string(c.tenant), "patron": patron, "item": rec.ItemID}).Scan(&policyID, &doc)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return err
	}
	if err == nil {
		var p Policy
		if err := json.Unmarshal(doc, &p); err != nil {
			return err
		}
		if p.Active == nil || *p.Active {
			list = p.LoanNotices
			if c.kind == "request" {
				list = p.RequestNotices
			}
		}
	}
	// The notices of the dates the change moves are scheduled again, from
	// the dates the record has now, where they still apply (their earlier
	// ones obsolete); those already scheduled from the date the record has
	// now are kept as they are, sent or not: a change that left the date
	// where it was (a recall that keeps the due date, a request's other
	// date moved) sends nothing again.
	kept := map[string]bool{}
	for _, event := range rescheduled(c) {
		basis, wanted := "", false
		for _, n := range list {
			if n.SendOptions.SendWhen == event && n.Format == schemas.NoticeEmail {
				if _, b, ok := when(n, c); ok {
					basis, wanted = b, true
				}
			}
		}
		if wanted {
			var from bool
			if err := tx.QueryRow(ctx, scheduledFromSQL, pgx.StrictNamedArgs{"tenant": string(c.tenant), "id": c.id,
				"event": event, "basis": basis}).Scan(&from); err != nil {
				return err
			}
			kept[event] = from
		}
		if !kept[event] {
			if _, err := tx.Exec(ctx, obsoleteSQL, pgx.StrictNamedArgs{"tenant": string(c.tenant), "id": c.id,
				"events": []string{event}}); err != nil {
				return err
			}
		}
	}
	for _, n := range list {
		if n.Format != schemas.NoticeEmail || kept[n.SendOptions.SendWhen] {
			continue
		}
		at, basis, ok := when(n, c)
		if !ok {
			continue
		}
		if err := insert(ctx, tx, c.tenant, patron, policyID, n, at, basis, map[string]any{c.kind + "Id": c.id}); err != nil {
			return err
		}
	}
	return nil
}

// rescheduled are the events whose notices change c schedules again from
// the record's dates as they now are: a loan's due date notices after a
// loanRescheduling event; a request's notices before its dates after
// whatever happened to it.
func rescheduled(c change) []string {
	switch {
	case c.kind == "loan" && loanRescheduling[c.event]:
		return []string{schemas.NoticeDueDate}
	case c.kind == "request":
		return []string{schemas.NoticeHoldExpiration, schemas.NoticeRequestExpiration}
	}
	return nil
}

// when is when notice n is due after change c, and the date it is due
// from (empty for a notice upon the event itself); !ok when c does not
// call for it.
func when(n Notice, c change) (at time.Time, basis string, ok bool) {
	event := n.SendOptions.SendWhen
	d, isDated := dated[event]
	switch {
	case !isDated || (event != schemas.NoticeDueDate && n.timing() == schemas.NoticeUponAt):
		// Upon the event itself (a request's expiration when it happens).
		if event != c.event {
			return time.Time{}, "", false
		}
		return c.at, "", true
	case event == schemas.NoticeDueDate && (c.kind != "loan" || !loanRescheduling[c.event] || c.event == schemas.NoticeCheckIn):
		return time.Time{}, "", false
	}
	var doc map[string]any
	if json.Unmarshal(c.record, &doc) != nil {
		return time.Time{}, "", false
	}
	if event != schemas.NoticeDueDate {
		// A request's date: from the change that sets it, or one that
		// moved it while the request waits as the date is for (on the
		// hold shelf; not yet filled).
		status, _ := doc["status"].(string)
		waits := status == schemas.RequestAwaitingPickup
		if event == schemas.NoticeRequestExpiration {
			waits = schemas.RequestIsOpen(status) && status != schemas.RequestAwaitingPickup
		}
		setBy := c.event == d.setBy || d.setBy == "" && isPlaced(c.event)
		if !setBy && !(c.event == eventRequestDatesChanged && waits) {
			return time.Time{}, "", false
		}
	}
	basis, _ = doc[d.field].(string)
	date, err := schemas.ParseDateTime(basis)
	if err != nil {
		return time.Time{}, "", false
	}
	by := n.SendOptions.SendBy.Length()
	switch n.timing() {
	case schemas.NoticeBefore:
		date = date.Add(-by)
	case schemas.NoticeAfter:
		date = date.Add(by)
	}
	return date, basis, true
}

// isPlaced is whether a request's event is its placing.
func isPlaced(event string) bool {
	return event == schemas.NoticePagingRequest || event == schemas.NoticeHoldRequest || event == schemas.NoticeRecallRequest
}

// insert schedules notice n (of policy policyID, if any) for patron, due
// at at from the date basis, about the records refs names (loanId,
// requestId, feeFineId).
func insert(ctx context.Context, tx pgx.Tx, t storage.Tenant, patron, policyID string, n Notice, at time.Time, basis string,
	refs map[string]any) error {
	id := uuid.NewString()
	doc := map[string]any{"id": id, "recipientUserId": patron, "triggeringEvent": n.SendOptions.SendWhen,
		"nextRunTime": schemas.FormatTime(at), "status": schemas.NoticeScheduled, "attempts": 0, "sent": 0,
		"noticeConfig": map[string]any{"timing": n.timing(), "templateId": n.TemplateID, "format": n.Format,
			"sendInRealTime": n.RealTime}}
	if policyID != "" {
		doc["patronNoticePolicyId"] = policyID
	}
	if n.recurring() {
		doc["noticeConfig"].(map[string]any)["recurringPeriod"] = n.SendOptions.SendEvery
	}
	for k, v := range refs {
		doc[k] = v
	}
	if basis != "" {
		doc["basisDate"] = basis
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, insertSQL, pgx.StrictNamedArgs{"tenant": string(t), "id": id, "doc": b, "at": at})
	return err
}
