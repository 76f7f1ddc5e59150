// Package feesfines holds a patron's fees and fines as FOLIO's
// mod-feesfines keeps them, each rule written once: the actions on an
// account (pay, waive, transfer, refund, cancel) judged by one rule
// (judgeSQL) that the write and its check both ask, and written in one
// transaction with the write's own id; and the charges circulation's
// writes make in their own transactions (charges.go): an overdue loan's
// fine, a lost item's fees, and what a lost item's return gives back.
package feesfines

import (
	"context"
	"encoding/json"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/circulation-storage/internal/record"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
)

// Actions writes and checks the actions on fees/fines
// (storage.FeeFineActor).
type Actions struct {
	db *postgres.DB
}

// NewActions is the actions on fees/fines kept in db.
func NewActions(db *postgres.DB) *Actions { return &Actions{db: db} }

// paidTypes are the typeActions of the actions a refund may give back
// (payments and transfers), refundTypes those of refunds.
var (
	paidTypes   = []string{schemas.ActionPay.Partial(), schemas.ActionPay.Full(), schemas.ActionTransfer.Partial(), schemas.ActionTransfer.Full()}
	refundTypes = []string{schemas.ActionRefund.Partial(), schemas.ActionRefund.Full()}
)

// accountsSQL is the accounts acted on (@ids), each with what of it a
// refund may give back (refundable: paid or transferred, less what was
// refunded), in the order a payment spread over them takes them: oldest
// first.
var accountsSQL = `
SELECT f.id, f.user_id, f.owner_id, f.remaining,
       coalesce((SELECT sum(x.amount_action) FROM ` + postgres.Table(postgres.TableFeeFineAction) + ` x
                  WHERE x.account_id = f.id AND x.tenant_id = f.tenant_id AND x.type_action IN (` + postgres.Lits(paidTypes...) + `)), 0)
     - coalesce((SELECT sum(x.amount_action) FROM ` + postgres.Table(postgres.TableFeeFineAction) + ` x
                  WHERE x.account_id = f.id AND x.tenant_id = f.tenant_id AND x.type_action IN (` + postgres.Lits(refundTypes...) + `)), 0) AS refundable,
       f.jsonb #>> '{metadata,createdDate}' AS created
  FROM ` + postgres.Table(postgres.TableFeeFineAccount) + ` f
 WHERE f.tenant_id = @tenant AND f.id = ANY (@ids::uuid[])`

// judgeSQL is the one rule an action is judged by, asked by the write
// (under the accounts' row locks) and by its check: why it is refused
// (one of the refusals below, NULL when allowed), and what would remain
// of the accounts after it. @action, @amount (numeric text; a
// cancellation's is ignored) and @method (a payment's method; NULL, as a
// check names none, is not judged) say what is asked.
var judgeSQL = `
WITH a AS (` + accountsSQL + `), t AS (
    SELECT sum(remaining) AS remaining, sum(refundable) AS refundable, bool_or(remaining = 0) AS closed, count(DISTINCT user_id) AS patrons FROM a
)
SELECT CASE
         WHEN t.patrons > 1 THEN '` + refusedPatrons + `'
         WHEN @action <> 'refund' AND t.closed THEN '` + refusedClosed + `'
         WHEN @action IN ('pay', 'waive', 'transfer') AND @amount::numeric > t.remaining THEN '` + refusedExceeded + `'
         WHEN @action = 'refund' AND @amount::numeric > t.refundable THEN '` + refusedRefund + `'
         WHEN @action = 'pay' AND @method::text IS NOT NULL AND EXISTS (
              SELECT 1 FROM a WHERE NOT EXISTS (
                     SELECT 1 FROM ` + postgres.Table(postgres.TablePaymentMethod) + ` m
                      WHERE m.tenant_id = @tenant AND m.name_method = @method AND (m.owner_id = a.owner_id OR m.owner_id IS NULL))) THEN '` + refusedMethod + `'
       END,
       round(t.remaining - CASE WHEN @action IN ('pay', 'waive', 'transfer') THEN @amount::numeric
                                WHEN @action = 'cancel' THEN t.remaining ELSE 0 END, 2)::text
  FROM t`

// The refusals judgeSQL names.
const (
	refusedPatrons  = "patrons"
	refusedClosed   = "closed"
	refusedExceeded = "exceeded"
	refusedRefund   = "refund"
	refusedMethod   = "method"
)

// refusal is the error of a refusal judgeSQL named, in mod-feesfines'
// words where it has them.
func refusal(why string, w storage.FeeFineCheck, method string) error {
	switch why {
	case refusedPatrons:
		return errs.Errorf(errs.KindInvalid, schemas.CodeValidation, "An action spread over fees/fines takes one patron's").
			With("accountIds", w.AccountIDs[0])
	case refusedClosed:
		return errs.Errorf(errs.KindInvalid, schemas.CodeFeeFineClosed, "Fee/fine is already closed").With("accountId", w.AccountIDs[0])
	case refusedExceeded:
		return errs.Errorf(errs.KindInvalid, schemas.CodeFeeFineAmountExceeded, "Requested amount exceeds remaining amount").
			With("amount", w.Amount)
	case refusedRefund:
		return errs.Errorf(errs.KindInvalid, schemas.CodeFeeFineAmountExceeded,
			"Refund amount must be greater than zero and less than or equal to Selected amount").With("amount", w.Amount)
	case refusedMethod:
		return errs.Errorf(errs.KindInvalid, schemas.CodePaymentMethodUnknown,
			"Payment method %q is not one the fee/fine's owner takes", method).With("paymentMethod", method)
	}
	return nil
}

// amountOf is w's amount as judgeSQL takes it: a cancellation's is
// ignored ("0"); any other must be a positive decimal of two places
// (schemas.ParseAmount), refused in mod-feesfines' words.
func amountOf(action schemas.FeeFineAction, amount string) (string, error) {
	if action == schemas.ActionCancel {
		return "0", nil
	}
	a, refused := schemas.ParseAmount(amount)
	if refused != "" {
		return "", errs.Errorf(errs.KindInvalid, schemas.CodeFeeFineAmountInvalid, "%s", refused).With("amount", amount)
	}
	return a, nil
}

// judge runs judgeSQL through q for c (its amount parsed), and answers
// what would remain, or why c is refused. Accounts that do not exist are
// refused first, as mod-feesfines refuses them (404).
func judge(ctx context.Context, q postgres.Querier, t storage.Tenant, c storage.FeeFineCheck, amount string, method any) (string, error) {
	rows, err := q.Query(ctx, `SELECT id::text FROM (`+accountsSQL+`) a`, pgx.StrictNamedArgs{"tenant": string(t), "ids": c.AccountIDs})
	if err != nil {
		return "", postgres.Interpret(err, t)
	}
	found, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return "", postgres.Interpret(err, t)
	}
	for _, id := range c.AccountIDs {
		if !slices.Contains(found, id) {
			return "", errs.Errorf(errs.KindNotFound, schemas.CodeNotFound, "Fee/fine ID %s not found", id).With("accountId", id)
		}
	}
	var why *string
	var remaining string
	err = q.QueryRow(ctx, judgeSQL, pgx.StrictNamedArgs{"tenant": string(t), "ids": c.AccountIDs, "action": string(c.Action),
		"amount": amount, "method": method}).Scan(&why, &remaining)
	if err != nil {
		return "", postgres.Interpret(err, t)
	}
	if why != nil {
		m, _ := method.(string)
		return "", refusal(*why, c, m)
	}
	return remaining, nil
}

// Check implements storage.FeeFineActor.
func (s *Actions) Check(ctx context.Context, t storage.Tenant, c storage.FeeFineCheck) (storage.FeeFineChecked, error) {
	out := storage.FeeFineChecked{AccountID: c.AccountIDs[0], Amount: c.Amount}
	c.AccountIDs = canonicalIDs(c.AccountIDs)
	amount, err := amountOf(c.Action, c.Amount)
	if err == nil {
		var remaining string
		remaining, err = judge(ctx, s.db.Pool, t, c, amount, nil)
		out.Allowed, out.RemainingAmount = err == nil, remaining
	}
	if e, ok := errs.As(err); ok && e.Kind == errs.KindInvalid {
		out.ErrorMessage = e.Message
		return out, nil
	}
	if err != nil {
		return storage.FeeFineChecked{}, err
	}
	return out, nil
}

// lockSQL locks the accounts acted on, in the order of their ids (two
// actions on the same fees/fines lock them in the same order).
var lockSQL = postgres.WithTables(`SELECT id FROM %s WHERE tenant_id = @tenant AND id = ANY (@ids::uuid[]) ORDER BY id FOR UPDATE`,
	postgres.TableFeeFineAccount)

// patronFeesSQL locks the open fees/fines of a kiosk's payment: the
// patron's (@user) among @ids, or all of them when @ids is empty, in
// the order of their ids as lockSQL locks them (a lock waited for reads
// the row again: a fee/fine closed meanwhile is not one of them), and
// answers their ids oldest first, the order the payment takes them in.
var patronFeesSQL = postgres.WithTables(`
WITH locked AS (
    SELECT id, jsonb #>> '{metadata,createdDate}' AS created FROM %s
     WHERE tenant_id = @tenant AND user_id = @user AND status = `+postgres.Lit(schemas.FeeFineOpen)+`
       AND (coalesce(cardinality(@ids::uuid[]), 0) = 0 OR id = ANY (@ids::uuid[]))
     ORDER BY id FOR UPDATE
)
SELECT id::text FROM locked ORDER BY created, id`, postgres.TableFeeFineAccount)

// patronFees is what a kiosk's payment w acts on (patronFeesSQL), locked
// in tx: the fee/fine it names, refused unless it is the patron's and
// open, or all the patron's open ones, refused when there are none.
func patronFees(ctx context.Context, tx pgx.Tx, t storage.Tenant, w storage.FeeFineActionWrite) ([]string, error) {
	rows, err := tx.Query(ctx, patronFeesSQL, pgx.StrictNamedArgs{"tenant": string(t), "user": w.UserID, "ids": w.AccountIDs})
	if err != nil {
		return nil, postgres.Interpret(err, t)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, postgres.Interpret(err, t)
	}
	for _, id := range w.AccountIDs {
		if !slices.Contains(ids, id) {
			return nil, errs.Errorf(errs.KindInvalid, schemas.CodeFeeFineClosed, "The patron has no open fee/fine %s", id).With("feeFineId", id)
		}
	}
	if len(ids) == 0 {
		return nil, errs.Errorf(errs.KindInvalid, schemas.CodeFeeFineClosed, "The patron owes nothing").With("userId", w.UserID)
	}
	return ids, nil
}

// actSQL writes an action judged allowed: the amount taken from the
// accounts oldest first (a refund: given back of what each was paid; a
// cancellation: all that remains of each), each account's remaining,
// status and payment status, and one fee/fine action for each account
// the action moved money on; it answers fee-fine-action-response.json.
var actSQL = `
WITH a AS (` + accountsSQL + `), parts AS (
    SELECT a.*, CASE @action
             WHEN 'cancel' THEN a.remaining
             WHEN 'refund' THEN least(a.refundable, greatest(@amount::numeric - (sum(a.refundable) OVER w - a.refundable), 0))
             ELSE least(a.remaining, greatest(@amount::numeric - (sum(a.remaining) OVER w - a.remaining), 0)) END AS part
      FROM a WINDOW w AS (ORDER BY a.created, a.id)
), m AS (
    SELECT p.*, CASE WHEN @action = 'refund' THEN p.remaining ELSE p.remaining - p.part END AS left_over,
           CASE WHEN (@action = 'refund' AND p.part = p.refundable) OR (@action <> 'refund' AND p.remaining = p.part) THEN @full::text ELSE @partial::text END AS words,
           gen_random_uuid() AS action_id
      FROM parts p WHERE p.part > 0
), written AS (
    UPDATE ` + postgres.Table(postgres.TableFeeFineAccount) + ` f
       SET jsonb = ` + record.WithMetadata(`f.jsonb || jsonb_build_object('remaining', m.left_over,
                   'status', jsonb_build_object('name', CASE WHEN m.left_over = 0 THEN '`+schemas.FeeFineClosed+`' ELSE '`+schemas.FeeFineOpen+`' END),
                   'paymentStatus', jsonb_build_object('name', m.words), 'dateUpdated', `+record.SQLNow+`)`, "@metadata_user", true) + `
      FROM m WHERE f.tenant_id = @tenant AND f.id = m.id
    RETURNING f.id
), acts AS (
    INSERT INTO ` + postgres.Table(postgres.TableFeeFineAction) + ` (tenant_id, id, jsonb)
    SELECT @tenant, m.action_id, jsonb_strip_nulls(jsonb_build_object('id', m.action_id, 'accountId', m.id, 'userId', m.user_id,
           'typeAction', m.words, 'amountAction', m.part, 'balance', m.left_over, 'dateAction', ` + record.SQLNow + `,
           'paymentMethod', @method::text, 'source', @user_name::text, 'createdAt', @service_point::text, 'transactionInformation', @info::text,
           'comments', @comments::text, 'notify', @notify::boolean))
      FROM m
    RETURNING jsonb
)
SELECT jsonb_build_object('accountId', @first::text, 'amount', round(coalesce((SELECT sum(part) FROM m), 0), 2)::text,
       'remainingAmount', round((SELECT sum(remaining) FROM a) - CASE WHEN @action = 'refund' THEN 0 ELSE coalesce((SELECT sum(part) FROM m), 0) END, 2)::text,
       'feefineactions', coalesce((SELECT jsonb_agg(jsonb ORDER BY jsonb ->> 'accountId') FROM acts), '[]'::jsonb))`

// Act implements storage.FeeFineActor.
func (s *Actions) Act(ctx context.Context, t storage.Tenant, w storage.FeeFineActionWrite) (json.RawMessage, error) {
	w.AccountIDs, w.UserID = canonicalIDs(w.AccountIDs), strings.ToLower(w.UserID)
	if len(w.AccountIDs) == 0 && w.UserID == "" {
		return nil, errs.Errorf(errs.KindInvalid, schemas.CodeValidation, "accountIds: at least one fee/fine is acted on")
	}
	if !slices.Contains(schemas.FeeFineActions, w.Action) {
		return nil, errs.Errorf(errs.KindInvalid, schemas.CodeValidation, "action: %q is not an action on fees/fines", w.Action).
			With("action", string(w.Action))
	}
	amount, err := amountOf(w.Action, w.Amount)
	if err != nil {
		return nil, err
	}
	method := w.PaymentMethod
	switch {
	case w.Action == schemas.ActionCancel:
		method = ""
	case w.Action == schemas.ActionPay && method == "":
		return nil, errs.Errorf(errs.KindInvalid, schemas.CodeValidation, "paymentMethod: a payment names how it was paid").With("paymentMethod", "")
	}
	return s.db.InTxOnce(ctx, t, schemas.WriteFeeFineAction, func(tx pgx.Tx) (json.RawMessage, error) {
		ids := w.AccountIDs
		if w.UserID != "" {
			// patronFees has locked them.
			var err error
			if ids, err = patronFees(ctx, tx, t, w); err != nil {
				return nil, err
			}
		} else if _, err := tx.Exec(ctx, lockSQL, pgx.StrictNamedArgs{"tenant": string(t), "ids": ids}); err != nil {
			return nil, postgres.Interpret(err, t)
		}
		check := storage.FeeFineCheck{AccountIDs: ids, Action: w.Action, Amount: w.Amount}
		if _, err := judge(ctx, tx, t, check, amount, postgres.Nullable(method)); err != nil {
			return nil, err
		}
		var answer json.RawMessage
		err := tx.QueryRow(ctx, actSQL, pgx.StrictNamedArgs{"tenant": string(t), "ids": ids, "action": string(w.Action),
			"amount": amount, "full": w.Action.Full(), "partial": w.Action.Partial(), "metadata_user": record.MetadataUser(ctx),
			"method": postgres.Nullable(method), "user_name": w.UserName, "service_point": w.ServicePointID,
			"info": postgres.Nullable(w.TransactionInfo), "comments": postgres.Nullable(w.Comments), "notify": w.NotifyPatron,
			"first": ids[0]}).Scan(&answer)
		if err != nil {
			return nil, postgres.Interpret(err, t)
		}
		return answer, nil
	})
}

// canonicalIDs is ids as storage reads them back (id::text): UUIDs in
// lower case, whatever case a client wrote them in.
func canonicalIDs(ids []string) []string {
	if ids == nil {
		return nil
	}
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = strings.ToLower(id)
	}
	return out
}
