// Package lending holds circulation's writes of loans and the rules that
// govern them, on PostgreSQL: validation's read of everything a check-out
// needs and the patron summary (rules.go), the choice of a loan policy by
// the circulation rules, and the check-out (checkout_write.go), check-in,
// renewal and loan action writes, each one transaction that enforces the
// lock, the limits, the blocks, the requests and the versions read,
// whoever calls. It judges by package rules (as requests are judged),
// fills and reads the requests' queues as package requests keeps them
// (a check-in returns the item through its return loop), and writes each
// row as package record does.
package lending

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/circulation-storage/internal/requests"
	"github.com/checkoutlock/circulation-storage/internal/rules"
	"github.com/checkoutlock/circulation-storage/locksql"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
	"github.com/checkoutlock/schemas/locksettings"
	"github.com/jackc/pgx/v5"

	storage "github.com/checkoutlock/circulation-storage"
)

// Rules implements storage.RulesService, storage.LoanCounter and
// storage.CheckOutStore.
type Rules struct {
	db     *postgres.DB
	policy Policy
}

// Policy is how storage applies a tenant's circulation rules and lock
// setting whoever calls, the same in validation and in the check-out's
// write.
type Policy struct {
	// LockFeatureDefault is the lock feature for a tenant that stored no
	// checkoutLockFeature setting (CHECKOUT_LOCK_FEATURE_ENABLED).
	LockFeatureDefault bool
	// EnforceUnscopedItemLimit enforces an item limit whose rule names
	// neither a material type nor a loan type, counting all the patron's
	// open loans (ITEM_LIMIT_WITHOUT_CRITERIA=enforce); FOLIO does not.
	EnforceUnscopedItemLimit bool
	// OfflineGrace is how far inside a span of its machine's presence a
	// check-out made offline may be dated and still be taken as made
	// offline (KIOSK_OFFLINE_GRACE, schemas.MaxOfflineGrace).
	OfflineGrace time.Duration
}

var (
	_ storage.RulesService = (*Rules)(nil)
	_ storage.LoanCounter  = (*Rules)(nil)
)

// NewRules returns the circulation rules service.
func NewRules(db *postgres.DB, policy Policy) *Rules { return &Rules{db: db, policy: policy} }

// Rules implements storage.RulesService.
func (s *Rules) Rules(ctx context.Context, t storage.Tenant) (storage.CirculationRules, error) {
	return rules.Read(ctx, s.db.Pool, t)
}

// SetRules implements storage.RulesService: the old rules are replaced in one
// transaction, so readers see either the old set or the new one.
func (s *Rules) SetRules(ctx context.Context, t storage.Tenant, set storage.CirculationRules) error {
	return s.db.InTx(ctx, t, func(tx pgx.Tx) error { return rules.Write(ctx, tx, t, set) })
}

// AllowedServicePoints implements storage.RulesService, as package
// requests reads them (requests.AllowedServicePoints): the set a request
// placed is judged by.
func (s *Rules) AllowedServicePoints(ctx context.Context, t storage.Tenant, requesterID, itemID string, ignoreItemStatus bool) (storage.AllowedServicePoints, error) {
	return requests.AllowedServicePoints(ctx, s.db, t, requesterID, itemID, ignoreItemStatus)
}

// openLoanCountSQL counts a patron's open loans. Arguments: @user the
// patron, @material_type and @loan_type (NULL: any), @tenant.
var openLoanCountSQL = rules.OpenLoanCount(postgres.Table(postgres.TableLoan), postgres.Table(postgres.TableItem), "@tenant", "@user", "@material_type::uuid", "@loan_type::uuid")

// CountOpenLoans implements storage.LoanCounter.
func (s *Rules) CountOpenLoans(ctx context.Context, t storage.Tenant, userID, materialTypeID, loanTypeID string) (int, error) {
	var n int
	err := s.db.Pool.QueryRow(ctx, openLoanCountSQL, pgx.StrictNamedArgs{"tenant": string(t), "user": userID,
		"material_type": postgres.Nullable(materialTypeID), "loan_type": postgres.Nullable(loanTypeID)}).Scan(&n)
	if err != nil {
		return 0, postgres.Interpret(err, t)
	}
	return n, nil
}

var _ storage.CheckOutStore = (*Rules)(nil)

// itemLimitSQL is the item limit a matched policy sets (the matched row
// m's policy lp): loansPolicy.itemLimit, when positive and enforced
// (a rule naming neither a material type nor a loan type gives one only
// when enforceUnscoped, a boolean SQL expression); NULL otherwise.
func itemLimitSQL(m, lp, enforceUnscoped string) string {
	return `CASE WHEN (` + lp + `.jsonb #>> '{loansPolicy,itemLimit}')::numeric > 0
                  AND (` + m + `.mt_match OR ` + m + `.lt_match OR ` + enforceUnscoped + `)
             THEN (` + lp + `.jsonb #>> '{loansPolicy,itemLimit}')::numeric::integer END`
}

// openRecallSQL is whether the item has an open recall ("Open - …"): a
// loan of it is not renewed (FOLIO's RENEWAL_BLOCKED_BY_RECALL, whatever
// the policy). request is the table; item and tenant SQL expressions.
func openRecallSQL(request, item, tenant string) string {
	return `EXISTS (SELECT 1 FROM ` + request + ` r WHERE r.item_id = ` + item + ` AND r.tenant_id = ` + tenant + `
                   AND ` + requests.Open("r.status") + ` AND r.jsonb ->> 'requestType' = 'Recall')`
}

// borrowerSQL is the part of a patron's record a check-out decides on,
// the least personal data validation hands out: no e-mail, phone or
// address (u is the patron row).
var borrowerSQL = `jsonb_strip_nulls(jsonb_build_object(
    'id', u.jsonb -> 'id', 'barcode', u.jsonb -> 'barcode', 'active', u.jsonb -> 'active',
    'patronGroup', u.jsonb -> 'patronGroup',
    'expirationDate', CASE WHEN ` + postgres.StoredTime("u.jsonb ->> 'expirationDate'", "patron expirationDate") + ` IS NOT NULL THEN u.jsonb -> 'expirationDate' END,
    'personal', jsonb_build_object('firstName', u.jsonb #> '{personal,firstName}', 'lastName', u.jsonb #> '{personal,lastName}')))`

// checkOutReadSQL reads, in one statement, everything validating a
// check-out by barcode needs: the patron (@user_barcode) and the item
// (@item_barcode) by barcode,
// the item's material type (its name is in FOLIO's refusals), the
// patron's manual blocks in force for borrowing or renewals (not expired)
// and automated blocks, the item's open loan, the first request of the
// item's queue, whether the item has an open recall (a renewal's
// validation reads the same), whether rules are set, the policy they choose with
// the chosen rule's criteria, the policy, the patron's open loans counted
// as that policy's item limit counts them, and the limit enforced
// (@enforce_unscoped: whether an unscoped limit is) in @tenant. Each column
// is named as CheckOutRow reads it; the last (full) says
// whether the statement must be run in full: always false in full; in the
// lean form (checkOutRead), whether the tenant has a gate row.
var (
	checkOutReadSQL     = locksql.NewNamed(checkOutRead(false, byBarcodes), checkOutReadNames...)
	checkOutReadLeanSQL = locksql.NewNamed(checkOutRead(true, byBarcodes), checkOutReadNames...)
)

// checkOutReadByIDSQL and checkOutReadByIDLeanSQL are checkOutReadSQL
// with the patron (@user_id) and the item (@item_id) named by their ids,
// as a renewal by id names them: either may have no barcode.
var (
	checkOutReadByIDSQL     = locksql.NewNamed(checkOutRead(false, byIDs), checkOutReadByIDNames...)
	checkOutReadByIDLeanSQL = locksql.NewNamed(checkOutRead(true, byIDs), checkOutReadByIDNames...)
)

// checkOutReadNames and checkOutReadByIDNames are the names of
// checkOutRead's arguments, by barcodes and by ids.
var (
	checkOutReadNames     = []string{"user_barcode", "item_barcode", "enforce_unscoped", "tenant"}
	checkOutReadByIDNames = []string{"user_id", "item_id", "enforce_unscoped", "tenant"}
)

// readKey is how validation's read finds the patron's row and the item's:
// the condition on each, with its argument.
type readKey struct{ patron, item string }

var (
	byBarcodes = readKey{patron: "barcode = @user_barcode ORDER BY barcode, id", item: "barcode = @item_barcode ORDER BY barcode, id"}
	byIDs      = readKey{patron: "id = @user_id::uuid", item: "id = @item_id::uuid"}
)

// checkOutRead is checkOutReadSQL, lean or in full (gate.go), the patron
// and the item found by key: lean, it reads no blocks and no request and
// answers none.
func checkOutRead(lean bool, key readKey) string {
	gate := `(SELECT jsonb_agg(b.jsonb ORDER BY b.jsonb #>> '{metadata,createdDate}', b.id) FROM ` + postgres.Table(postgres.TableManualBlock) + ` b
         WHERE b.user_id = (SELECT id FROM u) AND b.tenant_id = @tenant
           AND (b.jsonb ->> 'borrowing' = 'true' OR b.jsonb ->> 'renewals' = 'true')
           AND ` + rules.BlockInForce("b") + `) AS manual_blocks,
       ` + rules.AutomatedBlocksSQL("@tenant", "(SELECT id FROM u)", "(SELECT patron_group_id FROM u)") + ` AS automated_blocks,
       (SELECT h.jsonb FROM (` + requests.QueueHeadSQL(postgres.Table(postgres.TableRequest), "(SELECT id FROM i)", "@tenant") + `) h) AS queue_head,
       ` + openRecallSQL(postgres.Table(postgres.TableRequest), "(SELECT id FROM i)", "@tenant") + ` AS open_recall,
       false AS full`
	if lean {
		gate = `NULL::jsonb AS manual_blocks, NULL::jsonb AS automated_blocks, NULL::jsonb AS queue_head, false AS open_recall,
       ` + postgres.GateRowSQL("@tenant") + ` AS full`
	}
	return `
WITH u AS (SELECT id, patron_group_id, jsonb FROM ` + postgres.Table(postgres.TablePatron) + ` WHERE tenant_id = @tenant AND ` + key.patron + ` LIMIT 1),
     i AS (SELECT id, material_type_id, coalesce(temporary_loan_type_id, permanent_loan_type_id) AS loan_type_id, jsonb
             FROM ` + postgres.Table(postgres.TableItem) + ` WHERE tenant_id = @tenant AND ` + key.item + ` LIMIT 1),
     m AS (` + rules.PolicyMatchSQL(postgres.Table(postgres.TableCirculationRule), postgres.Table(postgres.TableCirculationRules), "@tenant",
		"(SELECT patron_group_id FROM u)", "(SELECT material_type_id FROM i)", "(SELECT loan_type_id FROM i)") + `),
     p AS (SELECT lp.jsonb, ` + itemLimitSQL("m", "lp", "@enforce_unscoped::boolean") + ` AS item_limit,
                  CASE WHEN m.mt_match THEN (SELECT material_type_id FROM i) END AS mt,
                  CASE WHEN m.lt_match THEN (SELECT loan_type_id FROM i) END AS lt
             FROM m JOIN ` + postgres.Table(postgres.TableLoanPolicy) + ` lp ON lp.tenant_id = @tenant AND lp.id = m.loan_policy_id
            WHERE EXISTS (SELECT 1 FROM u) AND EXISTS (SELECT 1 FROM i))
SELECT (SELECT ` + borrowerSQL + ` FROM u) AS patron, (SELECT jsonb FROM i) AS item,
       (SELECT l.jsonb FROM ` + postgres.Table(postgres.TableLoan) + ` l WHERE l.tenant_id = @tenant AND l.item_id = (SELECT id FROM i) AND l.status_name = ` + postgres.Lit(schemas.LoanOpen) + `
         ORDER BY l.jsonb ->> 'loanDate', l.id LIMIT 1) AS open_loan,
       EXISTS (SELECT 1 FROM ` + postgres.Table(postgres.TableCirculationRules) + ` WHERE tenant_id = @tenant) AS rules_set,
       m.loan_policy_id::text AS policy_id, m.rule_index, m.pg_match, m.mt_match, m.lt_match,
       p.jsonb AS loan_policy, p.item_limit, p.mt::text AS mt, p.lt::text AS lt,
       c.n AS open_loans,
       ` + rules.Reached("c.n", "p.item_limit") + ` AS reached,
       (SELECT s.jsonb FROM ` + postgres.Table(postgres.TableSetting) + ` s
         WHERE s.tenant_id = @tenant AND s.scope = '` + locksettings.Scope + `' AND s.key = '` + locksettings.Key + `') AS lock_setting,
       (SELECT jsonb_build_object('id', mt.id, 'name', mt.name) FROM ` + postgres.Table(postgres.TableMaterialType) + ` mt
         WHERE mt.tenant_id = @tenant AND mt.id = (SELECT material_type_id FROM i)) AS material_type,
       ` + gate + `
  FROM (SELECT 1) one
  LEFT JOIN m ON EXISTS (SELECT 1 FROM u) AND EXISTS (SELECT 1 FROM i)
  LEFT JOIN p ON true
  LEFT JOIN LATERAL (SELECT (` + rules.OpenLoanCount(postgres.Table(postgres.TableLoan), postgres.Table(postgres.TableItem), "@tenant", "(SELECT id FROM u)", "p.mt", "p.lt") + `) AS n
                      WHERE p.jsonb IS NOT NULL) c ON true`
}

// ReadForCheckOut implements storage.CheckOutStore, in one statement (two
// the first time this instance meets a tenant's gate row), run by its
// generic plan (postgres.GenericPlans).
func (s *Rules) ReadForCheckOut(ctx context.Context, t storage.Tenant, itemBarcode, userBarcode string) (storage.CheckOutRecords, error) {
	return s.readForCheckOut(ctx, t, false, itemBarcode, userBarcode, !s.db.Gates.Has(t))
}

// ReadForCheckOutByID implements storage.CheckOutStore: ReadForCheckOut's
// read, the patron and the item named by their ids (UUIDs).
func (s *Rules) ReadForCheckOutByID(ctx context.Context, t storage.Tenant, itemID, userID string) (storage.CheckOutRecords, error) {
	return s.readForCheckOut(ctx, t, true, itemID, userID, !s.db.Gates.Has(t))
}

// readForCheckOut is ReadForCheckOut, the item and the patron named by
// their barcodes or (byID) their ids, lean or in full (gate.go); a lean
// read that meets a gate row runs in full.
func (s *Rules) readForCheckOut(ctx context.Context, t storage.Tenant, byID bool, item, user string, lean bool) (storage.CheckOutRecords, error) {
	stmt, names := checkOutReadSQL, checkOutReadNames
	switch {
	case byID && lean:
		stmt, names = checkOutReadByIDLeanSQL, checkOutReadByIDNames
	case byID:
		stmt, names = checkOutReadByIDSQL, checkOutReadByIDNames
	case lean:
		stmt = checkOutReadLeanSQL
	}
	args := pgx.StrictNamedArgs{names[0]: user, names[1]: item, "enforce_unscoped": s.policy.EnforceUnscopedItemLimit, "tenant": string(t)}
	r, err := postgres.QueryOneGeneric[CheckOutRow](ctx, s.db.Pool, stmt.SQL, stmt.Bind(args))
	if err != nil {
		return storage.CheckOutRecords{}, postgres.Interpret(err, t)
	}
	if r.Full {
		// The tenant has a gate row this instance did not know of: what
		// the lean read answered is thrown away, and the full one runs.
		s.db.Gates.Found(t)
		return s.readForCheckOut(ctx, t, byID, item, user, false)
	}
	out := storage.CheckOutRecords{User: r.User, Item: r.Item, OpenLoan: r.OpenLoan, MaterialType: r.MaterialType,
		ManualBlocks: r.ManualBlocks, AutomatedBlocks: r.AutomatedBlocks, QueueHead: r.QueueHead, OpenRecall: r.OpenRecall,
		LoanPolicy: r.LoanPolicy, LockSetting: r.LockSetting}
	if out.User == nil || out.Item == nil || !r.RulesSet {
		return out, nil
	}
	out.RulesSet = true
	out.Match = &storage.PolicyMatch{LoanPolicyID: postgres.Deref(r.PolicyID), PatronGroupMatch: r.PatronGroupMatch != nil && *r.PatronGroupMatch,
		MaterialTypeMatch: r.MaterialTypeMatch != nil && *r.MaterialTypeMatch, LoanTypeMatch: r.LoanTypeMatch != nil && *r.LoanTypeMatch,
		RuleIndex: -1}
	if r.RuleIndex != nil {
		out.Match.RuleIndex = *r.RuleIndex
	}
	if out.LoanPolicy == nil {
		return storage.CheckOutRecords{}, errs.NotFound(storage.LoanPolicies.Name, postgres.Deref(r.PolicyID))
	}
	if r.OpenLoans != nil {
		out.OpenLoans = *r.OpenLoans
	}
	if r.Limit != nil {
		out.Limit = &storage.ItemLimit{Limit: *r.Limit, MaterialTypeID: postgres.Deref(r.MaterialTypeID), LoanTypeID: postgres.Deref(r.LoanTypeID),
			Reached: r.Reached}
	}
	return out, nil
}

// CheckOutRow is the row checkOutReadSQL answers, read by column name.
// It is exported for package checkoutsql alone, which hands it to the
// benchmark's floor with the read (CheckOutStatements.Read), so that the
// floor scans the read into the very row this package does.
type CheckOutRow struct {
	User              json.RawMessage `db:"patron"`
	Item              json.RawMessage `db:"item"`
	OpenLoan          json.RawMessage `db:"open_loan"`
	RulesSet          bool            `db:"rules_set"`
	PolicyID          *string         `db:"policy_id"`
	RuleIndex         *int            `db:"rule_index"`
	PatronGroupMatch  *bool           `db:"pg_match"`
	MaterialTypeMatch *bool           `db:"mt_match"`
	LoanTypeMatch     *bool           `db:"lt_match"`
	LoanPolicy        json.RawMessage `db:"loan_policy"`
	Limit             *int            `db:"item_limit"`
	// MaterialTypeID and LoanTypeID are the limit's criteria (nil: any).
	MaterialTypeID  *string         `db:"mt"`
	LoanTypeID      *string         `db:"lt"`
	OpenLoans       *int            `db:"open_loans"`
	Reached         bool            `db:"reached"`
	LockSetting     json.RawMessage `db:"lock_setting"`
	MaterialType    json.RawMessage `db:"material_type"`
	ManualBlocks    json.RawMessage `db:"manual_blocks"`
	AutomatedBlocks json.RawMessage `db:"automated_blocks"`
	QueueHead       json.RawMessage `db:"queue_head"`
	OpenRecall      bool            `db:"open_recall"`
	// Full says the lean read met the tenant's gate row: run it in full.
	Full bool `db:"full"`
}

// patronSummarySQL reads what a self-check machine shows a patron ($1, by
// barcode) of tenant $3 in one statement: the patron, their open loans
// counted, the overdue ones counted, the fifty due first with their items'
// barcodes and titles, the item limits that apply to the patron, the
// blocks validation reads, and what they owe: the balance, and their open
// fees/fines counted and the fifty oldest listed.
//
// The item limits are the check-out's own, asked of every material type
// and loan type the tenant has: for each pair the circulation rules choose
// the policy (rules.PolicyMatchSQL), its limit is enforced or not
// (itemLimitSQL, with $2 as the write has it) and counts the patron's
// loans of the rule's criteria (rules.OpenLoanCount), and is reached or
// not (rules.Reached): the very fragments the write runs. Each distinct
// limit is answered once, with the loans it counts and whether it is
// reached; and whether some pair has no enforced limit at all, in which
// case a limit never stops every check-out (nor when the tenant has no
// pair: nothing is lent then, but not because of a limit).
var patronSummarySQL = `
WITH u AS (SELECT id, patron_group_id, jsonb FROM ` + postgres.Table(postgres.TablePatron) + ` WHERE tenant_id = $3 AND barcode = $1 ORDER BY barcode, id LIMIT 1),
     ol AS (SELECT CASE WHEN ` + postgres.StoredTime("l.jsonb ->> 'dueDate'", "loan dueDate") + ` IS NOT NULL THEN l.jsonb ->> 'dueDate' END AS due, i.jsonb ->> 'barcode' AS barcode, i.jsonb ->> 'title' AS title
              FROM ` + postgres.Table(postgres.TableLoan) + ` l JOIN ` + postgres.Table(postgres.TableItem) + ` i ON i.tenant_id = l.tenant_id AND i.id = l.item_id
             WHERE l.tenant_id = $3 AND l.user_id = (SELECT id FROM u) AND l.status_name = ` + postgres.Lit(schemas.LoanOpen) + `),
     pairs AS (SELECT m.pg_match, m.mt_match, m.lt_match, ` + itemLimitSQL("m", "lp", "$2::boolean") + ` AS n,
                      CASE WHEN m.mt_match THEN mt.id END AS mt, CASE WHEN m.lt_match THEN lt.id END AS lt
                 FROM ` + postgres.Table(postgres.TableMaterialType) + ` mt
                 JOIN ` + postgres.Table(postgres.TableLoanType) + ` lt ON lt.tenant_id = mt.tenant_id
                 CROSS JOIN LATERAL (` + rules.PolicyMatchSQL(postgres.Table(postgres.TableCirculationRule), postgres.Table(postgres.TableCirculationRules), "$3",
	"(SELECT patron_group_id FROM u)", "mt.id", "lt.id") + `) m
                 JOIN ` + postgres.Table(postgres.TableLoanPolicy) + ` lp ON lp.tenant_id = $3 AND lp.id = m.loan_policy_id
                WHERE mt.tenant_id = $3 AND EXISTS (SELECT 1 FROM u)),
     limits AS (SELECT DISTINCT pg_match, mt_match, lt_match, n, mt, lt FROM pairs WHERE n IS NOT NULL),
     counted AS (SELECT lim.*, c.open, ` + rules.Reached("c.open", "lim.n") + ` AS reached
                   FROM limits lim CROSS JOIN LATERAL (SELECT (` + rules.OpenLoanCount(postgres.Table(postgres.TableLoan), postgres.Table(postgres.TableItem), "$3",
	"(SELECT id FROM u)", "lim.mt", "lim.lt") + `) AS open) c),
     ff AS (SELECT f.id, f.jsonb, f.amount, f.remaining FROM ` + postgres.Table(postgres.TableFeeFineAccount) + ` f
             WHERE f.user_id = (SELECT id FROM u) AND f.tenant_id = $3 AND f.status = ` + postgres.Lit(schemas.FeeFineOpen) + `)
SELECT (SELECT ` + borrowerSQL + ` FROM u) AS patron,
       (SELECT count(*) FROM ol)::int AS open_loan_count,
       (SELECT count(*) FROM ol WHERE due::timestamptz < now())::int AS overdue_count,
       (SELECT jsonb_agg(jsonb_strip_nulls(jsonb_build_object('itemBarcode', barcode, 'title', title, 'dueDate', due,
               'overdue', coalesce(due::timestamptz < now(), false))) ORDER BY due, barcode)
          FROM (SELECT * FROM ol ORDER BY due, barcode LIMIT ` + fmt.Sprint(storage.PatronSummaryLoans) + `) x) AS open_loans,
       (SELECT jsonb_agg(jsonb_strip_nulls(jsonb_build_object('itemLimit', n, 'openLoans', open, 'reached', reached,
               'patronGroupMatch', pg_match, 'materialTypeMatch', mt_match, 'loanTypeMatch', lt_match,
               'materialTypeId', mt, 'loanTypeId', lt)) ORDER BY n, mt, lt) FROM counted) AS item_limits,
       NOT EXISTS (SELECT 1 FROM pairs) OR EXISTS (SELECT 1 FROM pairs WHERE n IS NULL) AS unlimited,
       (SELECT jsonb_agg(b.jsonb ORDER BY b.jsonb #>> '{metadata,createdDate}', b.id) FROM ` + postgres.Table(postgres.TableManualBlock) + ` b
         WHERE b.user_id = (SELECT id FROM u) AND b.tenant_id = $3 AND b.jsonb ->> 'borrowing' = 'true'
           AND ` + rules.BlockInForce("b") + `) AS manual_blocks,
       ` + rules.AutomatedBlocksSQL("$3", "(SELECT id FROM u)", "(SELECT patron_group_id FROM u)") + ` AS automated_blocks,
       (` + rules.BalanceSQL("$3", "(SELECT id FROM u)") + `)::text AS fee_fine_balance,
       (SELECT count(*) FROM ff)::int AS fee_fine_count,
       (SELECT jsonb_agg(jsonb_strip_nulls(jsonb_build_object('id', id, 'feeFineType', jsonb ->> 'feeFineType', 'amount', round(amount, 2)::text,
               'remaining', round(remaining, 2)::text, 'title', jsonb ->> 'title', 'itemBarcode', jsonb ->> 'barcode',
               'dateCreated', jsonb #>> '{metadata,createdDate}')) ORDER BY jsonb #>> '{metadata,createdDate}', id)
          FROM (SELECT * FROM ff ORDER BY jsonb #>> '{metadata,createdDate}', id LIMIT ` + fmt.Sprint(storage.PatronSummaryFeesFines) + `) x) AS fees_fines`

// ReadPatronSummary implements storage.CheckOutStore, in one statement.
func (s *Rules) ReadPatronSummary(ctx context.Context, t storage.Tenant, userBarcode string) (storage.PatronSummary, error) {
	rows, err := s.db.Pool.Query(ctx, patronSummarySQL, userBarcode, s.policy.EnforceUnscopedItemLimit, string(t))
	if err != nil {
		return storage.PatronSummary{}, postgres.Interpret(err, t)
	}
	r, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[patronSummaryRow])
	if err != nil {
		return storage.PatronSummary{}, postgres.Interpret(err, t)
	}
	return storage.PatronSummary{User: r.User, OpenLoanCount: r.OpenLoanCount, OverdueCount: r.OverdueCount, OpenLoans: r.OpenLoans,
		ItemLimits: r.ItemLimits, Unlimited: r.Unlimited, ManualBlocks: r.ManualBlocks, AutomatedBlocks: r.AutomatedBlocks,
		FeeFineBalance: r.FeeFineBalance, FeeFineCount: r.FeeFineCount, FeesFines: r.FeesFines}, nil
}

// patronSummaryRow is patronSummarySQL's row, by name.
type patronSummaryRow struct {
	User            json.RawMessage `db:"patron"`
	OpenLoanCount   int             `db:"open_loan_count"`
	OverdueCount    int             `db:"overdue_count"`
	OpenLoans       json.RawMessage `db:"open_loans"`
	ItemLimits      json.RawMessage `db:"item_limits"`
	Unlimited       bool            `db:"unlimited"`
	ManualBlocks    json.RawMessage `db:"manual_blocks"`
	AutomatedBlocks json.RawMessage `db:"automated_blocks"`
	FeeFineBalance  string          `db:"fee_fine_balance"`
	FeeFineCount    int             `db:"fee_fine_count"`
	FeesFines       json.RawMessage `db:"fees_fines"`
}

// matchLoanPolicySQL is the rules' choice. Arguments: @group the patron
// group, @material_type, @loan_type, @tenant.
var matchLoanPolicySQL = rules.PolicyMatchSQL(postgres.Table(postgres.TableCirculationRule), postgres.Table(postgres.TableCirculationRules), "@tenant",
	"@group::uuid", "@material_type::uuid", "@loan_type::uuid")

// MatchLoanPolicy implements storage.RulesService.
func (s *Rules) MatchLoanPolicy(ctx context.Context, t storage.Tenant, patronGroupID, materialTypeID, loanTypeID string) (storage.PolicyMatch, error) {
	var policyID string
	var ruleIndex *int
	m := storage.PolicyMatch{RuleIndex: -1}
	err := s.db.Pool.QueryRow(ctx, matchLoanPolicySQL, pgx.StrictNamedArgs{"tenant": string(t), "group": postgres.Nullable(patronGroupID),
		"material_type": postgres.Nullable(materialTypeID), "loan_type": postgres.Nullable(loanTypeID)}).
		Scan(&policyID, &ruleIndex, &m.PatronGroupMatch, &m.MaterialTypeMatch, &m.LoanTypeMatch)
	if errors.Is(err, pgx.ErrNoRows) {
		return storage.PolicyMatch{}, errs.Errorf(errs.KindNotFound, schemas.CodeNotFound,
			"No circulation rules are set: PUT /circulation-rules-storage first")
	}
	if err != nil {
		return storage.PolicyMatch{}, postgres.Interpret(err, t)
	}
	m.LoanPolicyID = policyID
	if ruleIndex != nil {
		m.RuleIndex = *ruleIndex
	}
	return m, nil
}

// movedDueSQL is the loan document doc (SQL) with its due date moved off
// the library's closed days and hours as its loan policy (policy, SQL
// giving the policy's document) says, by migration 35's loan_due_date
// (its checkout service point's calendar, FOLIO's
// closedLibraryDueDateManagementId): the one rule of a check-out's and a
// renewal's due date on a closed day, where moves (SQL, boolean) says the
// date is the policy's to move. A loan lent through an override or
// offline keeps the date it was given, as does a renewal past the loan
// policy's refusals (FOLIO's: its due date is the librarian's); so does a
// date the calendar leaves where it is, as sent.
func movedDueSQL(doc, policy, moves string) string {
	due := postgres.StoredTime(doc+" ->> 'dueDate'", "loan dueDate")
	return `(SELECT CASE WHEN m.due IS DISTINCT FROM d.due
                     THEN jsonb_set(` + doc + `, '{dueDate}', to_jsonb(to_char(m.due AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')))
                     ELSE ` + doc + ` END
       FROM (SELECT ` + due + ` AS due) d,
            LATERAL (SELECT CASE WHEN ` + moves + `
                                 THEN ` + postgres.Table(funcLoanDueDate) + `(@tenant, (` + doc + ` ->> 'checkoutServicePointId')::uuid, d.due, ` + policy + `, now())
                                 ELSE d.due END AS due) m)`
}

// funcLoanDueDate is migration 35's function moving a due date by a loan
// policy.
const funcLoanDueDate postgres.TableName = "loan_due_date"
