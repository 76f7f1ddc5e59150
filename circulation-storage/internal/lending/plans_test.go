package lending

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/checkoutlock/circulation-storage/internal/dbtest"
	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/circulation-storage/internal/sample"
	"github.com/checkoutlock/circulation-storage/internal/tenants"
	"github.com/checkoutlock/circulation-storage/locksql"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/circulation-storage/internal/pgtest"
	"github.com/checkoutlock/schemas/errs"
)

// busyTenant is a database of its own holding one tenant with the sample
// library whose statistics were taken while it was small (as on a fresh
// install, or where autovacuum is off or behind), and then, in bulk, n
// open loans of n/10 patrons, an open request on each of n/10 of the
// items lent, and a manual block for every patron but p1. Item i0 is
// available, patron p1 has ten open loans.
func busyTenant(t *testing.T, n int) (*postgres.DB, storage.Tenant) {
	t.Helper()
	db, tenant := sampleDatabase(t, 2)
	ctx := context.Background()
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := db.Pool.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	patrons := max(n/10, 1)
	exec(postgres.WithTables(`INSERT INTO %s (tenant_id, id, jsonb)
SELECT $1, md5('p' || g)::uuid, jsonb_build_object('id', md5('p' || g)::uuid, 'barcode', 'p' || g, 'active', true, 'patronGroup', $2::text)
  FROM generate_series(1, $3::int) g`, postgres.TablePatron), string(tenant), sample.GroupUndergrad, patrons)
	exec(postgres.WithTables(`INSERT INTO %s (tenant_id, id, jsonb)
SELECT @tenant, md5('i' || g)::uuid, jsonb_build_object('id', md5('i' || g)::uuid, 'barcode', 'i' || g, '_version', 1,
       'status', jsonb_build_object('name', CASE WHEN g = 0 THEN 'Available' ELSE 'Checked out' END),
       'materialTypeId', @material_type::text, 'permanentLoanTypeId', @loan_type::text)
  FROM generate_series(0, @n::int) g`, postgres.TableItem), pgx.StrictNamedArgs{"tenant": string(tenant), "material_type": sample.MaterialBook,
		"loan_type": sample.LoanTypeCanCirculate, "n": n})
	loans := func(from, to int) {
		exec(postgres.WithTables(`INSERT INTO %s (tenant_id, id, jsonb)
SELECT @tenant, gen_random_uuid(), jsonb_build_object('userId', md5('p' || (g %% @patrons::int + 1))::uuid,
       'itemId', md5('i' || g)::uuid, 'loanPolicyId', @policy::text,
       'status', jsonb_build_object('name', 'Open'), 'loanDate', '2026-01-01T10:00:00.000Z', 'action', 'checkedout')
  FROM generate_series(@from::int, @to::int) g`, postgres.TableLoan),
			pgx.StrictNamedArgs{"tenant": string(tenant), "policy": sample.PolicyStandard, "patrons": patrons, "from": from, "to": to})
	}
	// The statistics are taken while the tenant has a few loans and no
	// request.
	// Other tenants, quiet: a loan each (their records are not checked
	// against their parents here, whose rows they lack).
	exec("SET session_replication_role = replica")
	exec(postgres.WithTables(`INSERT INTO %s (tenant_id, id, jsonb)
SELECT 'quiet' || g, md5('q' || g)::uuid, jsonb_build_object('userId', md5('q' || g)::uuid, 'itemId', md5('q' || g)::uuid,
       'status', jsonb_build_object('name', 'Open'), 'loanDate', '2026-01-01T10:00:00.000Z', 'action', 'checkedout', '_version', 1)
  FROM generate_series(1, 500) g`, postgres.TableLoan))
	exec(postgres.WithTables(`INSERT INTO %s (tenant_id, id, jsonb)
SELECT 'quiet' || g, gen_random_uuid(), jsonb_build_object('itemId', md5('q' || g)::uuid, 'requesterId', md5('q' || g)::uuid,
       'requestType', 'Hold', 'requestDate', '2026-01-01T10:00:00.000Z', 'status', 'Open - Not yet filled', 'position', 1, '_version', 1)
  FROM generate_series(1, 500) g`, postgres.TableRequest))
	exec("SET session_replication_role = DEFAULT")
	exec("ANALYZE")
	loans(1, n)
	exec(postgres.WithTables(`INSERT INTO %s (tenant_id, id, jsonb)
SELECT $1, gen_random_uuid(), jsonb_build_object('itemId', md5('i' || (g * 10))::uuid, 'requesterId', md5('p' || (g %% $2::int + 1))::uuid,
       'requestType', 'Hold', 'requestDate', '2026-01-01T10:00:00.000Z', 'status', 'Open - Not yet filled', 'position', 1, '_version', 1)
  FROM generate_series(1, $3::int) g`, postgres.TableRequest), string(tenant), patrons, n/10)
	exec(postgres.WithTables(`INSERT INTO %s (tenant_id, id, jsonb)
SELECT $1, gen_random_uuid(), jsonb_build_object('userId', md5('p' || g)::uuid, 'type', 'Manual', 'desc', 'bulk', 'borrowing', true)
  FROM generate_series(2, $2::int) g`, postgres.TableManualBlock), string(tenant), patrons)
	return db, tenant
}

// sampleDatabase is a database of the test's own, reached through conns
// connections, with one tenant holding the sample library: for a test that
// looks at the whole database (its statistics, the server's MultiXacts).
func sampleDatabase(t *testing.T, conns int32) (*postgres.DB, storage.Tenant) {
	t.Helper()
	db := dbtest.OpenFresh(t, postgres.PoolConfig{MaxConns: conns, LockCommit: "off"})
	tenant := storage.Tenant(pgtest.TenantID())
	if _, err := tenants.NewTenants(db, dbtest.Discard, sample.LoadData).Init(context.Background(), tenant, storage.TenantAttributes{ModuleTo: "m",
		Parameters: []errs.Parameter{{Key: "loadSample", Value: "true"}}}); err != nil {
		t.Fatal(err)
	}
	return db, tenant
}

// explainGeneric runs a statement of the service (positional arguments)
// as its prepared statement's generic plan does (the plan a connection
// keeps once made), under EXPLAIN ANALYZE, in a transaction rolled back
// after: the shared buffers it touched, and the plan.
func explainGeneric(t *testing.T, db *postgres.DB, sql string, args []any) (int, map[string]any) {
	t.Helper()
	ctx := context.Background()
	conn, err := db.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SET LOCAL plan_cache_mode = force_generic_plan"); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Conn().Prepare(ctx, "explained", sql); err != nil {
		t.Fatalf("prepare: %v", err)
	}
	defer tx.Conn().Deallocate(ctx, "explained")
	// EXECUTE takes its arguments as literals: a utility statement has no
	// parameters of its own.
	literals := make([]string, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case nil:
			literals[i] = "NULL"
		case json.RawMessage:
			literals[i] = quoteLiteral(string(v))
		case *string:
			literals[i] = "NULL"
			if v != nil {
				literals[i] = quoteLiteral(*v)
			}
		case *int64:
			literals[i] = "NULL"
			if v != nil {
				literals[i] = fmt.Sprint(*v)
			}
		case []string:
			elems := make([]string, len(v))
			for j, e := range v {
				elems[j] = `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(e) + `"`
			}
			literals[i] = quoteLiteral("{" + strings.Join(elems, ",") + "}")
		default:
			literals[i] = quoteLiteral(fmt.Sprint(v))
		}
	}
	var raw []byte
	if err := tx.QueryRow(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE explained("+strings.Join(literals, ", ")+")").Scan(&raw); err != nil {
		t.Fatalf("explain: %v", err)
	}
	var plans []struct {
		Plan map[string]any `json:"Plan"`
	}
	if err := json.Unmarshal(raw, &plans); err != nil {
		t.Fatal(err)
	}
	hit, _ := plans[0].Plan["Shared Hit Blocks"].(float64)
	read, _ := plans[0].Plan["Shared Read Blocks"].(float64)
	return int(hit + read), plans[0].Plan
}

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// tenantOnly is an index condition on the tenant alone: a scan that
// reads every row of the tenant the index holds.
var tenantOnly = regexp.MustCompile(`^\(*tenant_id = \$\d+\)*$`)

// tenantWideScans are the plan's scans that read a whole tenant's rows of
// a table that grows with the library: an index scan matching the tenant
// alone, or a sequential scan.
func tenantWideScans(plan map[string]any) []string {
	var out []string
	grows := map[string]bool{"loan": true, "item": true, "request": true, "patron": true, "manual_block": true}
	var walk func(p map[string]any)
	walk = func(p map[string]any) {
		rel, _ := p["Relation Name"].(string)
		cond, _ := p["Index Cond"].(string)
		node, _ := p["Node Type"].(string)
		if grows[rel] && (node == "Seq Scan" || strings.Contains(node, "Index") && (cond == "" || tenantOnly.MatchString(cond))) {
			out = append(out, fmt.Sprintf("%s on %s (%v, condition %q, filter %q)", node, rel, p["Index Name"], cond, p["Filter"]))
		}
		children, _ := p["Plans"].([]any)
		for _, c := range children {
			walk(c.(map[string]any))
		}
	}
	walk(plan)
	return out
}

// TestCheckOutPlansReadOnlyWhatTheyNeed: every statement of a check-out
// (validation's read, by barcodes or by ids, the patron's row, the write)
// and the patron summary a
// kiosk shows reads, in the plan a
// connection keeps for it, through indexes that match the record it looks
// for, never a whole tenant's rows, however stale the statistics: on a
// tenant whose statistics were taken while it had ten loans and no
// request, and which then has 20,000 open loans, 2,000 requests and 2,000
// manual blocks, no scan matches the tenant alone, and each statement
// touches a few dozen buffers, as on a small tenant (the write touched
// 2,058 with the tenant-led keys before migration 13).
//
// Like every test here with a database of its own, it runs before the
// parallel ones, so that the connections of all those databases at once do
// not exhaust the server's.
func TestCheckOutPlansReadOnlyWhatTheyNeed(t *testing.T) {
	db, tenant := busyTenant(t, 20000)
	ctx := context.Background()
	var user, item string
	if err := db.Pool.QueryRow(ctx, "SELECT md5('p1')::uuid::text, md5('i0')::uuid::text").Scan(&user, &item); err != nil {
		t.Fatal(err)
	}
	write, lean := writeArgs(t, db, tenant, user, item)
	read, leanRead := readArgs(t, tenant, "p1", "i0")
	byID, leanByID := readByIDArgs(t, tenant, user, item)
	// Without the tenant's gate row, the lean statements do their work
	// instead of finding the row and stopping (gate.go).
	dropGateRow(t, db, tenant)
	statements := []struct {
		name string
		sql  string
		args []any
	}{
		{"validation's read", checkOutReadSQL.SQL, read},
		{"the patron's row", postgres.PatronRowSQL, []any{user, string(tenant)}},
		{"the write", checkOutWrite.SQL, write},
		{"validation's lean read", checkOutReadLeanSQL.SQL, leanRead},
		{"validation's read by ids", checkOutReadByIDSQL.SQL, byID},
		{"validation's lean read by ids", checkOutReadByIDLeanSQL.SQL, leanByID},
		{"the lean write", checkOutWriteLean.SQL, lean},
		{"the patron summary", patronSummarySQL, []any{"p1", true, string(tenant)}},
	}
	for _, s := range statements {
		buffers, plan := explainGeneric(t, db, s.sql, s.args)
		t.Logf("%s: %d buffers", s.name, buffers)
		for _, scan := range tenantWideScans(plan) {
			t.Errorf("%s reads a whole tenant's rows: %s", s.name, scan)
		}
		if buffers > 300 {
			t.Errorf("%s touched %d buffers", s.name, buffers)
		}
	}
}

// readArgs are the positional arguments of validation's read of item (by
// barcode) for user (by barcode), in full and lean.
func readArgs(t *testing.T, tenant storage.Tenant, user, item string) (full, lean []any) {
	t.Helper()
	return bothArgs(t, checkOutReadSQL, checkOutReadLeanSQL,
		pgx.StrictNamedArgs{"user_barcode": user, "item_barcode": item, "enforce_unscoped": true, "tenant": string(tenant)})
}

// readByIDArgs are readArgs of validation's read by ids.
func readByIDArgs(t *testing.T, tenant storage.Tenant, user, item string) (full, lean []any) {
	t.Helper()
	return bothArgs(t, checkOutReadByIDSQL, checkOutReadByIDLeanSQL,
		pgx.StrictNamedArgs{"user_id": user, "item_id": item, "enforce_unscoped": true, "tenant": string(tenant)})
}

// bothArgs are the positional arguments of a statement in full and lean.
func bothArgs(t *testing.T, full, lean locksql.Named, args pgx.StrictNamedArgs) (fullArgs, leanArgs []any) {
	t.Helper()
	fullArgs, err := full.Args(args)
	if err != nil {
		t.Fatal(err)
	}
	if leanArgs, err = lean.Args(args); err != nil {
		t.Fatal(err)
	}
	return fullArgs, leanArgs
}

// writeArgs are the positional arguments of the check-out's write of item
// to user, at version 1, in full and lean.
func writeArgs(t *testing.T, db *postgres.DB, tenant storage.Tenant, user, item string) (full, lean []any) {
	t.Helper()
	args := newLibrary(db, testPolicy).checkOutArgs(context.Background(), tenant, storage.CheckOutWrite{LoanID: uuid.NewString(),
		UserID: user, Loan: loanDoc(user, item), ItemVersion: 1})
	full, err := checkOutWrite.Args(args)
	if err != nil {
		t.Fatal(err)
	}
	lean, err = checkOutWriteLean.Args(args)
	if err != nil {
		t.Fatal(err)
	}
	return full, lean
}

// TestACheckOutsStatementsRunByTheirGenericPlans: validation's read and
// the check-out's write run by their generic plans (postgres.GenericPlans),
// the plans TestCheckOutPlansReadOnlyWhatTheyNeed explains, from their
// first run on a connection: never by a plan made for one call's values,
// of which PostgreSQL would otherwise make five first; and the setting
// stays in their transactions.
func TestACheckOutsStatementsRunByTheirGenericPlans(t *testing.T) {
	t.Parallel()
	db, tenant := sampleDatabase(t, 1) // one connection: the one asked after
	ctx := context.Background()
	rules, lib := NewRules(db, testPolicy), newLibrary(db, testPolicy)
	const runs = 7
	for range runs {
		if _, err := rules.ReadForCheckOut(ctx, tenant, "book-140", "1004"); err != nil {
			t.Fatal(err)
		}
		// An item of no one's: the write runs, and is refused.
		if _, err := lib.CreateCheckOutLoan(ctx, tenant, acquiringWrite(uuid.NewString(), sample.ID("1004"), uuid.NewString())); !errs.IsKind(err, errs.KindInvalid) {
			t.Fatalf("a write of an item of no one's: %v, want it refused", err)
		}
	}
	statements := map[string]string{checkOutReadSQL.SQL: "validation's read", checkOutReadLeanSQL.SQL: "validation's read",
		checkOutWrite.SQL: "the write", checkOutWriteLean.SQL: "the write"}
	rows, err := db.Pool.Query(ctx, `SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements`)
	if err != nil {
		t.Fatal(err)
	}
	generic := map[string]int64{}
	for rows.Next() {
		var sql string
		var g, c int64
		if err := rows.Scan(&sql, &g, &c); err != nil {
			t.Fatal(err)
		}
		name, ok := statements[sql]
		if !ok {
			continue
		}
		generic[name] += g
		if c != 0 {
			t.Errorf("%s ran %d times by a plan made for its values", name, c)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	// The setting ends with each transaction: the connection's other
	// statements are planned as PostgreSQL chooses.
	var mode string
	if err := db.Pool.QueryRow(ctx, `SELECT current_setting('plan_cache_mode')`).Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if mode != "auto" {
		t.Errorf("plan_cache_mode on the connection after the check-outs: %s, want auto", mode)
	}
	for _, name := range []string{"validation's read", "the write"} {
		// (The first read is lean, meets the sample's gate row, and
		// runs again in full.)
		if generic[name] < runs {
			t.Errorf("%s ran %d times by its generic plan on the connection, want %d or more", name, generic[name], runs)
		}
	}
}

// TestTheFunctionsACheckOutCallsKeepTheirPlans: no function a check-out's
// write calls, in its statement or from the triggers of the rows it
// writes, is one PostgreSQL parses and plans at every call: a SQL function
// with a SET clause, which it neither inlines nor keeps a plan of
// (migration 38 made the two the write called so PL/pgSQL). The session
// counts its functions' calls (track_functions); the write must have
// called the due date's function and the loans' notice trigger, so that
// the test sees the path it is about.
func TestTheFunctionsACheckOutCallsKeepTheirPlans(t *testing.T) {
	t.Parallel()
	db, tenant := sampleDatabase(t, 1) // one connection: the one the write runs on
	ctx := context.Background()
	if _, err := db.Pool.Exec(ctx, "SET track_functions = 'all'"); err != nil {
		t.Fatal(err)
	}
	user, item := sample.ID("1004"), sample.ID("book-021")
	if _, err := newLibrary(db, testPolicy).CreateCheckOutLoan(ctx, tenant, acquiringWrite(uuid.NewString(), user, item)); err != nil {
		t.Fatalf("check out %s to %s: %v", item, user, err)
	}
	// The session's counts reach the server's view when it next reports
	// them, forced at the end of this statement.
	if _, err := db.Pool.Exec(ctx, "SELECT pg_stat_force_next_flush()"); err != nil {
		t.Fatal(err)
	}
	type called struct {
		language string
		set      bool
	}
	var functions map[string]called
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for deadline := time.Now().Add(10 * time.Second); ; <-tick.C {
		rows, err := db.Pool.Query(ctx, `SELECT p.proname, l.lanname, p.proconfig IS NOT NULL
			FROM pg_stat_user_functions f JOIN pg_proc p ON p.oid = f.funcid JOIN pg_language l ON l.oid = p.prolang
			WHERE f.calls > 0`)
		if err != nil {
			t.Fatal(err)
		}
		functions = map[string]called{}
		for rows.Next() {
			var name string
			var c called
			if err := rows.Scan(&name, &c.language, &c.set); err != nil {
				t.Fatal(err)
			}
			functions[name] = c
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if _, ok := functions[string(funcLoanDueDate)]; ok || time.Now().After(deadline) {
			break
		}
	}
	for _, name := range []string{string(funcLoanDueDate), "notice_change_record"} {
		if _, ok := functions[name]; !ok {
			t.Errorf("the check-out's write did not call %s (called: %v)", name, functions)
		}
	}
	for name, c := range functions {
		if c.language == "sql" && c.set {
			t.Errorf("the check-out's write calls %s, a SQL function with a SET clause: PostgreSQL plans it at every call", name)
		}
	}
}

// TestNoFunctionIsPlannedAtEveryCall: no function of the storage schema
// is a SQL function with a SET clause, which PostgreSQL 15 neither inlines
// nor keeps a plan of, and so parses and plans at every call: each is
// PL/pgSQL, whose plans a session keeps (migration 38), or a SQL function
// PostgreSQL may inline.
func TestNoFunctionIsPlannedAtEveryCall(t *testing.T) {
	t.Parallel()
	// A database of its own, made by this tree's migrations (the shared
	// test database may have been made by another's).
	db, _ := sampleDatabase(t, 1)
	rows, err := db.Pool.Query(context.Background(), `SELECT p.proname FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
		WHERE p.pronamespace = $1::regnamespace AND l.lanname = 'sql' AND p.proconfig IS NOT NULL ORDER BY 1`, postgres.SharedSchema)
	if err != nil {
		t.Fatal(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(names) > 0 {
		t.Errorf("SQL functions with a SET clause, planned at every call: %v", names)
	}
}

// BenchmarkADueDateOnACalendar is loan_due_date, as a check-out's write
// and a renewal's ask it, on the sample library's calendar (open 09:00 to
// 21:00 every day, closed on its stocktaking day), one call a statement on
// one connection: a day's loan due on the stocktaking day moved to the
// end of the next open day, and an hour's loan due after closing moved to
// the end of the hours open now (go test -run X -bench ADueDateOnACalendar
// ./internal/lending, from circulation-storage, BENCHMARKS.md §14).
func BenchmarkADueDateOnACalendar(b *testing.B) {
	f := dbtest.SetupLibrary(b, sample.LoadData)
	ctx := context.Background()
	conn, err := f.DB.Pool.Acquire(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Release()
	now := time.Now().UTC()
	stocktaking := sample.StocktakingDay(now)
	for _, c := range []struct {
		name, strategy, interval string
		due                      time.Time
	}{
		{"next open day", "MOVE_TO_THE_END_OF_THE_NEXT_OPEN_DAY", "Days",
			time.Date(stocktaking.Year(), stocktaking.Month(), stocktaking.Day(), 12, 0, 0, 0, time.UTC)},
		{"end of the hours", "MOVE_TO_END_OF_CURRENT_SERVICE_POINT_HOURS", "Hours",
			time.Date(now.Year(), now.Month(), now.Day(), 22, 30, 0, 0, time.UTC).AddDate(0, 0, 1)},
	} {
		policy := fmt.Sprintf(`{"loansPolicy":{"period":{"duration":1,"intervalId":%q},"closedLibraryDueDateManagementId":%q}}`, c.interval, c.strategy)
		b.Run(c.name, func(b *testing.B) {
			var moved time.Time
			for b.Loop() {
				if err := conn.QueryRow(ctx, `SELECT `+postgres.Table(funcLoanDueDate)+`(@tenant, @sp, @due, @policy, @now)`,
					pgx.StrictNamedArgs{"tenant": string(f.Tenant), "sp": sample.ServicePointDesk1, "due": c.due, "policy": policy, "now": now}).Scan(&moved); err != nil {
					b.Fatal(err)
				}
			}
			if moved.Equal(c.due) {
				b.Fatalf("due %s not moved by the calendar", c.due)
			}
		})
	}
}
