package lending

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/checkoutlock/circulation-storage/internal/feesfines"
	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/circulation-storage/internal/record"
	"github.com/checkoutlock/circulation-storage/internal/requests"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
)

// Aging to lost, as FOLIO's scheduled age to lost does it
// (MarkOverdueLoansAsAgedLostService, ChargeLostFeesWhenAgedToLostService):
// an open loan of an item Checked out, due longer ago than its lost item
// fee policy's itemAgedLostOverdue, is aged to lost: the item becomes
// Aged to lost, the loan's action itemAgedToLost, with the time its patron
// is to be billed (agedToLostDelayedBilling: now, or after the policy's
// patronBilledAfterAgedLost) and, when that is now, billed in the same
// transaction; otherwise, once that time has passed, a later pass bills
// it. Billing charges the loan's lost item fees (the processing fee when
// the policy says chargeAmountItemSystem) and marks the loan billed.
// Each is one transaction writing the loan and (aging) the item at the
// versions it read: a check-in, a renewal or a declaration of the same
// loan, before or after, is never undone and never undoes it (the loan is
// returned or aged, never both), and a loan is billed once (a declaration
// of loss after it bills nothing more). The triggers of migration 9
// announce the changes.

// ActionAgedToLost is the action of a loan aged to lost.
const ActionAgedToLost = "itemAgedToLost"

// ripeSQL is, for each open loan of item and patron (SQL aliases l, i,
// p, in the statement's FROM), whether it is ripe for aging to lost now:
// its item Checked out, due longer ago than its lost item fee policy's
// itemAgedLostOverdue (no such policy, or none in it: never). The one
// rule of when a loan ages.
func ripeSQL(l, i, p string) string {
	policy := feesfines.LostItemPolicySQL(l+".tenant_id", l+".jsonb", p+".patron_group_id", i+".material_type_id",
		"coalesce("+i+".temporary_loan_type_id, "+i+".permanent_loan_type_id)")
	return `(` + l + `.status_name = ` + postgres.Lit(schemas.LoanOpen) + ` AND ` + i + `.status_name = ` + postgres.Lit(schemas.ItemCheckedOut) + `
        AND ` + postgres.StoredTime(l+".jsonb ->> 'dueDate'", "loan dueDate") + ` +
            (SELECT ` + feesfines.AgedToLostAfterSQL("lip.jsonb") + ` FROM (` + policy + `) lip) <= now())`
}

// agingListSQL is a batch of loans ripe for aging (ripeSQL), of any
// tenant, oldest due first, found through migration 36's index, but
// those of $2 (tenants) and $3 (ids). Parameter: $1 the batch's size.
var agingListSQL = `
SELECT l.tenant_id, l.id::text
  FROM ` + postgres.Table(postgres.TableLoan) + ` l
  JOIN ` + postgres.Table(postgres.TableItem) + ` i ON i.tenant_id = l.tenant_id AND i.id = l.item_id
  JOIN ` + postgres.Table(postgres.TablePatron) + ` p ON p.tenant_id = l.tenant_id AND p.id = l.user_id
 WHERE l.status_name = ` + postgres.Lit(schemas.LoanOpen) + ` AND ` + postgres.Passed("l.jsonb ->> 'dueDate'", "loan dueDate") + `
   AND ` + ripeSQL("l", "i", "p") + `
   AND (l.tenant_id, l.id) NOT IN (SELECT * FROM unnest($2::text[], $3::uuid[]))
 ORDER BY l.jsonb ->> 'dueDate' LIMIT $1`

// agingSQL reads loan @loan of @tenant while it is ripe for aging: the
// loan as aged (its action, item status and billing), as aged and billed,
// its version, its item's version, whether its patron is to be billed at
// once (the policy's patronBilledAfterAgedLost none or 0), and its
// checkout service point.
var agingSQL = `
WITH a AS (
    SELECT l.jsonb || jsonb_build_object('action', '` + ActionAgedToLost + `', 'itemStatus', ` + postgres.Lit(schemas.ItemAgedToLost) + `,
               'agedToLostDelayedBilling', jsonb_build_object('lostItemHasBeenBilled', false, 'agedToLostDate', ` + record.SQLNow + `,
                   'dateLostItemShouldBeBilled', to_char((now() + b.after) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))) AS doc,
           l.version, i.version AS item_version, b.after <= interval '0' AS at_once, l.jsonb ->> 'checkoutServicePointId' AS service_point
      FROM ` + postgres.Table(postgres.TableLoan) + ` l
      JOIN ` + postgres.Table(postgres.TableItem) + ` i ON i.tenant_id = l.tenant_id AND i.id = l.item_id
      JOIN ` + postgres.Table(postgres.TablePatron) + ` p ON p.tenant_id = l.tenant_id AND p.id = l.user_id
     CROSS JOIN LATERAL (SELECT ` + feesfines.BilledAfterAgedToLostSQL("lip.jsonb") + ` AS after
                           FROM (` + feesfines.LostItemPolicySQL("l.tenant_id", "l.jsonb", "p.patron_group_id", "i.material_type_id",
	"coalesce(i.temporary_loan_type_id, i.permanent_loan_type_id)") + `) lip) b
     WHERE l.tenant_id = @tenant AND l.id = @loan::uuid AND ` + ripeSQL("l", "i", "p") + `
)
SELECT doc, jsonb_set(doc, '{agedToLostDelayedBilling,lostItemHasBeenBilled}', 'true'), version, item_version, at_once, service_point FROM a`

// agedItemSQL is the aging's write of the item: Aged to lost, at the
// version the aging read.
var agedItemSQL = itemStatusSQL(schemas.ItemAgedToLost)

// AgeToLost ages up to batch loans ripe for it, each in a transaction of
// its own, but those of skip (requests.CloseExpired's shape, for the
// sweeper).
func AgeToLost(ctx context.Context, db *postgres.DB, batch int, skip []requests.Ref) (found, aged int, failed []requests.Failure, err error) {
	return requests.CloseEach(ctx, db, agingListSQL, batch, skip, func(k requests.Ref) (bool, error) {
		return ageOne(ctx, db, k.Tenant, k.ID)
	})
}

// errNotAged rolls back an aging or a billing that found its loan or
// item changed since it read them (another write came first): nothing
// is written, and the loan is judged again at the next pass.
var errNotAged = errors.New("the loan changed while it was aged")

// notAged is err, a write's refusal, as errNotAged when it says the loan
// or the item changed (a version conflict, a loan closed meanwhile).
func notAged(err error) error {
	if e, ok := errs.As(err); ok && (e.Kind == errs.KindConflict || e.Code == schemas.CodeNoOpenLoan) {
		return errNotAged
	}
	return err
}

// ageOne ages loan id of t, unless it is no longer ripe or changed
// meanwhile (done false). A patron to be billed at once is billed in the
// same transaction (billed); with no fee/fine owner serving the loan's
// checkout service point, the loan is aged unbilled, and the billing
// pass tries again.
func ageOne(ctx context.Context, db *postgres.DB, t storage.Tenant, id string) (done bool, err error) {
	err = db.InTx(ctx, t, func(tx pgx.Tx) error {
		if err := lockBorrower(ctx, tx, t, id); err != nil {
			return err
		}
		var doc, billed json.RawMessage
		var version, itemVersion int
		var atOnce bool
		var servicePoint *string
		err := tx.QueryRow(ctx, agingSQL, pgx.StrictNamedArgs{"tenant": string(t), "loan": id}).
			Scan(&doc, &billed, &version, &itemVersion, &atOnce, &servicePoint)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return postgres.Interpret(err, t)
		}
		if atOnce {
			switch err := feesfines.ChargeAgedToLostFees(ctx, tx, t, id, deref(servicePoint)); {
			case err == nil:
				doc = billed
			case !noOwner(err):
				return err
			}
		}
		// The item, then the loan: the order of every write of both (a
		// recall takes the item's queue, then marks the loan), so that
		// none waits for the other while holding what it waits for.
		if err := writeItemStatus(ctx, tx, t, agedItemSQL, doc, itemVersion, "age"); err != nil {
			return notAged(err)
		}
		if err := record.Update(ctx, tx, t, storage.Loans, id, version, doc, loanActionGuard); err != nil {
			return notAged(err)
		}
		done = true
		return nil
	})
	if errors.Is(err, errNotAged) {
		return false, nil
	}
	return done, err
}

// noOwner says whether err is a charge's refusal for want of a fee/fine
// owner (nothing was charged).
func noOwner(err error) bool {
	e, ok := errs.As(err)
	return ok && e.Code == schemas.CodeNoFeeFineOwner
}

// deref is *s, "" for nil.
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// billDue is SQL holding for an open loan l (alias) aged to lost and not
// billed whose time to be billed has passed.
func billDue(l string) string {
	return l + `.status_name = ` + postgres.Lit(schemas.LoanOpen) + ` AND ` + l + `.jsonb ->> 'itemStatus' = ` + postgres.Lit(schemas.ItemAgedToLost) + `
   AND ` + l + `.jsonb #>> '{agedToLostDelayedBilling,lostItemHasBeenBilled}' = 'false'
   AND ` + postgres.StoredTime(l+".jsonb #>> '{agedToLostDelayedBilling,dateLostItemShouldBeBilled}'", "dateLostItemShouldBeBilled") + ` <= now()`
}

// billListSQL is a batch of loans aged to lost whose patrons are due to be
// billed, of any tenant, but those of $2 and $3. Parameter: $1 the
// batch's size.
var billListSQL = `
SELECT l.tenant_id, l.id::text FROM ` + postgres.Table(postgres.TableLoan) + ` l
 WHERE l.status_name = ` + postgres.Lit(schemas.LoanOpen) + ` AND ` + postgres.Passed("l.jsonb ->> 'dueDate'", "loan dueDate") + `
   AND ` + billDue("l") + `
   AND (l.tenant_id, l.id) NOT IN (SELECT * FROM unnest($2::text[], $3::uuid[]))
 ORDER BY l.jsonb ->> 'dueDate' LIMIT $1`

// billSQL reads loan @loan of @tenant while it is due to be billed: the
// loan as billed, its version and its checkout service point.
var billSQL = `
SELECT jsonb_set(l.jsonb, '{agedToLostDelayedBilling,lostItemHasBeenBilled}', 'true'), l.version, l.jsonb ->> 'checkoutServicePointId'
  FROM ` + postgres.Table(postgres.TableLoan) + ` l
 WHERE l.tenant_id = @tenant AND l.id = @loan::uuid AND ` + billDue("l")

// BillAgedToLost bills up to batch loans aged to lost whose patrons are
// due to be billed, each in a transaction of its own, but those of skip:
// the lost item fees charged (feesfines.ChargeAgedToLostFees, to the
// owner serving the loan's checkout service point; none serving it: the
// loan is left to be billed, and answered in failed) and the loan marked
// billed at the version read.
func BillAgedToLost(ctx context.Context, db *postgres.DB, batch int, skip []requests.Ref) (found, billed int, failed []requests.Failure, err error) {
	return requests.CloseEach(ctx, db, billListSQL, batch, skip, func(k requests.Ref) (bool, error) {
		return billOne(ctx, db, k.Tenant, k.ID)
	})
}

// billOne bills loan of t, aged to lost and due to be billed, unless it
// no longer is or changed meanwhile (done false).
func billOne(ctx context.Context, db *postgres.DB, t storage.Tenant, loan string) (done bool, err error) {
	err = db.InTx(ctx, t, func(tx pgx.Tx) error {
		if err := lockBorrower(ctx, tx, t, loan); err != nil {
			return err
		}
		var doc json.RawMessage
		var version int
		var servicePoint *string
		err := tx.QueryRow(ctx, billSQL, pgx.StrictNamedArgs{"tenant": string(t), "loan": loan}).Scan(&doc, &version, &servicePoint)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return postgres.Interpret(err, t)
		}
		if err := feesfines.ChargeAgedToLostFees(ctx, tx, t, loan, deref(servicePoint)); err != nil {
			return err
		}
		if err := record.Update(ctx, tx, t, storage.Loans, loan, version, doc, loanActionGuard); err != nil {
			return notAged(err)
		}
		done = true
		return nil
	})
	if errors.Is(err, errNotAged) {
		return false, nil
	}
	return done, err
}
