package lending

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/checkoutlock/circulation-storage/internal/feesfines"
	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/circulation-storage/internal/record"
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

// borrowerRowSQL locks the row of the borrower of a loan
// (postgres.PatronRowSQL's row, found from the loan): the first statement
// of every write of a loan that can newly block its borrower (a loan
// declared lost, aged to lost, billed, checked in with a fine: the lost
// items and the fees an automated block counts) or judges the borrower's
// blocks (a renewal). A check-out's write locks the same row before it
// judges the borrower (locksql.LockRows, locksql.PatronRow), so the two
// happen one after the other: a check-out or a renewal that commits after
// such a write saw it, and is refused if it blocks the borrower, rather
// than judging from a snapshot taken before that write committed. A loan
// claimed returned takes it too, as every loan action does. Parameters:
// $1 the loan, $2 the tenant.
var borrowerRowSQL = postgres.WithTables(`SELECT 1 FROM %s p
 WHERE p.tenant_id = $2 AND p.id = (SELECT l.user_id FROM %s l WHERE l.tenant_id = $2 AND l.id = $1::uuid)
   FOR NO KEY UPDATE`, postgres.TablePatron, postgres.TableLoan)

// lockBorrower runs borrowerRowSQL for loan id of t in tx.
func lockBorrower(ctx context.Context, tx pgx.Tx, t storage.Tenant, id string) error {
	if _, err := tx.Exec(ctx, borrowerRowSQL, id, string(t)); err != nil {
		return postgres.Interpret(err, t)
	}
	return nil
}

// loanActionGuard holds a loan action to what it is: the loan open, and
// open still, its borrower's and of its item.
var loanActionGuard = &record.Guard{
	Cond: `status_name = ` + postgres.Lit(schemas.LoanOpen) + ` AND ` + record.NewStatus + ` = ` + postgres.Lit(schemas.LoanOpen) + `
           AND user_id = (@doc::jsonb ->> 'userId')::uuid AND item_id = (@doc::jsonb ->> 'itemId')::uuid`,
	State: `status_name`,
	Why: func(id string, state []any, doc json.RawMessage) error {
		if *state[0].(*string) != schemas.LoanOpen {
			return errs.Errorf(errs.KindInvalid, schemas.CodeNoOpenLoan, "Loan %s is not open", id).With("loanId", id)
		}
		return errs.Errorf(errs.KindInvalid, schemas.CodeValidation,
			"A loan action (%s) keeps the loan open and changes neither its userId nor its itemId", schemas.HeaderLoanActionItemVersion)
	},
}

// ActOnLoan implements storage.LoanWriter: the item takes the status of
// the loan's action at the version the action read, and the loan is
// replaced at the version the action read, in one transaction. The
// triggers of migration 9 announce both changes.
func (s *Loans) ActOnLoan(ctx context.Context, t storage.Tenant, w storage.LoanActionWrite) error {
	action := record.FieldValue(w.Loan, "action")
	status, ok := storage.LoanActionItemStatus[action]
	if !ok && action != schemas.LoanDueDateChanged {
		return errs.Errorf(errs.KindInvalid, schemas.CodeValidation,
			"action: %s names a loan action that keeps the loan open (claimedReturned, declaredLost or %s), not %q",
			schemas.HeaderLoanActionItemVersion, schemas.LoanDueDateChanged, action).With("action", action)
	}
	if err := versionRead(w.LoanVersion); err != nil {
		return err
	}
	_, err := s.db.InTxOnce(ctx, t, schemas.WriteLoanAction, func(tx pgx.Tx) (json.RawMessage, error) {
		if err := lockBorrower(ctx, tx, t, w.LoanID); err != nil {
			return nil, err
		}
		if action == schemas.LoanDueDateChanged {
			doc, err := dueDateChangeable(ctx, tx, t, w)
			if err != nil {
				return nil, err
			}
			err = record.Update(ctx, tx, t, storage.Loans, w.LoanID, w.LoanVersion, doc, loanActionGuard)
			return nil, loanChanged(ctx, tx, t, err, w.LoanID, "given a new due date")
		}
		// A loan declared lost is billed as its lost item fee policy
		// says, from the loan as it stands before the declaration.
		if status == schemas.ItemDeclaredLost {
			if err := feesfines.ChargeLostItemFees(ctx, tx, t, w.LoanID, w.ServicePointID); err != nil {
				return nil, err
			}
		}
		if err := writeItemStatus(ctx, tx, t, loanActionItemSQL[status], w.Loan, w.ItemVersion, "change"); err != nil {
			return nil, err
		}
		err := record.Update(ctx, tx, t, storage.Loans, w.LoanID, w.LoanVersion, w.Loan, loanActionGuard)
		return nil, loanChanged(ctx, tx, t, err, w.LoanID, "marked "+status)
	})
	return err
}

// dueDateItemSQL reads the item of a loan whose due date is changed, once
// its row is locked (itemRowSQL): its status and version, and whether an
// open recall waits for it. Parameters: $1 the item, $2 the tenant.
var dueDateItemSQL = postgres.WithTables(`SELECT i.status_name, i.version, `+
	openRecallSQL(postgres.Table(postgres.TableRequest), "i.id", "i.tenant_id")+`
  FROM %s i WHERE i.tenant_id = $2 AND i.id = $1::uuid`, postgres.TableItem)

// dueDateChangeable judges a change of due date in tx, before it is
// written, and answers the loan to write. The item's row is locked, as
// every write of the item or its queue takes it, so its status and its
// queue hold until the change commits; the item must be at the version
// the change read (CodeVersionConflict), in a status that allows the
// change (schemas' table of loan actions, the one circulation judged by).
// A loan whose due date a recall set keeps that mark only while an open
// recall waits for its item (mod-circulation's ChangeDueDateResource
// clears it otherwise).
func dueDateChangeable(ctx context.Context, tx pgx.Tx, t storage.Tenant, w storage.LoanActionWrite) (json.RawMessage, error) {
	itemID := record.FieldValue(w.Loan, "itemId")
	if _, err := tx.Exec(ctx, itemRowSQL, itemID, string(t)); err != nil {
		return nil, record.InterpretWrite(err, t, storage.Loans, w.Loan)
	}
	var status string
	var version int
	var recalled bool
	err := tx.QueryRow(ctx, dueDateItemSQL, itemID, string(t)).Scan(&status, &version, &recalled)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, errs.Errorf(errs.KindInvalid, schemas.CodeValidation, "itemId: item %s does not exist", itemID).With("itemId", itemID)
	case err != nil:
		return nil, postgres.Interpret(err, t)
	case version != w.ItemVersion:
		return nil, errs.Errorf(errs.KindConflict, schemas.CodeVersionConflict,
			"Cannot change the due date of loan %s because its item %s has been changed: stored _version is %d, request has %d; nothing was written",
			w.LoanID, itemID, version, w.ItemVersion).With("_version", strconv.Itoa(version))
	}
	if r, refused := schemas.LoanActionRefused(schemas.LoanActionChangeDueDate, status); refused {
		return nil, errs.Errorf(errs.KindInvalid, r.Code, "%s", r.Message).With("itemId", itemID)
	}
	var mark struct {
		ByRecall bool `json:"dueDateChangedByRecall"`
	}
	if recalled || json.Unmarshal(w.Loan, &mark) != nil || !mark.ByRecall {
		return w.Loan, nil
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(w.Loan, &doc); err != nil {
		return nil, errs.Errorf(errs.KindInvalid, schemas.CodeValidation, "the loan is not a JSON object").Because(err)
	}
	doc["dueDateChangedByRecall"] = json.RawMessage("false")
	return json.Marshal(doc)
}
