package postgres

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
)

// checkInItemSQL is a check-in's write of the item: Available, at the
// version the check-in read (itemStatusSQL).
var checkInItemSQL = itemStatusSQL("Available")

// itemStatusSQL is a write of an item's status (a check-in's, a loan
// action's) at the version the write read (@version), which answers 0,
// or the version stored when it differs, or -1 when there is no such item.
// Arguments: @item the item's id, @version, @metadata_user the user for
// the metadata, @tenant.
func itemStatusSQL(status string) string {
	return withTables(`
WITH updated AS (
    UPDATE %[1]s SET jsonb = `+withMetadata(itemWithStatus(status), "@metadata_user", true)+`
     WHERE tenant_id = @tenant AND id = @item::uuid AND version = @version RETURNING 0
)
SELECT coalesce((SELECT 0 FROM updated), (SELECT version FROM %[1]s WHERE tenant_id = @tenant AND id = @item::uuid), -1)`, tableItem)
}

// itemStatusArgs are itemStatusSQL's arguments.
func itemStatusArgs(ctx context.Context, t storage.Tenant, itemID string, version int) pgx.StrictNamedArgs {
	return pgx.StrictNamedArgs{"item": itemID, "version": version, "metadata_user": metadataUser(ctx), "tenant": string(t)}
}

// CheckInLoan implements storage.LoanWriter: the item becomes Available at
// the version the check-in read, and the loan is replaced, in one
// transaction.
func (s *Loans) CheckInLoan(ctx context.Context, t storage.Tenant, w storage.CheckInWrite) error {
	return s.db.inTx(ctx, t, func(tx pgx.Tx) error {
		itemID := fieldValue(w.Loan, "itemId")
		var stored int
		err := tx.QueryRow(ctx, checkInItemSQL, itemStatusArgs(ctx, t, itemID, w.ItemVersion)).Scan(&stored)
		switch {
		case err != nil:
			return interpretWrite(err, t, storage.Loans, w.Loan)
		case stored < 0:
			return errs.Errorf(errs.KindInvalid, schemas.CodeValidation, "itemId: item %s does not exist", itemID).With("itemId", itemID)
		case stored > 0:
			return errs.Errorf(errs.KindConflict, schemas.CodeVersionConflict,
				"Cannot check in item %s because it has been changed: stored _version is %d, request has %d; nothing was written",
				itemID, stored, w.ItemVersion).With("_version", fmt.Sprint(stored))
		}
		// The loan closed is the item's open loan, as it was: a check-in
		// closes a loan, and changes nothing else of whose and of what
		// it is.
		if err := update(ctx, tx, t, storage.Loans, w.LoanID, 0, w.Loan, checkInGuard); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, checkInEventSQL, w.Loan, string(t))
		return interpret(err, t)
	})
}

// checkInEventSQL records a check-in's event in the outbox, with the
// loan's changes the triggers record: the loan ($1) closed, and where.
var checkInEventSQL = withTables(`
INSERT INTO %s (tenant_id, kind, type, data)
SELECT $2, '`+storage.EventKindCheckIn+`', '`+storage.EventCheckedIn+`', jsonb_build_object('old', NULL, 'new', jsonb_strip_nulls(jsonb_build_object(
       'loanId', $1::jsonb -> 'id', 'userId', $1::jsonb -> 'userId', 'itemId', $1::jsonb -> 'itemId',
       'servicePointId', $1::jsonb -> 'checkinServicePointId', 'returnDate', $1::jsonb -> 'returnDate')))
 WHERE `+outboxOn, tableOutbox)

// checkInGuard holds a check-in's loan: the item's open loan, closed, of
// the same borrower and item.
var checkInGuard = &guard{
	cond: `status_name = 'Open' AND ` + newStatus + ` = 'Closed'
           AND user_id = (@doc::jsonb ->> 'userId')::uuid AND item_id = (@doc::jsonb ->> 'itemId')::uuid`,
	state: `status_name`,
	why: func(id string, state []any, doc json.RawMessage) error {
		if *state[0].(*string) != "Open" {
			return errs.Errorf(errs.KindInvalid, schemas.CodeNoOpenLoan, "Loan %s is not open: there is nothing to check in", id).
				With("loanId", id)
		}
		return errs.Errorf(errs.KindInvalid, schemas.CodeCheckInRequired,
			"A check-in closes the loan (status Closed) and changes neither its userId nor its itemId")
	},
}
