package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	storage "github.com/checkoutlock/circulation-storage"
)

// Rules implements storage.RulesService and storage.LoanCounter.
type Rules struct {
	db *DB
}

var (
	_ storage.RulesService = (*Rules)(nil)
	_ storage.LoanCounter  = (*Rules)(nil)
)

// NewRules returns the circulation rules service.
func NewRules(db *DB) *Rules { return &Rules{db: db} }

// Rules implements storage.RulesService.
func (s *Rules) Rules(ctx context.Context, t storage.Tenant) (storage.CirculationRules, error) {
	return readRules(ctx, s.db.pool, t)
}

func readRules(ctx context.Context, q querier, t storage.Tenant) (storage.CirculationRules, error) {
	var rules storage.CirculationRules
	err := q.QueryRow(ctx, fmt.Sprintf(`SELECT fallback_loan_policy_id::text FROM %s`, table(t, "circulation_rules"))).
		Scan(&rules.FallbackLoanPolicyID)
	if errors.Is(err, pgx.ErrNoRows) {
		return storage.CirculationRules{}, storage.Errorf(storage.KindNotFound, storage.CodeNotFound,
			"No circulation rules are set: PUT /circulation-rules-storage first")
	}
	if err != nil {
		return storage.CirculationRules{}, interpret(err, t)
	}
	rows, err := q.Query(ctx, fmt.Sprintf(`
SELECT coalesce(patron_group_id::text, ''), coalesce(material_type_id::text, ''),
       coalesce(loan_type_id::text, ''), loan_policy_id::text
  FROM %s ORDER BY position`, table(t, "circulation_rule")))
	if err != nil {
		return storage.CirculationRules{}, interpret(err, t)
	}
	rules.Rules, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (storage.CirculationRule, error) {
		var r storage.CirculationRule
		err := row.Scan(&r.PatronGroupID, &r.MaterialTypeID, &r.LoanTypeID, &r.LoanPolicyID)
		return r, err
	})
	if err != nil {
		return storage.CirculationRules{}, interpret(err, t)
	}
	if rules.Rules == nil {
		rules.Rules = []storage.CirculationRule{}
	}
	return rules, nil
}

// SetRules implements storage.RulesService: the old rules are replaced in one
// transaction, so readers see either the old set or the new one.
func (s *Rules) SetRules(ctx context.Context, t storage.Tenant, rules storage.CirculationRules) error {
	return s.db.inTx(ctx, t, func(tx pgx.Tx) error { return writeRules(ctx, tx, t, rules) })
}

func writeRules(ctx context.Context, tx pgx.Tx, t storage.Tenant, rules storage.CirculationRules) error {
	_, err := tx.Exec(ctx, fmt.Sprintf(`
INSERT INTO %s (id, fallback_loan_policy_id) VALUES (1, $1)
ON CONFLICT (id) DO UPDATE SET fallback_loan_policy_id = excluded.fallback_loan_policy_id`, table(t, "circulation_rules")),
		rules.FallbackLoanPolicyID)
	if err != nil {
		return interpretRule(err, t, -1, rules)
	}
	if _, err := tx.Exec(ctx, fmt.Sprintf(`DELETE FROM %s`, table(t, "circulation_rule"))); err != nil {
		return interpret(err, t)
	}
	for i, r := range rules.Rules {
		_, err := tx.Exec(ctx, fmt.Sprintf(`
INSERT INTO %s (position, patron_group_id, material_type_id, loan_type_id, loan_policy_id)
VALUES ($1, nullif($2, '')::uuid, nullif($3, '')::uuid, nullif($4, '')::uuid, $5)`, table(t, "circulation_rule")),
			i, r.PatronGroupID, r.MaterialTypeID, r.LoanTypeID, r.LoanPolicyID)
		if err != nil {
			return interpretRule(err, t, i, rules)
		}
	}
	return nil
}

// interpretRule names the rule and field of a reference that does not exist.
func interpretRule(err error, t storage.Tenant, index int, rules storage.CirculationRules) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != sqlstateForeignKeyViolation {
		return interpret(err, t)
	}
	c := constraints[pgErr.ConstraintName]
	field, value := c.field, rules.FallbackLoanPolicyID
	if index >= 0 {
		r := rules.Rules[index]
		field = fmt.Sprintf("rules.%d.%s", index, c.field)
		value = map[string]string{"patronGroupId": r.PatronGroupID, "materialTypeId": r.MaterialTypeID,
			"loanTypeId": r.LoanTypeID, "loanPolicyId": r.LoanPolicyID}[c.field]
	}
	e := storage.Errorf(storage.KindInvalid, storage.CodeValidation, "%s: %s %s does not exist", field, c.target, value).
		With(field, value)
	e.Err = err
	return e
}

// openLoanCountSQL is the item limit's count, in the database, never by
// fetching loans: the patron's open loans, not counting items Claimed
// returned, of the material type and of the loan type (an item's temporary
// one when set) when they are not NULL. loan and item are the tables, user,
// materialType and loanType the SQL expressions that give them. Validation
// (CountOpenLoans, PolicyAndCount) and the check-out's write (checkOutSQL)
// count with it, so they never count differently.
func openLoanCountSQL(loan, item, user, materialType, loanType string) string {
	return `
SELECT count(*)
  FROM ` + loan + ` l
  JOIN ` + item + ` i ON i.id = l.item_id
 WHERE l.user_id = ` + user + `
   AND l.status_name = 'Open'
   AND i.status_name <> 'Claimed returned'
   AND (` + materialType + ` IS NULL OR i.material_type_id = ` + materialType + `)
   AND (` + loanType + ` IS NULL OR coalesce(i.temporary_loan_type_id, i.permanent_loan_type_id) = ` + loanType + `)`
}

// CountOpenLoans implements storage.LoanCounter.
func (s *Rules) CountOpenLoans(ctx context.Context, t storage.Tenant, userID, materialTypeID, loanTypeID string) (int, error) {
	var n int
	err := s.db.pool.QueryRow(ctx, openLoanCountSQL(table(t, "loan"), table(t, "item"), "$1", "$2::uuid", "$3::uuid"),
		userID, nullable(materialTypeID), nullable(loanTypeID)).Scan(&n)
	if err != nil {
		return 0, interpret(err, t)
	}
	return n, nil
}

var _ storage.CheckOutStore = (*Rules)(nil)

// checkOutBasicsSQL reads, in one statement, the patron and the item by
// barcode, the item's open loan and the circulation rules (their fallback
// policy, NULL when none are set, and the rules in order).
const checkOutBasicsSQL = `
SELECT (SELECT jsonb FROM %[1]s WHERE barcode = $1 ORDER BY barcode, id LIMIT 1),
       i.jsonb,
       (SELECT jsonb FROM %[3]s l WHERE l.item_id = i.id AND l.status_name = 'Open' ORDER BY l.jsonb ->> 'loanDate', l.id LIMIT 1),
       (SELECT fallback_loan_policy_id::text FROM %[4]s),
       (SELECT coalesce(jsonb_agg(jsonb_build_object('patronGroupId', coalesce(patron_group_id::text, ''),
                 'materialTypeId', coalesce(material_type_id::text, ''), 'loanTypeId', coalesce(loan_type_id::text, ''),
                 'loanPolicyId', loan_policy_id::text) ORDER BY position), '[]') FROM %[5]s)
  FROM (SELECT 1) one
  LEFT JOIN (SELECT id, jsonb FROM %[2]s WHERE barcode = $2 ORDER BY barcode, id LIMIT 1) i ON true`

// CheckOutBasics implements storage.CheckOutStore.
func (s *Rules) CheckOutBasics(ctx context.Context, t storage.Tenant, itemBarcode, userBarcode string) (user, item, openLoan json.RawMessage, rules *storage.CirculationRules, err error) {
	var fallback *string
	var list json.RawMessage
	err = s.db.pool.QueryRow(ctx, fmt.Sprintf(checkOutBasicsSQL, table(t, "patron"), table(t, "item"), table(t, "loan"),
		table(t, "circulation_rules"), table(t, "circulation_rule")), userBarcode, itemBarcode).
		Scan(&user, &item, &openLoan, &fallback, &list)
	if err != nil {
		return nil, nil, nil, nil, interpret(err, t)
	}
	if fallback != nil {
		rules = &storage.CirculationRules{FallbackLoanPolicyID: *fallback}
		if err := json.Unmarshal(list, &rules.Rules); err != nil {
			return nil, nil, nil, nil, err
		}
	}
	return user, item, openLoan, rules, nil
}

// PolicyAndCount implements storage.CheckOutStore, in one statement.
func (s *Rules) PolicyAndCount(ctx context.Context, t storage.Tenant, policyID, userID, materialTypeID, loanTypeID string) (json.RawMessage, int, error) {
	var policy json.RawMessage
	var n int
	err := s.db.pool.QueryRow(ctx, `SELECT (SELECT jsonb FROM `+table(t, "loan_policy")+` WHERE id = $4), (`+
		openLoanCountSQL(table(t, "loan"), table(t, "item"), "$1", "$2::uuid", "$3::uuid")+`)`,
		userID, nullable(materialTypeID), nullable(loanTypeID), policyID).Scan(&policy, &n)
	if err != nil {
		return nil, 0, interpret(err, t)
	}
	if policy == nil {
		return nil, 0, storage.NotFound(storage.LoanPolicies.Name, policyID)
	}
	return policy, n, nil
}

// nullable is nil for "", so an absent filter is SQL NULL.
func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}
