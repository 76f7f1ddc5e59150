package harness

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// Invariants are what must hold in the database after any workload, faults
// included. Check reads them straight from the tenant's tables.
type Invariants struct {
	// ItemLimit, when positive, bounds every patron's open loans.
	ItemLimit int
	// Created are the loan ids of every 201 the workload saw.
	Created []string
	// Closed are the loan ids checked in since (they must be closed).
	Closed []string
	// Unknown are the loan ids that 503 answers named (loanId) as written
	// or not, not known: each may be stored or not.
	Unknown []string
}

// Violations returns every invariant that does not hold, in words.
func (c *Cluster) Violations(inv Invariants) []string {
	c.t.Helper()
	ctx := context.Background()
	var out []string
	q := func(sql string, args ...any) []string {
		c.t.Helper()
		sql = strings.ReplaceAll(sql, "$schema", pgx.Identifier{c.Schema}.Sanitize())
		rows, err := c.DB.Query(ctx, sql, args...)
		if err != nil {
			c.t.Fatalf("invariant query: %v\n%s", err, sql)
		}
		found, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			c.t.Fatalf("invariant query: %v", err)
		}
		return found
	}
	if inv.ItemLimit > 0 {
		for _, v := range q(`SELECT user_id::text || ' has ' || count(*) || ' open loans' FROM $schema.loan
			WHERE status_name = 'Open' GROUP BY user_id HAVING count(*) > $1`, inv.ItemLimit) {
			out = append(out, fmt.Sprintf("patron over the limit of %d: %s", inv.ItemLimit, v))
		}
	}
	for _, v := range q(`SELECT item_id::text FROM $schema.loan WHERE status_name = 'Open' GROUP BY item_id HAVING count(*) > 1`) {
		out = append(out, "item with two open loans: "+v)
	}
	// An item's violation shows the item and every loan of it, as stored.
	const history = ` || E'\n      item ' || i.jsonb::text || coalesce((SELECT string_agg(E'\n      loan ' || l.jsonb::text, '' ORDER BY l.jsonb->>'loanDate')
		FROM $schema.loan l WHERE l.item_id = i.id), '')`
	for _, v := range q(`SELECT i.barcode` + history + ` FROM $schema.item i WHERE i.status_name = 'Checked out'
		AND NOT EXISTS (SELECT 1 FROM $schema.loan l WHERE l.item_id = i.id AND l.status_name = 'Open')`) {
		out = append(out, "item Checked out without an open loan: "+v)
	}
	for _, v := range q(`SELECT i.barcode || ' is ' || i.status_name` + history + ` FROM $schema.item i WHERE i.status_name <> 'Checked out'
		AND EXISTS (SELECT 1 FROM $schema.loan l WHERE l.item_id = i.id AND l.status_name = 'Open')`) {
		out = append(out, "item with an open loan but not Checked out: "+v)
	}
	// A request is filled by its requester's loan of its item, in the
	// same write: never one without the other.
	for _, v := range q(`SELECT r.id::text FROM $schema.request r WHERE r.status = 'Closed - Filled'
		AND NOT EXISTS (SELECT 1 FROM $schema.loan l WHERE l.item_id = r.item_id AND l.user_id = r.requester_id)`) {
		out = append(out, "request filled without its requester's loan: "+v)
	}
	for _, v := range q(`SELECT r.id::text FROM $schema.request r WHERE left(r.status, 5) = 'Open '
		AND r.position = (SELECT min(q.position) FROM $schema.request q WHERE q.item_id = r.item_id AND left(q.status, 5) = 'Open ')
		AND EXISTS (SELECT 1 FROM $schema.loan l WHERE l.item_id = r.item_id AND l.user_id = r.requester_id AND l.status_name = 'Open')`) {
		out = append(out, "first request of a queue still open while its requester holds the item: "+v)
	}
	for _, v := range q(`SELECT user_id::text FROM $schema.check_out_lock WHERE expires_at > now()`) {
		out = append(out, "live lock left behind for patron "+v)
	}
	if inv.Created != nil {
		closed := map[string]bool{}
		for _, id := range inv.Closed {
			closed[id] = true
		}
		stored := map[string]string{}
		rows, err := c.DB.Query(ctx, `SELECT id::text, status_name FROM `+pgx.Identifier{c.Schema, "loan"}.Sanitize())
		if err != nil {
			c.t.Fatal(err)
		}
		for rows.Next() {
			var id, status string
			if err := rows.Scan(&id, &status); err != nil {
				c.t.Fatal(err)
			}
			stored[id] = status
		}
		seen := map[string]bool{}
		for _, id := range inv.Created {
			if seen[id] {
				out = append(out, "two 201 answers named loan "+id)
			}
			seen[id] = true
			status, ok := stored[id]
			switch {
			case !ok:
				out = append(out, "a 201 answer's loan is not stored: "+id)
			case closed[id] && status != "Closed":
				out = append(out, "checked-in loan still open: "+id)
			case !closed[id] && status != "Open":
				out = append(out, "loan closed without a check-in: "+id)
			}
		}
		unknown := map[string]bool{}
		for _, id := range inv.Unknown {
			unknown[id] = true
		}
		for id := range stored {
			if !seen[id] && !unknown[id] {
				out = append(out, "loan stored without a 201 answer, or one that said its outcome was not known: "+id)
			}
		}
	}
	return out
}

// CheckInvariants fails the test on any violation, listing them all.
func (c *Cluster) CheckInvariants(t testing.TB, inv Invariants) {
	t.Helper()
	if v := c.Violations(inv); len(v) > 0 {
		t.Fatalf("%d invariant violations:\n  %s", len(v), strings.Join(v, "\n  "))
	}
}

// OpenLoans counts a patron's open loans by barcode.
func (c *Cluster) OpenLoans(t testing.TB, userBarcode string) int {
	t.Helper()
	var n int
	err := c.DB.QueryRow(context.Background(), `SELECT count(*) FROM `+pgx.Identifier{c.Schema, "loan"}.Sanitize()+` l
		JOIN `+pgx.Identifier{c.Schema, "patron"}.Sanitize()+` p ON p.id = l.user_id
		WHERE p.barcode = $1 AND l.status_name = 'Open'`, userBarcode).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// snapshotTables are every table of a tenant's schema that a request could
// change.
var snapshotTables = []string{"patron_group", "material_type", "loan_type", "patron", "item", "loan_policy", "loan",
	"circulation_rules", "circulation_rule", "setting", "setting_change", "check_out_lock", "check_out_lock_event", "tenant_job",
	"manual_block", "patron_block_condition", "patron_block_limit", "request", "service_point"}

// Snapshot is every row of the tenant's tables as JSON text, for "nothing
// changed".
func (c *Cluster) Snapshot(t testing.TB) string {
	t.Helper()
	var b strings.Builder
	for _, table := range snapshotTables {
		var rows string
		err := c.DB.QueryRow(context.Background(), `SELECT coalesce(json_agg(t ORDER BY t::text)::text, '[]') FROM `+
			pgx.Identifier{c.Schema, table}.Sanitize()+` t`).Scan(&rows)
		if err != nil {
			t.Fatalf("snapshot %s: %v", table, err)
		}
		b.WriteString(table + ": " + rows + "\n")
	}
	return b.String()
}
