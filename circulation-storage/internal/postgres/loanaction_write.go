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

// loanActionItemSQL is, for each status a loan action gives an item, the
// action's write of the item: that status, at the version the action
// read (itemStatusSQL).
var loanActionItemSQL = func() map[string]string {
	out := map[string]string{}
	for _, status := range storage.LoanActionItemStatus {
		out[status] = itemStatusSQL(status)
	}
	return out
}()

// loanActionGuard holds a loan action to what it is: the loan open, and
// open still, its borrower's and of its item.
var loanActionGuard = &guard{
	cond: `status_name = 'Open' AND ` + newStatus + ` = 'Open'
           AND user_id = (@doc::jsonb ->> 'userId')::uuid AND item_id = (@doc::jsonb ->> 'itemId')::uuid`,
	state: `status_name`,
	why: func(id string, state []any, doc json.RawMessage) error {
		if *state[0].(*string) != "Open" {
			return errs.Errorf(errs.KindInvalid, schemas.CodeNoOpenLoan, "Loan %s is not open", id).With("loanId", id)
		}
		return errs.Errorf(errs.KindInvalid, schemas.CodeValidation,
			"A loan action (%s) keeps the loan open and changes neither its userId nor its itemId", schemas.HeaderLoanActionItemVersion)
	},
}

// ActOnLoan implements storage.LoanWriter: the item takes the status of
// the loan's action at the version the action read, and the loan is
// replaced, in one transaction. The triggers of migration 9 announce both
// changes.
func (s *Loans) ActOnLoan(ctx context.Context, t storage.Tenant, w storage.LoanActionWrite) error {
	action := fieldValue(w.Loan, "action")
	status, ok := storage.LoanActionItemStatus[action]
	if !ok {
		return errs.Errorf(errs.KindInvalid, schemas.CodeValidation,
			"action: %s names a loan action that keeps the loan open (claimedReturned or declaredLost), not %q",
			schemas.HeaderLoanActionItemVersion, action).With("action", action)
	}
	return s.db.inTx(ctx, t, func(tx pgx.Tx) error {
		itemID := fieldValue(w.Loan, "itemId")
		var stored int
		err := tx.QueryRow(ctx, loanActionItemSQL[status], itemStatusArgs(ctx, t, itemID, w.ItemVersion)).Scan(&stored)
		switch {
		case err != nil:
			return interpretWrite(err, t, storage.Loans, w.Loan)
		case stored < 0:
			return errs.Errorf(errs.KindInvalid, schemas.CodeValidation, "itemId: item %s does not exist", itemID).With("itemId", itemID)
		case stored > 0:
			return errs.Errorf(errs.KindConflict, schemas.CodeVersionConflict,
				"Cannot change item %s because it has been changed: stored _version is %d, request has %d; nothing was written",
				itemID, stored, w.ItemVersion).With("_version", fmt.Sprint(stored))
		}
		return update(ctx, tx, t, storage.Loans, w.LoanID, 0, w.Loan, loanActionGuard)
	})
}
