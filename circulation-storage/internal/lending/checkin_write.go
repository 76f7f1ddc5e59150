package lending

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/checkoutlock/circulation-storage/internal/feesfines"
	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/circulation-storage/internal/record"
	"github.com/checkoutlock/circulation-storage/internal/requests"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
)

// itemStatusSQL is a write of an item's status (a loan action's) at the
// version the write read (@version), which answers 0,
// or the version stored when it differs, or -1 when there is no such item.
// Arguments: @item the item's id, @version, @metadata_user the user for
// the metadata, @tenant.
func itemStatusSQL(status string) string {
	return postgres.WithTables(`
WITH updated AS (
    UPDATE %[1]s SET jsonb = `+record.WithMetadata(record.ItemWithStatus(status), "@metadata_user", true)+`
     WHERE tenant_id = @tenant AND id = @item::uuid AND version = @version RETURNING 0
)
SELECT coalesce((SELECT 0 FROM updated), (SELECT version FROM %[1]s WHERE tenant_id = @tenant AND id = @item::uuid), -1)`, postgres.TableItem)
}

// writeItemStatus runs stmt, an itemStatusSQL, for the item of loan at
// the version the write read, and answers why it wrote nothing: the item
// does not exist, or it changed since (what, the write's verb, says which
// write could not).
func writeItemStatus(ctx context.Context, tx pgx.Tx, t storage.Tenant, stmt string, loan json.RawMessage, version int, what string) error {
	itemID := record.FieldValue(loan, "itemId")
	var stored int
	err := tx.QueryRow(ctx, stmt, itemStatusArgs(ctx, t, itemID, version)).Scan(&stored)
	switch {
	case err != nil:
		return record.InterpretWrite(err, t, storage.Loans, loan)
	case stored < 0:
		return errs.Errorf(errs.KindInvalid, schemas.CodeValidation, "itemId: item %s does not exist", itemID).With("itemId", itemID)
	case stored > 0:
		return errs.Errorf(errs.KindConflict, schemas.CodeVersionConflict,
			"Cannot %s item %s because it has been changed: stored _version is %d, request has %d; nothing was written",
			what, itemID, stored, version).With("_version", fmt.Sprint(stored))
	}
	return nil
}

// itemStatusArgs are itemStatusSQL's arguments.
func itemStatusArgs(ctx context.Context, t storage.Tenant, itemID string, version int) pgx.StrictNamedArgs {
	return pgx.StrictNamedArgs{"item": itemID, "version": version, "metadata_user": record.MetadataUser(ctx), "tenant": string(t)}
}

// CheckInLoan implements storage.LoanWriter: the item takes the status
// its queue gives it (requests.ReturnItem: Available when no request waits) at the
// version the check-in read, and the loan is replaced at the version the
// check-in read, in one transaction.
func (s *Loans) CheckInLoan(ctx context.Context, t storage.Tenant, w storage.CheckInWrite) (storage.CheckInWritten, error) {
	if err := versionRead(w.LoanVersion); err != nil {
		return storage.CheckInWritten{}, err
	}
	var written storage.CheckInWritten
	recorded := false
	_, err := s.db.InTxOnce(ctx, t, schemas.WriteCheckIn, func(tx pgx.Tx) (json.RawMessage, error) {
		// The borrower's row first (borrowerRowSQL): a check-in can charge
		// an overdue fine, which can newly block the borrower. Then the
		// item's row (its queue), then the loan: the order of every write
		// of both (a recall takes the item's queue, then marks the loan),
		// so that none waits for the other while holding what it waits
		// for. The two rows in one round trip.
		itemID, servicePointID := record.FieldValue(w.Loan, "itemId"), record.FieldValue(w.Loan, "checkinServicePointId")
		rows := &pgx.Batch{}
		rows.Queue(borrowerRowSQL, w.LoanID, string(t))
		rows.Queue(itemRowSQL, itemID, string(t))
		if err := tx.SendBatch(ctx, rows).Close(); err != nil {
			return nil, postgres.Interpret(err, t)
		}
		if open, err := s.returnedBeforeLoan(ctx, tx, t, w); err != nil || open != nil {
			if err != nil {
				return nil, err
			}
			recorded = true
			if written, err = checkInWritten(ctx, tx, t, itemID, "", servicePointID, requests.Returned{}); err != nil {
				return nil, err
			}
			written.ReturnedBeforeLoan = open
			return json.Marshal(written)
		}
		action := record.FieldValue(w.Loan, "action")
		if err := claimResolvable(ctx, tx, t, action, itemID, w.ItemVersion); err != nil {
			return nil, err
		}
		// The loan's fees, from the loan as it stands before the check-in:
		// a lost item's given back, an overdue loan's fine (none when the
		// library found the item the patron said they returned).
		if err := feesfines.SettleLostItemReturned(ctx, tx, t, w.LoanID); err != nil {
			return nil, err
		}
		if schemas.CheckInChargesOverdueFine(action) {
			if err := feesfines.ChargeOverdueFine(ctx, tx, t, w.LoanID, record.FieldValue(w.Loan, "returnDate"), servicePointID); err != nil {
				return nil, err
			}
		}
		r, err := requests.ReturnItem(ctx, tx, t, itemID, w.ItemVersion, servicePointID)
		if err != nil {
			return nil, err
		}
		// The loan closed is the item's open loan, as it was: a check-in
		// closes a loan, and changes nothing else of whose and of what
		// it is.
		if err := record.Update(ctx, tx, t, storage.Loans, w.LoanID, w.LoanVersion, w.Loan, checkInGuard); err != nil {
			return nil, loanChanged(ctx, tx, t, err, w.LoanID, "checked in")
		}
		if _, err := tx.Exec(ctx, checkInEventSQL, w.Loan, string(t)); err != nil {
			return nil, postgres.Interpret(err, t)
		}
		written, err = checkInWritten(ctx, tx, t, itemID, w.LoanID, servicePointID, r)
		if err != nil {
			return nil, err
		}
		return json.Marshal(written)
	})
	if err == nil && recorded && s.history && s.events != nil {
		s.events.Event(storage.EventReturnedBeforeLoan)
	}
	return written, err
}

// itemStatusNowSQL is the status and version of the item $1 of the
// tenant $2, its row held by the write.
var itemStatusNowSQL = postgres.WithTables(`SELECT status_name, version FROM %s WHERE tenant_id = $2 AND id = $1::uuid`, postgres.TableItem)

// claimResolvable refuses a check-in recording action that resolves a claim
// (schemas.ResolvesClaim) of the item itemID when the item, its row held
// by the write and at the version the check-in read (version), is not
// claimed returned: a resolution waives no fine of an item nobody
// claimed. An item gone or changed since is the version's fence to
// answer (the check-in then reads it again), not a refusal of the
// resolution.
func claimResolvable(ctx context.Context, tx pgx.Tx, t storage.Tenant, action, itemID string, version int) error {
	if !schemas.ResolvesClaim(action) {
		return nil
	}
	var status string
	var stored int
	switch err := tx.QueryRow(ctx, itemStatusNowSQL, itemID, string(t)).Scan(&status, &stored); {
	case errors.Is(err, pgx.ErrNoRows):
		return nil
	case err != nil:
		return postgres.Interpret(err, t)
	}
	if stored == version && !schemas.ClaimStands(status) {
		return errs.Errorf(errs.KindInvalid, schemas.CodeValidation,
			"action: %s resolves a claim, and item %s is not claimed returned; nothing was written", action, itemID).With("action", action)
	}
	return nil
}

// returnedBeforeLoan is the loan w closes, as stored, when w is dated
// before it was lent (schemas.ReturnedBeforeLent: a check-in sent late,
// after the item came back and was lent again): then nothing is closed or
// changed, and the check-in is a line of the lock history for the desk
// (storage.EventReturnedBeforeLoan) and an event, in tx. Nil when w returns
// the loan, or when the loan is not open at the version w read (the
// check-in's own write then says why). The loan is read for share: no
// write of it comes between this judgment and the commit.
func (s *Loans) returnedBeforeLoan(ctx context.Context, tx pgx.Tx, t storage.Tenant, w storage.CheckInWrite) (json.RawMessage, error) {
	returned, err := schemas.ParseDateTime(record.FieldValue(w.Loan, "returnDate"))
	if err != nil {
		return nil, nil
	}
	var open json.RawMessage
	err = tx.QueryRow(ctx, postgres.WithTables(`SELECT jsonb FROM %s WHERE tenant_id = $2 AND id = $1::uuid AND version = $3
           AND status_name = `+postgres.Lit(schemas.LoanOpen)+` FOR SHARE`, postgres.TableLoan), w.LoanID, string(t), w.LoanVersion).Scan(&open)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, nil
	case err != nil:
		return nil, postgres.Interpret(err, t)
	}
	lent, err := schemas.ParseDateTime(record.FieldValue(open, "loanDate"))
	if err != nil || !schemas.ReturnedBeforeLent(returned, lent) {
		return nil, nil
	}
	_, err = tx.Exec(ctx, returnedBeforeLoanSQL, pgx.StrictNamedArgs{"tenant": string(t), "open": open, "returned": w.Loan,
		"history": s.history, "by_whom": postgres.HolderValue(storage.CallerFrom(ctx).Holder())})
	if err != nil {
		return nil, postgres.Interpret(err, t)
	}
	return open, nil
}

// returnedBeforeLoanSQL records a check-in dated before the open loan
// (@open) was lent: the lock history's line for the desk (when @history),
// naming the loan and its borrower, and the check-in's event, naming the
// loan left open, the item, where and when the check-in (@returned, the
// loan as the check-in would have closed it) says it came back.
var returnedBeforeLoanSQL = postgres.WithTables(`
WITH line AS (
    INSERT INTO %[1]s (tenant_id, type, user_id, by_whom, loan_id)
    SELECT @tenant, '`+string(storage.EventReturnedBeforeLoan)+`', (@open::jsonb ->> 'userId')::uuid, @by_whom::jsonb, (@open::jsonb ->> 'id')::uuid
     WHERE @history::boolean
)
INSERT INTO %[2]s (tenant_id, kind, type, data)
SELECT @tenant, '`+storage.EventKindCheckIn+`', '`+storage.EventCheckedInBeforeLoan+`', jsonb_build_object('old', NULL, 'new', jsonb_strip_nulls(jsonb_build_object(
       'loanId', @open::jsonb -> 'id', 'userId', @open::jsonb -> 'userId', 'itemId', @open::jsonb -> 'itemId',
       'servicePointId', @returned::jsonb -> 'checkinServicePointId', 'returnDate', @returned::jsonb -> 'returnDate')))
 WHERE `+postgres.OutboxOn, postgres.TableLockEvent, postgres.TableOutbox)

// versionRead refuses a write of a loan that does not name the loan's
// _version it read (version, 0 when absent): a loan's writes are made
// only at the version read, so that no two of them undo each other.
func versionRead(version int) error {
	if version < 1 {
		return errs.Errorf(errs.KindInvalid, schemas.CodeValidation,
			"_version: is required: a loan is written only at the version it was read at").With("_version", "")
	}
	return nil
}

// loanChanged says, of a write of a loan refused because another write
// of it came first (record.Update's CodeVersionConflict), why, as the
// loan stands now (q, the write's transaction, reads it): closed since,
// CodeNoOpenLoan, as the guard of a write at the right version would say;
// otherwise CodeLoanChanged, naming the version stored. Other errors pass.
func loanChanged(ctx context.Context, q postgres.Querier, t storage.Tenant, err error, loanID, verb string) error {
	e, ok := errs.As(err)
	if !ok || e.Code != schemas.CodeVersionConflict {
		return err
	}
	var status string
	if rerr := q.QueryRow(ctx, postgres.WithTables(`SELECT status_name FROM %s WHERE tenant_id = $2 AND id = $1::uuid`, postgres.TableLoan),
		loanID, string(t)).Scan(&status); rerr == nil && status != schemas.LoanOpen {
		return errs.Errorf(errs.KindInvalid, schemas.CodeNoOpenLoan, "Loan %s is not open: it was not %s", loanID, verb).
			With("loanId", loanID)
	}
	out := errs.Errorf(errs.KindConflict, schemas.CodeLoanChanged,
		"Loan %s was changed by another request since it was read; it was not %s, and nothing was written", loanID, verb)
	out.Parameters = append(out.Parameters, e.Parameters...)
	return out.Because(err)
}

// checkInEventSQL records a check-in's event in the outbox, with the
// loan's changes the triggers record: the loan ($1) closed, and where.
var checkInEventSQL = postgres.WithTables(`
INSERT INTO %s (tenant_id, kind, type, data)
SELECT $2, '`+storage.EventKindCheckIn+`', '`+storage.EventCheckedIn+`', jsonb_build_object('old', NULL, 'new', jsonb_strip_nulls(jsonb_build_object(
       'loanId', $1::jsonb -> 'id', 'userId', $1::jsonb -> 'userId', 'itemId', $1::jsonb -> 'itemId',
       'servicePointId', $1::jsonb -> 'checkinServicePointId', 'returnDate', $1::jsonb -> 'returnDate')))
 WHERE `+postgres.OutboxOn, postgres.TableOutbox)

// checkInGuard holds a check-in's loan: the item's open loan, closed, of
// the same borrower and item.
var checkInGuard = &record.Guard{
	Cond: `status_name = ` + postgres.Lit(schemas.LoanOpen) + ` AND ` + record.NewStatus + ` = ` + postgres.Lit(schemas.LoanClosed) + `
           AND user_id = (@doc::jsonb ->> 'userId')::uuid AND item_id = (@doc::jsonb ->> 'itemId')::uuid`,
	State: `status_name`,
	Why: func(id string, state []any, doc json.RawMessage) error {
		if *state[0].(*string) != schemas.LoanOpen {
			return errs.Errorf(errs.KindInvalid, schemas.CodeNoOpenLoan, "Loan %s is not open: there is nothing to check in", id).
				With("loanId", id)
		}
		return errs.Errorf(errs.KindInvalid, schemas.CodeCheckInRequired,
			"A check-in closes the loan (status Closed) and changes neither its userId nor its itemId")
	},
}

// checkInWrittenSQL reads, in a check-in's transaction after its writes,
// what it wrote: item @item as stored, the loan @loan closed (NULL for
// none) as stored, its queue's first request
// @request (NULL for none) as stored, the requester as a staff slip names
// them (no contact data), and the request's pickup point and
// @service_point, where the item was checked in (id, name and code).
var checkInWrittenSQL = `
SELECT i.jsonb, l.jsonb, r.jsonb,
       CASE WHEN u.id IS NOT NULL THEN jsonb_strip_nulls(jsonb_build_object('id', u.id, 'barcode', u.jsonb -> 'barcode',
            'firstName', u.jsonb #> '{personal,firstName}', 'lastName', u.jsonb #> '{personal,lastName}',
            'middleName', u.jsonb #> '{personal,middleName}', 'preferredFirstName', u.jsonb #> '{personal,preferredFirstName}',
            'patronGroup', g.jsonb -> 'group')) END,
       CASE WHEN psp.id IS NOT NULL THEN jsonb_strip_nulls(jsonb_build_object('id', psp.id, 'name', psp.name, 'code', psp.jsonb -> 'code')) END,
       CASE WHEN csp.id IS NOT NULL THEN jsonb_strip_nulls(jsonb_build_object('id', csp.id, 'name', csp.name, 'code', csp.jsonb -> 'code')) END
  FROM ` + postgres.Table(postgres.TableItem) + ` i
  LEFT JOIN ` + postgres.Table(postgres.TableLoan) + ` l ON l.tenant_id = i.tenant_id AND l.id = @loan::uuid
  LEFT JOIN ` + postgres.Table(postgres.TableRequest) + ` r ON r.tenant_id = i.tenant_id AND r.id = @request::uuid
  LEFT JOIN ` + postgres.Table(postgres.TablePatron) + ` u ON u.tenant_id = i.tenant_id AND u.id = r.requester_id
  LEFT JOIN ` + postgres.Table(postgres.TablePatronGroup) + ` g ON g.tenant_id = i.tenant_id AND g.id = u.patron_group_id
  LEFT JOIN ` + postgres.Table(postgres.TableServicePoint) + ` psp ON psp.tenant_id = i.tenant_id AND psp.id = (r.jsonb ->> 'pickupServicePointId')::uuid
  LEFT JOIN ` + postgres.Table(postgres.TableServicePoint) + ` csp ON csp.tenant_id = i.tenant_id AND csp.id = @service_point::uuid
 WHERE i.tenant_id = @tenant AND i.id = @item::uuid`

// checkInWritten reads what a check-in's write (r, of item itemID and
// the loan loanID, "" for none, at servicePointID) wrote, in its
// transaction tx.
func checkInWritten(ctx context.Context, tx pgx.Tx, t storage.Tenant, itemID, loanID, servicePointID string, r requests.Returned) (storage.CheckInWritten, error) {
	var w storage.CheckInWritten
	err := tx.QueryRow(ctx, checkInWrittenSQL, pgx.StrictNamedArgs{"tenant": string(t), "item": itemID, "loan": postgres.Nullable(loanID),
		"request": postgres.Nullable(r.RequestID), "service_point": postgres.Nullable(servicePointID)}).
		Scan(&w.Item, &w.Loan, &w.Request, &w.Requester, &w.PickupServicePoint, &w.CheckInServicePoint)
	return w, postgres.Interpret(err, t)
}

// CheckInItem implements storage.LoanWriter: the check-in of an item with
// no open loan (one in transit reaching its destination, one missing found
// again): its status, and its queue's head's, from the return loop
// (requests.ReturnItem), at the version the check-in read, in one
// transaction.
func (s *Loans) CheckInItem(ctx context.Context, t storage.Tenant, w storage.ItemCheckInWrite) (storage.CheckInWritten, error) {
	var written storage.CheckInWritten
	_, err := s.db.InTxOnce(ctx, t, schemas.WriteCheckIn, func(tx pgx.Tx) (json.RawMessage, error) {
		var open bool
		if err := tx.QueryRow(ctx, postgres.WithTables(`SELECT EXISTS (SELECT 1 FROM %s WHERE tenant_id = $2 AND item_id = $1::uuid AND status_name = `+postgres.Lit(schemas.LoanOpen)+`)`,
			postgres.TableLoan), w.ItemID, string(t)).Scan(&open); err != nil {
			return nil, postgres.Interpret(err, t)
		}
		if open {
			return nil, errs.Errorf(errs.KindInvalid, schemas.CodeCheckInRequired,
				"Item %s has an open loan: its check-in closes the loan (%s)", w.ItemID, schemas.HeaderCheckInItemVersion).With("itemId", w.ItemID)
		}
		r, err := requests.ReturnItem(ctx, tx, t, w.ItemID, w.ItemVersion, w.ServicePointID)
		if err != nil {
			return nil, err
		}
		if written, err = checkInWritten(ctx, tx, t, w.ItemID, "", w.ServicePointID, r); err != nil {
			return nil, err
		}
		return json.Marshal(written)
	})
	return written, err
}
