package rules

import (
	"context"
	"errors"
	"strconv"

	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/circulation-storage/internal/record"
	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
)

// The circulation rules as stored: one row of the tenant's fallback
// policy (circulation_rules) and its rules in order (circulation_rule).
// Choosing a policy by them is PolicyMatchSQL's.

// Read reads the tenant's circulation rules through q.
func Read(ctx context.Context, q postgres.Querier, t storage.Tenant) (storage.CirculationRules, error) {
	var rules storage.CirculationRules
	err := q.QueryRow(ctx, postgres.WithTables(`SELECT r.fallback_loan_policy_id::text, coalesce(r.fallback_request_policy_id::text, ''),
       coalesce(f.fallback_overdue_fine_policy_id::text, ''), coalesce(f.fallback_lost_item_policy_id::text, ''),
       coalesce(f.fallback_notice_policy_id::text, '')
  FROM %s r LEFT JOIN %s f ON f.tenant_id = r.tenant_id WHERE r.tenant_id = $1`,
		postgres.TableCirculationRules, postgres.TableRulesFee), string(t)).Scan(&rules.FallbackLoanPolicyID, &rules.FallbackRequestPolicyID,
		&rules.FallbackOverdueFinePolicyID, &rules.FallbackLostItemPolicyID, &rules.FallbackNoticePolicyID)
	if errors.Is(err, pgx.ErrNoRows) {
		return storage.CirculationRules{}, errs.Errorf(errs.KindNotFound, schemas.CodeNotFound,
			"No circulation rules are set: PUT /circulation-rules-storage first")
	}
	if err != nil {
		return storage.CirculationRules{}, postgres.Interpret(err, t)
	}
	rows, err := q.Query(ctx, postgres.WithTables(`
SELECT coalesce(r.patron_group_id::text, ''), coalesce(r.material_type_id::text, ''),
       coalesce(r.loan_type_id::text, ''), r.loan_policy_id::text, coalesce(r.request_policy_id::text, ''),
       coalesce(f.overdue_fine_policy_id::text, ''), coalesce(f.lost_item_policy_id::text, ''),
       coalesce(f.notice_policy_id::text, '')
  FROM %s r LEFT JOIN %s f ON f.tenant_id = r.tenant_id AND f.position = r.position
 WHERE r.tenant_id = $1 ORDER BY r.position`, postgres.TableCirculationRule, postgres.TableRuleFee), string(t))
	if err != nil {
		return storage.CirculationRules{}, postgres.Interpret(err, t)
	}
	rules.Rules, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (storage.CirculationRule, error) {
		var r storage.CirculationRule
		err := row.Scan(&r.PatronGroupID, &r.MaterialTypeID, &r.LoanTypeID, &r.LoanPolicyID, &r.RequestPolicyID,
			&r.OverdueFinePolicyID, &r.LostItemPolicyID, &r.NoticePolicyID)
		return r, err
	})
	if err != nil {
		return storage.CirculationRules{}, postgres.Interpret(err, t)
	}
	if rules.Rules == nil {
		rules.Rules = []storage.CirculationRule{}
	}
	return rules, nil
}

// Write replaces the tenant's circulation rules, in tx.
func Write(ctx context.Context, tx pgx.Tx, t storage.Tenant, rules storage.CirculationRules) error {
	_, err := tx.Exec(ctx, postgres.WithTables(`
INSERT INTO %s (tenant_id, fallback_loan_policy_id, fallback_request_policy_id) VALUES ($2, $1, nullif($3, '')::uuid)
ON CONFLICT (tenant_id) DO UPDATE
  SET fallback_loan_policy_id = excluded.fallback_loan_policy_id, fallback_request_policy_id = excluded.fallback_request_policy_id`,
		postgres.TableCirculationRules), rules.FallbackLoanPolicyID, string(t), rules.FallbackRequestPolicyID)
	if err == nil {
		_, err = tx.Exec(ctx, postgres.WithTables(`
INSERT INTO %s (tenant_id, fallback_overdue_fine_policy_id, fallback_lost_item_policy_id, fallback_notice_policy_id)
VALUES (@tenant, nullif(@overdue, '')::uuid, nullif(@lost, '')::uuid, nullif(@notice, '')::uuid)
ON CONFLICT (tenant_id) DO UPDATE
  SET fallback_overdue_fine_policy_id = excluded.fallback_overdue_fine_policy_id, fallback_lost_item_policy_id = excluded.fallback_lost_item_policy_id,
      fallback_notice_policy_id = excluded.fallback_notice_policy_id`,
			postgres.TableRulesFee), pgx.StrictNamedArgs{"tenant": string(t), "overdue": rules.FallbackOverdueFinePolicyID,
			"lost": rules.FallbackLostItemPolicyID, "notice": rules.FallbackNoticePolicyID})
	}
	if err != nil {
		return interpretRule(err, t, -1, rules)
	}
	for _, table := range []postgres.TableName{postgres.TableCirculationRule, postgres.TableRuleFee} {
		if _, err := tx.Exec(ctx, postgres.WithTables(`DELETE FROM %s WHERE tenant_id = $1`, table), string(t)); err != nil {
			return postgres.Interpret(err, t)
		}
	}
	for i, r := range rules.Rules {
		_, err := tx.Exec(ctx, postgres.WithTables(`
WITH fee AS (
    INSERT INTO %s (tenant_id, position, overdue_fine_policy_id, lost_item_policy_id, notice_policy_id)
    SELECT @tenant, @position, nullif(@overdue_policy, '')::uuid, nullif(@lost_policy, '')::uuid, nullif(@notice_policy, '')::uuid
     WHERE @overdue_policy <> '' OR @lost_policy <> '' OR @notice_policy <> ''
)
INSERT INTO %s (tenant_id, position, patron_group_id, material_type_id, loan_type_id, loan_policy_id, request_policy_id)
VALUES (@tenant, @position, nullif(@group, '')::uuid, nullif(@material_type, '')::uuid, nullif(@loan_type, '')::uuid, @policy,
        nullif(@request_policy, '')::uuid)`,
			postgres.TableRuleFee, postgres.TableCirculationRule), pgx.StrictNamedArgs{"tenant": string(t), "position": i, "group": r.PatronGroupID,
			"material_type": r.MaterialTypeID, "loan_type": r.LoanTypeID, "policy": r.LoanPolicyID, "request_policy": r.RequestPolicyID,
			"overdue_policy": r.OverdueFinePolicyID, "lost_policy": r.LostItemPolicyID, "notice_policy": r.NoticePolicyID})
		if err != nil {
			return interpretRule(err, t, i, rules)
		}
	}
	return nil
}

// interpretRule names the rule and field of a reference that does not exist.
func interpretRule(err error, t storage.Tenant, index int, rules storage.CirculationRules) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != pgerrcode.ForeignKeyViolation {
		return postgres.Interpret(err, t)
	}
	c := record.Constraints[pgErr.ConstraintName]
	field, value := c.Field, map[string]string{"fallbackLoanPolicyId": rules.FallbackLoanPolicyID,
		"fallbackRequestPolicyId": rules.FallbackRequestPolicyID, "fallbackOverdueFinePolicyId": rules.FallbackOverdueFinePolicyID,
		"fallbackLostItemPolicyId": rules.FallbackLostItemPolicyID, "fallbackNoticePolicyId": rules.FallbackNoticePolicyID}[c.Field]
	if index >= 0 {
		r := rules.Rules[index]
		field = "rules." + strconv.Itoa(index) + "." + c.Field
		value = map[string]string{"patronGroupId": r.PatronGroupID, "materialTypeId": r.MaterialTypeID,
			"loanTypeId": r.LoanTypeID, "loanPolicyId": r.LoanPolicyID, "requestPolicyId": r.RequestPolicyID,
			"overdueFinePolicyId": r.OverdueFinePolicyID, "lostItemPolicyId": r.LostItemPolicyID, "noticePolicyId": r.NoticePolicyID}[c.Field]
	}
	e := errs.Errorf(errs.KindInvalid, schemas.CodeValidation, "%s: %s %s does not exist", field, c.Target, value).
		With(field, value)
	e.Err = err
	return e
}
