package feesfines

import (
	"context"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/circulation-storage/internal/record"
	"github.com/checkoutlock/circulation-storage/internal/rules"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
)

// The charges circulation's writes make, each in the write's own
// transaction (so a write sent again with its id charges nothing more,
// and a write that fails charges nothing): an overdue loan's fine when it
// is checked in or renewed, a lost item's fees when it is declared lost,
// and what a lost item's return cancels and gives back. Each reads the
// loan as it stands before the write changes it.

// loanCTEs are the common table expressions every charge reads, their
// names prefixed with p (so a write's own statement may hold them): the
// loan (loan, an SQL expression of its id) as stored ({l}), its patron
// ({u}) and item ({i}), its loan policy ({lp}), its overdue fine and
// lost item fee policies ({op}, {lip}): those the loan names, else those
// the circulation rules choose for its patron and item now (the rule
// that chooses the loan policy, else the fallbacks), and the fee/fine
// owner serving the service point servicePoint (an SQL expression; the
// first by name, {owner}).
func loanCTEs(p, loan, servicePoint string) string {
	return named(p, `
{l} AS (
    SELECT l.id, l.jsonb, l.user_id, l.item_id, l.loan_policy_id FROM `+postgres.Table(postgres.TableLoan)+` l
     WHERE l.tenant_id = @tenant AND l.id = `+loan+`
), {u} AS (
    SELECT p.patron_group_id FROM `+postgres.Table(postgres.TablePatron)+` p, {l} WHERE p.tenant_id = @tenant AND p.id = {l}.user_id
), {i} AS (
    SELECT it.jsonb, it.material_type_id, coalesce(it.temporary_loan_type_id, it.permanent_loan_type_id) AS loan_type_id, it.status_name
      FROM `+postgres.Table(postgres.TableItem)+` it, {l} WHERE it.tenant_id = @tenant AND it.id = {l}.item_id
), {op} AS (
    SELECT o.id, o.jsonb FROM `+postgres.Table(postgres.TableOverduePolicy)+` o, {l}
     WHERE o.tenant_id = @tenant AND o.id = coalesce(({l}.jsonb ->> 'overdueFinePolicyId')::uuid, (`+rules.ChosenSQL("overdue_fine_policy_id", "@tenant",
		"(SELECT patron_group_id FROM {u})", "(SELECT material_type_id FROM {i})", "(SELECT loan_type_id FROM {i})")+`))
), {lip} AS (`+LostItemPolicySQL("@tenant", "(SELECT jsonb FROM {l})", "(SELECT patron_group_id FROM {u})", "(SELECT material_type_id FROM {i})", "(SELECT loan_type_id FROM {i})")+`
), {lp} AS (
    SELECT p.jsonb FROM `+postgres.Table(postgres.TableLoanPolicy)+` p, {l} WHERE p.tenant_id = @tenant AND p.id = {l}.loan_policy_id
), {owner} AS (
    SELECT o.id, o.owner FROM `+postgres.Table(postgres.TableFeeFineOwner)+` o
     WHERE o.tenant_id = @tenant AND o.jsonb -> 'servicePointOwner' @> jsonb_build_array(jsonb_build_object('value', (`+servicePoint+`)::text))
     ORDER BY o.owner LIMIT 1
)`)
}

// LostItemPolicySQL is a loan's lost item fee policy (its id and
// document, no row without one): the one the loan (doc, its document)
// names, else the one the circulation rules choose for its patron's group
// and its item's material and loan types (SQL expressions) in tenant.
// Every charge, and the aging of loans to lost, ask it. Its own alias,
// lip_chosen, is one no caller's expression names.
func LostItemPolicySQL(tenant, doc, group, material, loanType string) string {
	return `
    SELECT lip_chosen.id, lip_chosen.jsonb FROM ` + postgres.Table(postgres.TableLostItemPolicy) + ` lip_chosen
     WHERE lip_chosen.tenant_id = ` + tenant + ` AND lip_chosen.id = coalesce((` + doc + ` ->> 'lostItemPolicyId')::uuid, (` +
		rules.ChosenSQL("lost_item_policy_id", tenant, group, material, loanType) + `))`
}

// AgedToLostAfterSQL is how long after its due date a loan under the lost
// item fee policy lip (its document) is aged to lost (FOLIO's
// itemAgedLostOverdue), an interval; NULL when the policy ages nothing.
func AgedToLostAfterSQL(lip string) string {
	return periodSQL(lip + ` -> 'itemAgedLostOverdue'`)
}

// BilledAfterAgedToLostSQL is how long after a loan is aged to lost its
// patron is billed (FOLIO's patronBilledAfterAgedLost), an interval; none
// (at once) without one.
func BilledAfterAgedToLostSQL(lip string) string {
	return `coalesce(` + periodSQL(lip+` -> 'patronBilledAfterAgedLost'`) + `, interval '0')`
}

// periodSQL is a policy's period (p: {duration, intervalId}, jsonb) as an
// interval, as FOLIO counts its units; NULL without one.
func periodSQL(p string) string {
	return `make_interval(mins => ((` + p + `) ->> 'duration')::integer * ` + minutesCase(`((`+p+`) ->> 'intervalId')`, schemas.LoanPeriodMinutes) + `)`
}

// named is sql with each {name} made p's: p+name.
func named(p, sql string) string {
	for _, n := range []string{"l", "u", "i", "chosen", "op", "lip", "lp", "owner", "t", "fine", "n", "charged", "due"} {
		sql = strings.ReplaceAll(sql, "{"+n+"}", p+n)
	}
	return sql
}

// minutesCase is SQL turning a unit (expr, text) into minutes by table,
// 0 for none it names.
func minutesCase(expr string, table map[string]int) string {
	var b strings.Builder
	b.WriteString("CASE " + expr)
	for unit, minutes := range table {
		b.WriteString(" WHEN " + postgres.Lit(unit) + " THEN " + strconv.Itoa(minutes))
	}
	b.WriteString(" ELSE NULL END")
	return b.String()
}

// OverdueFineSQL is the overdue fine of the loan l (its document) due at
// its dueDate and returned at returned (timestamptz), by the overdue fine
// policy op and the loan policy lp (documents), as mod-circulation
// computes it (OverdueFineService, OverduePeriodCalculatorService): the
// minutes from the due date to the return, each truncated to the minute,
// counted only past the loan policy's grace period (a loan whose due date
// a recall changed ignores the grace period unless the policy says
// otherwise), and only when the policy says whether closed days count
// (countClosed; when they do not, only the minutes the loan's checkout
// service point was open by its calendar count); then the
// policy's quantity for each interval begun (a recalled loan's recall
// fine), at most its maximum when that is above 0, and nothing when the
// quantity, the interval or the maximum is missing. Two decimal places.
// The one place a fine is computed.
func OverdueFineSQL(l, op, lp, returned string) string {
	recalled := `coalesce((` + l + ` ->> 'dueDateChangedByRecall')::boolean, false)`
	fine := `CASE WHEN ` + recalled + ` THEN 'overdueRecallFine' ELSE 'overdueFine' END`
	maxFine := `(` + op + ` ->> CASE WHEN ` + recalled + ` THEN 'maxOverdueRecallFine' ELSE 'maxOverdueFine' END)::numeric`
	quantity := `(` + op + ` -> ` + fine + ` ->> 'quantity')::numeric`
	interval := minutesCase(`(`+op+` -> `+fine+` ->> 'intervalId')`, schemas.OverdueFineIntervalMinutes)
	due := postgres.StoredTime(l+" ->> 'dueDate'", "loan dueDate")
	minutes := `(floor((extract(epoch FROM date_trunc('minute', ` + returned + `))
                     - extract(epoch FROM date_trunc('minute', ` + due + `))) / 60))`
	// Closed days and hours not counted: the minutes the loan's service
	// point was open (a service point with no calendar is open always).
	minutes = `(CASE WHEN (` + op + ` ->> 'countClosed')::boolean IS NOT FALSE THEN ` + minutes + `
                     ELSE coalesce(` + postgres.Table(funcOpenMinutes) + `(@tenant, (` + l + ` ->> 'checkoutServicePointId')::uuid, ` + due + `, ` + returned + `), ` + minutes + `) END)`
	grace := `coalesce((` + lp + ` #>> '{loansPolicy,gracePeriod,duration}')::integer * ` +
		minutesCase(`(`+lp+` #>> '{loansPolicy,gracePeriod,intervalId}')`, schemas.LoanPeriodMinutes) + `, 0)`
	counted := `CASE WHEN ` + op + ` ->> 'countClosed' IS NULL THEN 0
                     WHEN ` + recalled + ` AND coalesce((` + op + ` ->> 'gracePeriodRecall')::boolean, true) THEN ` + minutes + `
                     WHEN ` + minutes + ` > ` + grace + ` THEN ` + minutes + ` ELSE 0 END`
	return `(CASE WHEN (` + counted + `) > 0 AND ` + quantity + ` IS NOT NULL AND ` + interval + ` IS NOT NULL AND ` + maxFine + ` IS NOT NULL
              THEN round(CASE WHEN ` + maxFine + ` > 0 THEN least(` + quantity + ` * ceil((` + counted + `)::numeric / ` + interval + `), ` + maxFine + `)
                              ELSE ` + quantity + ` * ceil((` + counted + `)::numeric / ` + interval + `) END, 2)
              ELSE 0 END)`
}

// accountSQL is a charge's account document: its id and amount (SQL
// expressions), the fee/fine type {t}'s columns (id, fee_fine_type) and
// the owner {owner}'s (id, owner), for the loan {l} and item {i}, by the
// policies {op} and {lip}, returned at returned (a jsonb expression).
func accountSQL(id, amount, returned string) string {
	return record.WithMetadata(`jsonb_strip_nulls(jsonb_build_object('id', `+id+`, 'amount', `+amount+`, 'remaining', `+amount+`,
       'status', jsonb_build_object('name', '`+schemas.FeeFineOpen+`'), 'paymentStatus', jsonb_build_object('name', '`+schemas.PaymentStatusOutstanding+`'),
       'feeFineId', {t}.id, 'feeFineType', {t}.fee_fine_type, 'ownerId', {owner}.id, 'feeFineOwner', {owner}.owner,
       'userId', {l}.user_id, 'loanId', {l}.id, 'itemId', {l}.item_id, 'barcode', {i}.jsonb -> 'barcode', 'title', {i}.jsonb -> 'title',
       'callNumber', {i}.jsonb -> 'callNumber', 'materialTypeId', {i}.material_type_id, 'itemStatus', {i}.jsonb -> 'status',
       'dueDate', {l}.jsonb -> 'dueDate', 'returnedDate', `+returned+`, 'loanPolicyId', {l}.loan_policy_id,
       'overdueFinePolicyId', (SELECT id FROM {op}), 'lostItemFeePolicyId', (SELECT id FROM {lip}), 'dateCreated', `+record.SQLNow+`))`,
		"@metadata_user", false)
}

// OverdueChargeCTEs are common table expressions, their names prefixed
// with p, that charge the overdue fine of the loan loan (an SQL
// expression of its id; the loan as stored, before the write closing or
// renewing it, in the statement's snapshot) returned or renewed at
// returned (timestamptz), at the service point servicePoint, when also
// cond (SQL) holds: by the overdue fine policy ({op}), when the loan was
// overdue then and the fine is above 0, to the fee/fine owner serving
// the service point (none serving it: no fine, as FOLIO charges none). A
// check-in of a lost item is fined only when its lost item fee policy
// says lostItemReturned Charge; a renewal only when the overdue fine
// policy does not forgive it (forgiveOverdueFine). The last, {charged},
// answers a row for the fine charged. The check-in's write runs them as
// a statement of their own (ChargeOverdueFine); the renewal's, in its one
// statement.
func OverdueChargeCTEs(p, loan, returned, servicePoint string, renewal bool, cond string) string {
	returnedDate, when := "to_jsonb(to_char(("+returned+") AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'))",
		`(SELECT status_name FROM {i}) NOT IN (`+postgres.Lits(schemas.ItemStatusesLost...)+`)
                OR coalesce((SELECT jsonb ->> 'lostItemReturned' FROM {lip}), '') = 'Charge'`
	if renewal {
		returnedDate, when = "NULL::jsonb", `NOT coalesce(({op}.jsonb ->> 'forgiveOverdueFine')::boolean, false)`
	}
	return loanCTEs(p, loan, servicePoint) + named(p, `, {t} AS (
    SELECT id, fee_fine_type FROM `+postgres.Table(postgres.TableFeeFineType)+`
     WHERE tenant_id = @tenant AND automatic AND fee_fine_type = '`+schemas.FeeFineOverdueFine+`'
       AND (owner_id = (SELECT id FROM {owner}) OR owner_id IS NULL)
     ORDER BY owner_id NULLS LAST LIMIT 1
), {fine} AS (
    SELECT `+OverdueFineSQL("{l}.jsonb", "{op}.jsonb", "(SELECT jsonb FROM {lp})", returned)+` AS amount
      FROM {l}, {op}
     WHERE `+postgres.StoredTime("{l}.jsonb ->> 'dueDate'", "loan dueDate")+` < (`+returned+`) AND (`+when+`)
), {n} AS (SELECT gen_random_uuid() AS id
), {charged} AS (
    INSERT INTO `+postgres.Table(postgres.TableFeeFineAccount)+` (tenant_id, id, jsonb)
    SELECT @tenant, {n}.id, `+accountSQL("{n}.id", "{fine}.amount", returnedDate)+`
      FROM {l}, {i}, {t}, {owner}, {fine}, {n}
     WHERE {fine}.amount > 0 AND (`+cond+`)
    RETURNING 1
)`)
}

// overdueChargeSQL is the check-in's charge of an overdue fine
// (OverdueChargeCTEs) of the loan @loan returned at @returned at
// @service_point.
var overdueChargeSQL = `WITH ` + OverdueChargeCTEs("", "@loan::uuid", "@returned::timestamptz", "@service_point::uuid", false, "true") +
	` SELECT count(*) FROM charged`

// ChargeOverdueFine charges, in tx, the overdue fine of the loan loanID
// (as stored: call it before the write changes the loan) returned at the
// time returned, at the service point servicePointID (overdueChargeSQL).
func ChargeOverdueFine(ctx context.Context, tx pgx.Tx, t storage.Tenant, loanID, returned, servicePointID string) error {
	_, err := tx.Exec(ctx, overdueChargeSQL, pgx.StrictNamedArgs{"tenant": string(t), "loan": loanID, "returned": postgres.Nullable(returned),
		"service_point": postgres.Nullable(servicePointID), "metadata_user": record.MetadataUser(ctx)})
	return postgres.Interpret(err, t)
}

// lostChargeSQL charges a loan declared lost (@loan, as stored before the
// declaration) its lost item fee (the policy's chargeAmountItem when its
// chargeType is anotherCost) and its processing fee (lostItemProcessingFee
// when chargeAmountItemPatron), each rounded to the cent and charged
// when above 0, to the fee/fine owner
// serving @service_point; it answers how many fees were due and how many
// charged (fewer when no owner serves the service point).
var lostChargeSQL = lostChargeSQLFor("chargeAmountItemPatron")

// agedChargeSQL is lostChargeSQL for a loan aged to lost: its processing
// fee when the policy says chargeAmountItemSystem.
var agedChargeSQL = lostChargeSQLFor("chargeAmountItemSystem")

// lostChargeSQLFor is the charge of a lost item's fees, the processing
// fee charged when the lost item fee policy's flag (the patron declared
// it lost, or the system aged it) says so; none for a loan billed for its
// loss already (aged to lost and billed, then declared lost), and none of
// a kind the loan was charged already, whatever its account's state: a
// loan declared lost again after a claim returned, or aged to lost and
// declared lost before its billing, is billed nothing more (the charged
// kind known by the automatic fee/fine type its account was charged as,
// as lostFeesSQL knows it).
func lostChargeSQLFor(flag string) string {
	return `WITH ` + loanCTEs("", "@loan::uuid", "@service_point::uuid") + named("", `, {due} AS (
    SELECT t.id, t.fee_fine_type, r.amount
      FROM {lip} CROSS JOIN LATERAL (VALUES
           ('`+schemas.FeeFineLostItemFee+`',
            CASE WHEN {lip}.jsonb #>> '{chargeAmountItem,chargeType}' = 'anotherCost' THEN ({lip}.jsonb #>> '{chargeAmountItem,amount}')::numeric END),
           ('`+schemas.FeeFineLostItemProcessing+`',
            CASE WHEN coalesce(({lip}.jsonb ->> '`+flag+`')::boolean, false) THEN ({lip}.jsonb ->> 'lostItemProcessingFee')::numeric END)) f (name, amount)
      CROSS JOIN LATERAL (SELECT round(f.amount, 2) AS amount) r
      CROSS JOIN LATERAL (SELECT t.id, t.fee_fine_type FROM `+postgres.Table(postgres.TableFeeFineType)+` t
                           WHERE t.tenant_id = @tenant AND t.automatic AND t.fee_fine_type = f.name
                             AND (t.owner_id = (SELECT id FROM {owner}) OR t.owner_id IS NULL)
                           ORDER BY t.owner_id NULLS LAST LIMIT 1) t
     WHERE r.amount > 0
       AND NOT coalesce((SELECT ({l}.jsonb #>> '{agedToLostDelayedBilling,lostItemHasBeenBilled}')::boolean FROM {l}), false)
       AND NOT EXISTS (SELECT 1 FROM `+postgres.Table(postgres.TableFeeFineAccount)+` a
                         JOIN `+postgres.Table(postgres.TableFeeFineType)+` c ON c.tenant_id = a.tenant_id AND c.id = a.fee_fine_id AND c.automatic
                        WHERE a.tenant_id = @tenant AND a.loan_id = (SELECT id FROM {l}) AND c.fee_fine_type = f.name)
), {charged} AS (
    INSERT INTO `+postgres.Table(postgres.TableFeeFineAccount)+` (tenant_id, id, jsonb)
    SELECT @tenant, {n}.id, `+strings.ReplaceAll(accountSQL("{n}.id", "{due}.amount", "NULL::jsonb"), "{t}.", "{due}.")+`
      FROM {l}, {i}, {due}, {owner} CROSS JOIN LATERAL (SELECT gen_random_uuid() AS id) {n}
    RETURNING 1
)
SELECT (SELECT count(*) FROM {due}), (SELECT count(*) FROM {charged})`)
}

// ChargeLostItemFees charges, in tx, the fees of the loan loanID declared
// lost at the service point servicePointID (lostChargeSQL): refused, and
// nothing charged, when fees are due and no fee/fine owner serves the
// service point (mod-circulation refuses the declaration then too).
func ChargeLostItemFees(ctx context.Context, tx pgx.Tx, t storage.Tenant, loanID, servicePointID string) error {
	return chargeLost(ctx, tx, t, lostChargeSQL, loanID, servicePointID)
}

// ChargeAgedToLostFees charges, in tx, the fees of the loan loanID aged
// to lost, to the owner serving servicePointID (agedChargeSQL): refused,
// and nothing charged, as ChargeLostItemFees.
func ChargeAgedToLostFees(ctx context.Context, tx pgx.Tx, t storage.Tenant, loanID, servicePointID string) error {
	return chargeLost(ctx, tx, t, agedChargeSQL, loanID, servicePointID)
}

func chargeLost(ctx context.Context, tx pgx.Tx, t storage.Tenant, sql, loanID, servicePointID string) error {
	var due, charged int
	err := tx.QueryRow(ctx, sql, pgx.StrictNamedArgs{"tenant": string(t), "loan": loanID,
		"service_point": postgres.Nullable(servicePointID), "metadata_user": record.MetadataUser(ctx)}).Scan(&due, &charged)
	if err != nil {
		return postgres.Interpret(err, t)
	}
	if charged < due {
		return errs.Errorf(errs.KindInvalid, schemas.CodeNoFeeFineOwner,
			"No fee/fine owner serves service point %s: the lost item's fees cannot be charged", servicePointID).
			With("servicePointId", servicePointID)
	}
	return nil
}

// lostReturnedSQL settles the fees of a lost item returned, the loan
// @loan as stored before its check-in: while the lost item fee policy's
// feesFinesShallRefunded lasts since the loan was declared lost (always,
// with none), its lost item fee, and its processing fee when the policy
// says returnedLostItemProcessingFee, each: what remains cancelled
// ("Cancelled item returned"), what was paid or transferred and not yet
// refunded given back ("Refunded fully"); the account closed.
var lostReturnedSQL = `
WITH a AS (
    SELECT f.id, f.user_id, f.remaining, f.refundable FROM (` + accountsSQL + `) f
), m AS (
    SELECT a.*, gen_random_uuid() AS cancel_id, gen_random_uuid() AS refund_id FROM a
), cancelled AS (
    INSERT INTO ` + postgres.Table(postgres.TableFeeFineAction) + ` (tenant_id, id, jsonb)
    SELECT @tenant, m.cancel_id, jsonb_build_object('id', m.cancel_id, 'accountId', m.id, 'userId', m.user_id,
           'typeAction', '` + schemas.PaymentStatusCancelledItemReturned + `', 'amountAction', m.remaining, 'balance', 0,
           'dateAction', ` + record.SQLNow + `, 'source', 'System', 'notify', false)
      FROM m WHERE m.remaining > 0
), refunded AS (
    INSERT INTO ` + postgres.Table(postgres.TableFeeFineAction) + ` (tenant_id, id, jsonb)
    SELECT @tenant, m.refund_id, jsonb_build_object('id', m.refund_id, 'accountId', m.id, 'userId', m.user_id,
           'typeAction', '` + schemas.ActionRefund.Full() + `', 'amountAction', m.refundable, 'balance', 0,
           'dateAction', ` + record.SQLNow + `, 'source', 'System', 'paymentMethod', 'Refund to patron', 'notify', false)
      FROM m WHERE m.refundable > 0
)
UPDATE ` + postgres.Table(postgres.TableFeeFineAccount) + ` f
   SET jsonb = ` + record.WithMetadata(`f.jsonb || jsonb_build_object('remaining', 0, 'status', jsonb_build_object('name', '`+schemas.FeeFineClosed+`'),
               'paymentStatus', jsonb_build_object('name', CASE WHEN m.remaining > 0 THEN '`+schemas.PaymentStatusCancelledItemReturned+`'
                                                               ELSE '`+schemas.ActionRefund.Full()+`' END), 'dateUpdated', `+record.SQLNow+`)`, "@metadata_user", true) + `
  FROM m WHERE f.tenant_id = @tenant AND f.id = m.id AND (m.remaining > 0 OR m.refundable > 0)`

// lostFeesSQL is the accounts of the loan @loan a lost item's return
// settles (lostReturnedSQL), chosen by its lost item fee policy: by the
// automatic fee/fine type each was charged as (its feeFineId, which no
// replacement changes), not by the text of its feeFineType.
var lostFeesSQL = `
WITH ` + loanCTEs("", "@loan::uuid", "NULL::uuid") + `
SELECT coalesce(array_agg(f.id::text), '{}')
  FROM ` + postgres.Table(postgres.TableFeeFineAccount) + ` f
  JOIN ` + postgres.Table(postgres.TableFeeFineType) + ` t ON t.tenant_id = f.tenant_id AND t.id = f.fee_fine_id AND t.automatic, l, lip
 WHERE f.loan_id = l.id AND f.tenant_id = @tenant
   AND (t.fee_fine_type = '` + schemas.FeeFineLostItemFee + `'
        OR (t.fee_fine_type = '` + schemas.FeeFineLostItemProcessing + `' AND coalesce((lip.jsonb ->> 'returnedLostItemProcessingFee')::boolean, false)))
   AND (lip.jsonb -> 'feesFinesShallRefunded' IS NULL
        OR ` + postgres.StoredTime("coalesce(l.jsonb ->> 'declaredLostDate', l.jsonb #>> '{agedToLostDelayedBilling,agedToLostDate}')", "loan declaredLostDate") + ` + make_interval(mins =>
           (lip.jsonb #>> '{feesFinesShallRefunded,duration}')::integer * ` +
	minutesCase(`(lip.jsonb #>> '{feesFinesShallRefunded,intervalId}')`, schemas.LoanPeriodMinutes) + `) > now())`

// SettleLostItemReturned settles, in tx, the fees of the loan loanID when
// its item comes back lost (lostReturnedSQL); a loan not lost has none.
func SettleLostItemReturned(ctx context.Context, tx pgx.Tx, t storage.Tenant, loanID string) error {
	args := pgx.StrictNamedArgs{"tenant": string(t), "loan": loanID}
	var ids []string
	if err := tx.QueryRow(ctx, lostFeesSQL, args).Scan(&ids); err != nil {
		return postgres.Interpret(err, t)
	}
	if len(ids) == 0 {
		return nil
	}
	if _, err := tx.Exec(ctx, lockSQL, pgx.StrictNamedArgs{"tenant": string(t), "ids": ids}); err != nil {
		return postgres.Interpret(err, t)
	}
	_, err := tx.Exec(ctx, lostReturnedSQL, pgx.StrictNamedArgs{"tenant": string(t), "ids": ids, "metadata_user": record.MetadataUser(ctx)})
	return postgres.Interpret(err, t)
}

// funcOpenMinutes is migration 35's function counting the minutes a
// service point is open.
const funcOpenMinutes postgres.TableName = "calendar_open_minutes"
