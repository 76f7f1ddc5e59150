// Package rules holds what loans and requests are both judged by, each
// written once, as SQL where a statement judges: the circulation rules as
// stored (stored.go) and the loan policy they choose (PolicyMatchSQL); a
// patron's standing: active, manual blocks in force, automated blocks;
// and the loans counted against a patron's limits (limit.go). Package
// lending judges check-outs and renewals with them, package requests the
// requests placed.
package rules

import (
	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/schemas"

	storage "github.com/checkoutlock/circulation-storage"
)

// PolicyMatchSQL is the circulation rules' choice of loan policy, the one
// place it is written: validation, the check-out's write and the
// loan-policy route all choose with it. Of the rules whose every named
// criterion equals the check-out's, the one naming the most criteria wins;
// a tie goes to the rule naming the loan type, then the material type,
// then the patron group (FOLIO's priority: the weights 14, 12 and 11); a
// remaining tie to the earlier rule. When no rule matches, the fallback
// policy applies. rule and rules are the tables; tenant, group, material
// and loanType the SQL expressions (text; uuid, NULL matching no rule that
// names one). It answers one row (loan_policy_id, rule_index NULL for the
// fallback, pg_match, mt_match, lt_match), or none when no rules are set.
func PolicyMatchSQL(rule, rules, tenant, group, material, loanType string) string {
	return `
SELECT m.loan_policy_id, m.rule_index, m.pg_match, m.mt_match, m.lt_match
  FROM (SELECT r.loan_policy_id, r.position AS rule_index,
               r.patron_group_id IS NOT NULL AS pg_match, r.material_type_id IS NOT NULL AS mt_match,
               r.loan_type_id IS NOT NULL AS lt_match,
               CASE WHEN r.patron_group_id IS NULL THEN 0 ELSE 11 END + CASE WHEN r.material_type_id IS NULL THEN 0 ELSE 12 END
             + CASE WHEN r.loan_type_id IS NULL THEN 0 ELSE 14 END AS rank
          FROM ` + rule + ` r
         WHERE r.tenant_id = ` + tenant + `
           AND (r.patron_group_id IS NULL OR r.patron_group_id = ` + group + `)
           AND (r.material_type_id IS NULL OR r.material_type_id = ` + material + `)
           AND (r.loan_type_id IS NULL OR r.loan_type_id = ` + loanType + `)
        UNION ALL
        SELECT fallback_loan_policy_id, NULL, false, false, false, -1 FROM ` + rules + ` WHERE tenant_id = ` + tenant + `) m
 WHERE EXISTS (SELECT 1 FROM ` + rules + ` WHERE tenant_id = ` + tenant + `)
 ORDER BY m.rank DESC, m.rule_index
 LIMIT 1`
}

// ChosenSQL is the id of the policy the circulation rules choose for a
// patron of the group, an item of the material and loan types (SQL
// expressions) in tenant, beside the loan policy: column
// (overdue_fine_policy_id, lost_item_policy_id or notice_policy_id) of
// the rule that chooses the loan policy, else the rules' fallback.
func ChosenSQL(column, tenant, group, material, loanType string) string {
	return `SELECT coalesce(r.` + column + `, rs.fallback_` + column + `)
      FROM (` + PolicyMatchSQL(postgres.Table(postgres.TableCirculationRule), postgres.Table(postgres.TableCirculationRules), tenant,
		group, material, loanType) + `) m
      LEFT JOIN ` + postgres.Table(postgres.TableRulesFee) + ` rs ON rs.tenant_id = ` + tenant + `
      LEFT JOIN ` + postgres.Table(postgres.TableRuleFee) + ` r ON r.tenant_id = ` + tenant + ` AND r.position = m.rule_index`
}

// AutomatedBlocksSQL is the patron's automated blocks, computed as
// mod-patron-blocks computes them (ActionBlocks.byLimit) from this
// service's own records, for the conditions it can compute honestly: the
// patron group's limit of each, against the patron's open loans (items
// Claimed returned never count): maximum items charged out blocks borrowing
// at the limit and renewals and requests above it; maximum lost items
// (Declared lost, Aged to lost) and maximum overdue items (due before now:
// FOLIO's grace periods and closed days are not known here) block above
// it. A condition blocks an action only when it says so. It is a jsonb
// array of automated-patron-block.json, NULL when no condition blocks
// anything; the message is the condition's, its name when that is empty.
// tenant, user and group are SQL expressions.
func AutomatedBlocksSQL(tenant, user, group string) string {
	// Items charged out block borrowing at the limit (reached, as
	// the check-out's write compares), everything else above it.
	over := func(atTheLimit bool) string {
		charged := "s.open > pl.value"
		if atTheLimit {
			charged = Reached("s.open", "pl.value")
		}
		return `CASE c.id WHEN '` + storage.ConditionItemsChargedOut + `' THEN ` + charged + `
                          WHEN '` + storage.ConditionLostItems + `' THEN s.lost > pl.value
                          WHEN '` + schemas.ConditionFeeFineBalance + `' THEN s.balance > pl.value ELSE s.overdue > pl.value END`
	}
	return `(SELECT jsonb_agg(jsonb_build_object('patronBlockConditionId', b.id, 'blockBorrowing', b.borrowing,
            'blockRenewals', b.renewals, 'blockRequests', b.requests, 'message', b.message) ORDER BY b.id)
   FROM (SELECT c.id::text AS id, coalesce(nullif(c.jsonb ->> 'message', ''), c.jsonb ->> 'name') AS message,
                c.jsonb ->> 'blockBorrowing' = 'true' AND ` + over(true) + ` AS borrowing,
                c.jsonb ->> 'blockRenewals' = 'true' AND ` + over(false) + ` AS renewals,
                c.jsonb ->> 'blockRequests' = 'true' AND ` + over(false) + ` AS requests
           FROM ` + postgres.Table(postgres.TableBlockLimit) + ` pl
           JOIN ` + postgres.Table(postgres.TableBlockCondition) + ` c ON c.tenant_id = pl.tenant_id AND c.id = pl.condition_id
          CROSS JOIN LATERAL (
                SELECT count(*) AS open,
                       count(*) FILTER (WHERE i.status_name IN (` + postgres.Lits(schemas.ItemStatusesLost...) + `)) AS lost,
                       count(*) FILTER (WHERE ` + postgres.StoredTime("l.jsonb ->> 'dueDate'", "loan dueDate") + ` < now()) AS overdue
                  FROM ` + postgres.Table(postgres.TableLoan) + ` l JOIN ` + postgres.Table(postgres.TableItem) + ` i ON i.tenant_id = l.tenant_id AND i.id = l.item_id
                 WHERE l.user_id = ` + user + ` AND l.tenant_id = ` + tenant + ` AND ` + CountedLoan("l", "i") + `) s0
          CROSS JOIN LATERAL (` + BalanceSQL(tenant, user) + `) AS fb (balance)
          CROSS JOIN LATERAL (SELECT s0.open, s0.lost, s0.overdue, fb.balance) s
          WHERE pl.tenant_id = ` + tenant + ` AND pl.patron_group_id = ` + group + `
            AND pl.condition_id IN ('` + storage.ConditionItemsChargedOut + `', '` + storage.ConditionLostItems + `', '` +
		storage.ConditionOverdueItems + `', '` + schemas.ConditionFeeFineBalance + `')) b
  WHERE b.borrowing OR b.renewals OR b.requests)`
}

// BalanceSQL is a patron's outstanding fee/fine balance (one row, one
// column): what remains of their open fees/fines, 0 with none. tenant
// and user are SQL expressions. The check-out's write, the summaries and
// the block all read it here.
func BalanceSQL(tenant, user string) string {
	return `SELECT round(coalesce(sum(f.remaining), 0), 2) FROM ` + postgres.Table(postgres.TableFeeFineAccount) + ` f
          WHERE f.user_id = ` + user + ` AND f.tenant_id = ` + tenant + ` AND f.status = ` + postgres.Lit(schemas.FeeFineOpen)
}

// PatronActiveSQL is SQL saying whether the patron row p may borrow,
// renew and request: active and not expired (FOLIO's User.isActive, as
// circulation's Patron.ActiveAt reads it); one whose expiry cannot be
// read does not expire.
func PatronActiveSQL(p string) string {
	return `(coalesce((` + p + `.jsonb ->> 'active')::boolean, false)
           AND coalesce(` + postgres.StoredTime(p+".jsonb ->> 'expirationDate'", "patron expirationDate") + ` > now(), true))`
}

// ManuallyBlockedSQL is SQL saying whether a manual block in force stops
// the patron (user, an SQL expression) from action: "borrowing",
// "renewals" or "requests" (the block's flags).
func ManuallyBlockedSQL(user, action string) string {
	return `EXISTS (SELECT 1 FROM ` + postgres.Table(postgres.TableManualBlock) + ` b
                WHERE b.tenant_id = @tenant AND b.user_id = ` + user + `
                  AND b.jsonb ->> '` + action + `' = 'true' AND ` + BlockInForce("b") + `)`
}

// BlockInForce is SQL saying whether the manual block b has not expired:
// one whose expiry cannot be read (stored_time) is in force until removed.
func BlockInForce(b string) string {
	return `(` + b + `.jsonb ->> 'expirationDate' IS NULL OR coalesce(` +
		postgres.StoredTime(b+".jsonb ->> 'expirationDate'", "manual block expirationDate") + ` > now(), true))`
}
