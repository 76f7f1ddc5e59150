package lending

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/checkoutlock/circulation-storage/internal/dbtest"
	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/circulation-storage/internal/sample"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/circulation-storage/internal/pgtest"
	"github.com/checkoutlock/schemas"
)

// setupLeanLibrary is the sample library without its manual block and its
// request, and so without a gate row (migration 18): a tenant whose
// check-outs storage reads and writes with its lean statements.
func setupLeanLibrary(t *testing.T) dbtest.Fixture {
	t.Helper()
	return lean(t, dbtest.SetupLibrary(t, sample.LoadData))
}

// lean takes f's manual blocks, block limits, requests and gate row away.
func lean(t *testing.T, f dbtest.Fixture) dbtest.Fixture {
	t.Helper()
	for _, name := range []postgres.TableName{postgres.TableManualBlock, postgres.TableRequest, postgres.TableBlockLimit} {
		f.Exec(t, "DELETE FROM "+dbtest.View(f.Tenant, name))
	}
	dropGateRow(t, f.DB, f.Tenant)
	if f.DB.Gates.Has(f.Tenant) {
		t.Fatalf("tenant %s is known to have a gate row before any check-out", f.Tenant)
	}
	return f
}

// dropGateRow deletes the tenant's gate row (a table of storage's own,
// with no view in the tenant's schema).
func dropGateRow(t *testing.T, db *postgres.DB, tenant storage.Tenant) {
	t.Helper()
	if _, err := db.Pool.Exec(context.Background(), "DELETE FROM "+postgres.Table(postgres.TableTenantGate)+" WHERE tenant_id = $1", string(tenant)); err != nil {
		t.Fatal(err)
	}
}

// gateRows is the number of gate rows of the fixture's tenant that q
// (the pool, or a transaction) sees.
func gateRows(t *testing.T, f dbtest.Fixture, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) int {
	t.Helper()
	var n int
	if err := q.QueryRow(context.Background(), "SELECT count(*) FROM "+postgres.Table(postgres.TableTenantGate)+" WHERE tenant_id = $1",
		string(f.Tenant)).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestTheFirstBlockLimitOrRequestWritesTheGateRow: a tenant without
// manual blocks, block limits and requests has no gate row; the write of
// its first of any of the three writes one, in its own transaction (a
// transaction rolled back leaves none), and later ones leave it as it
// is. In a database of its own, which has the migrations as they are
// (mutations.txt in migrations: gate-row-written).
func TestTheFirstBlockLimitOrRequestWritesTheGateRow(t *testing.T) {
	db, _ := sampleDatabase(t, 2)
	ctx := context.Background()
	first := map[string]func(f dbtest.Fixture, i int){
		"manual block": func(f dbtest.Fixture, _ int) {
			if _, err := newLibrary(f.DB, testPolicy).Create(ctx, f.Tenant, storage.ManualBlocks, uuid.NewString(), json.RawMessage(fmt.Sprintf(
				`{"userId":%q,"type":"Manual","desc":"Lost the library's laptop","borrowing":true}`, sample.ID("1004")))); err != nil {
				t.Fatal(err)
			}
		},
		"block limit": func(f dbtest.Fixture, i int) {
			blockOn(t, f, []string{storage.ConditionItemsChargedOut, storage.ConditionLostItems}[i], sample.GroupGraduate, 3, false, "At most three")
		},
		"request": func(f dbtest.Fixture, i int) {
			request(t, f, sample.ID("book-090"), []string{sample.ID("1002"), sample.ID("1004")}[i], i+1, "Open - Not yet filled")
		},
	}
	for name, write := range first {
		f := lean(t, dbtest.LibraryIn(t, db, sample.LoadData))
		if n := gateRows(t, f, f.DB.Pool); n != 0 {
			t.Fatalf("%s: %d gate rows before, want 0", name, n)
		}
		write(f, 0)
		if n := gateRows(t, f, f.DB.Pool); n != 1 {
			t.Errorf("after the first %s: %d gate rows, want 1", name, n)
		}
		write(f, 1)
		if n := gateRows(t, f, f.DB.Pool); n != 1 {
			t.Errorf("after a second %s: %d gate rows, want 1", name, n)
		}
	}
	// The row is the record's transaction's: there with the record, and
	// gone with it when that transaction is rolled back.
	f := lean(t, dbtest.LibraryIn(t, db, sample.LoadData))
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `INSERT INTO `+dbtest.View(f.Tenant, postgres.TableManualBlock)+` (id, jsonb)
	  VALUES (gen_random_uuid(), jsonb_build_object('userId', $1::text, 'borrowing', true))`, sample.ID("1004")); err != nil {
		t.Fatal(err)
	}
	if inside := gateRows(t, f, tx); inside != 1 {
		t.Errorf("%d gate rows in the block's transaction, want 1", inside)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if n := gateRows(t, f, f.DB.Pool); n != 0 {
		t.Errorf("%d gate rows after the block's transaction was rolled back, want 0", n)
	}
}

// TestALeanCheckOutMeetsTheGateWrittenMeanwhile: an instance that has
// read and written a tenant's check-outs with its lean statements, and so
// knows of no gate, meets one another instance writes meanwhile: a manual
// block is in its next validation, a request of another patron's refuses
// its next write of the item, and a limit of maximum items charged out its
// next write of the patron. Nothing is written by a refused write.
// (mutations.txt: lean-read-meets-the-gate, lean-write-meets-the-gate.)
func TestALeanCheckOutMeetsTheGateWrittenMeanwhile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// The instance under test: a database handle, and its knowledge of
	// gates, of its own.
	instance := func(f dbtest.Fixture) (*Rules, library) {
		db := dbtest.OpenDB(t, pgtest.Shared(t))
		return NewRules(db, testPolicy), newLibrary(db, testPolicy)
	}
	lend := func(lib library, f dbtest.Fixture, user, item string) error {
		_, err := lib.CreateCheckOutLoan(ctx, f.Tenant, storage.CheckOutWrite{LoanID: uuid.NewString(), UserID: user,
			Loan: loanDoc(user, item), ItemVersion: 1})
		return err
	}
	alice, bob := sample.ID("1001"), sample.ID("1002")

	t.Run("manual block", func(t *testing.T) {
		f := setupLeanLibrary(t)
		rules, _ := instance(f)
		before, err := rules.ReadForCheckOut(ctx, f.Tenant, "book-090", "1001")
		if err != nil || before.User == nil || before.ManualBlocks != nil {
			t.Fatalf("validation before the block: %v, blocks %s", err, before.ManualBlocks)
		}
		if _, err := newLibrary(f.DB, testPolicy).Create(ctx, f.Tenant, storage.ManualBlocks, uuid.NewString(), json.RawMessage(fmt.Sprintf(
			`{"userId":%q,"type":"Manual","desc":"Lost the library's laptop","borrowing":true}`, alice))); err != nil {
			t.Fatal(err)
		}
		after, err := rules.ReadForCheckOut(ctx, f.Tenant, "book-090", "1001")
		if err != nil {
			t.Fatal(err)
		}
		var blocks []map[string]any
		if err := json.Unmarshal(after.ManualBlocks, &blocks); err != nil || len(blocks) != 1 || blocks[0]["desc"] != "Lost the library's laptop" {
			t.Errorf("validation after the block: blocks %s (%v), want the one block", after.ManualBlocks, err)
		}
	})

	t.Run("request", func(t *testing.T) {
		f := setupLeanLibrary(t)
		_, lib := instance(f)
		if err := lend(lib, f, alice, sample.ID("book-091")); err != nil {
			t.Fatalf("a lean write: %v", err)
		}
		item := sample.ID("book-090")
		request(t, f, item, bob, 1, "Open - Not yet filled")
		if err := lend(lib, f, alice, item); !dbtest.IsCode(err, schemas.CodeItemRequestedByAnotherPatron) {
			t.Errorf("Alice's write of the item Bob requested meanwhile: %v, want %s", err, schemas.CodeItemRequestedByAnotherPatron)
		}
		if n := f.Count(t, postgres.TableLoan, "item_id = $1", item); n != 0 {
			t.Errorf("%d loans of the requested item, want 0", n)
		}
		if err := lend(lib, f, bob, item); err != nil {
			t.Errorf("Bob's write of the item he requested: %v", err)
		}
		if n := f.Count(t, postgres.TableRequest, "status = 'Closed - Filled'"); n != 1 {
			t.Errorf("%d requests filled by Bob's write, want 1", n)
		}
	})

	t.Run("maximum items charged out", func(t *testing.T) {
		f := setupLeanLibrary(t)
		_, lib := instance(f)
		user := uuid.NewString()
		if _, err := newLibrary(f.DB, testPolicy).Create(ctx, f.Tenant, storage.Patrons, user, json.RawMessage(fmt.Sprintf(
			`{"barcode":"charged","active":true,"patronGroup":%q,"personal":{"lastName":"Charged"}}`, sample.GroupGraduate))); err != nil {
			t.Fatal(err)
		}
		if err := lend(lib, f, user, sample.ID("book-091")); err != nil {
			t.Fatalf("a lean write: %v", err)
		}
		blockOn(t, f, storage.ConditionItemsChargedOut, sample.GroupGraduate, 1, false, "At most one")
		if err := lend(lib, f, user, sample.ID("book-092")); !dbtest.IsCode(err, schemas.CodeUserBlockedAutomatically) {
			t.Errorf("a write past the limit set meanwhile: %v, want %s", err, schemas.CodeUserBlockedAutomatically)
		}
		if n := f.Count(t, postgres.TableLoan, "user_id = $1", user); n != 1 {
			t.Errorf("%d loans of the patron, want 1", n)
		}
	})
}

// TestLeanStatementsLockNoGateTable: validation's read and the check-out's
// write, lean, lock none of the gate's tables or their indexes, which the
// full ones lock; and they lock fewer relations in all, each of which
// PostgreSQL locks whether the statement finds anything there or not.
// Each runs eight times on one connection, in a transaction of its own
// rolled back, on the sample library: as a connection runs it once it has
// settled on a plan (planning locks every index of every table named). The
// relations the last run locked are read from pg_locks before its rollback
// (go test -v logs how many).
func TestLeanStatementsLockNoGateTable(t *testing.T) {
	t.Parallel()
	f := dbtest.SetupLibrary(t, sample.LoadData)
	ctx := context.Background()
	write, leanWrite := writeArgs(t, f.DB, f.Tenant, sample.ID("1004"), sample.ID("book-140"))
	read, leanRead := readArgs(t, f.Tenant, "1004", "book-140")
	gateTables := []postgres.TableName{postgres.TableManualBlock, postgres.TableBlockLimit, postgres.TableBlockCondition, postgres.TableRequest}
	// locked is the relations of the shared schema the statement locked,
	// and those of them that are gate tables or their indexes.
	locked := func(sql string, args []any) (all, gate []string) {
		t.Helper()
		conn, err := f.DB.Pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Release()
		// Planned at every run, never a generic plan: which of the two a
		// connection settles on depends on the statistics of the moment,
		// and a generic plan locks only the indexes it uses, so that the
		// counts would be the plans' rather than the statements'.
		if _, err := conn.Exec(ctx, "SET plan_cache_mode = force_custom_plan"); err != nil {
			t.Fatal(err)
		}
		defer func() { _, _ = conn.Exec(ctx, "RESET plan_cache_mode") }()
		var tx pgx.Tx
		for range 8 {
			if tx != nil {
				_ = tx.Rollback(ctx)
			}
			if tx, err = conn.Begin(ctx); err != nil {
				t.Fatal(err)
			}
			rows, err := tx.Query(ctx, sql, args...)
			if err != nil {
				t.Fatal(err)
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
		}
		defer func() { _ = tx.Rollback(ctx) }()
		rows, err := tx.Query(ctx, `SELECT DISTINCT c.relname, coalesce(t.relname, c.relname)
  FROM pg_locks l JOIN pg_class c ON c.oid = l.relation JOIN pg_namespace n ON n.oid = c.relnamespace
  LEFT JOIN pg_index i ON i.indexrelid = c.oid LEFT JOIN pg_class t ON t.oid = i.indrelid
 WHERE l.pid = pg_backend_pid() AND l.locktype = 'relation' AND n.nspname = $1 ORDER BY 1`, postgres.SharedSchema)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var rel, owner string
			if err := rows.Scan(&rel, &owner); err != nil {
				t.Fatal(err)
			}
			all = append(all, rel)
			for _, g := range gateTables {
				if owner == string(g) {
					gate = append(gate, rel)
				}
			}
		}
		return all, gate
	}
	for _, s := range []struct {
		name              string
		full, lean        string
		fullArgs, leanArg []any
	}{
		{"validation's read", checkOutReadSQL.SQL, checkOutReadLeanSQL.SQL, read, leanRead},
		{"the write", checkOutWrite.SQL, checkOutWriteLean.SQL, write, leanWrite},
	} {
		all, gate := locked(s.full, s.fullArgs)
		leanAll, leanGate := locked(s.lean, s.leanArg)
		t.Logf("%s locks %d relations in full, %d lean", s.name, len(all), len(leanAll))
		if len(gate) == 0 {
			t.Errorf("%s in full locks no gate table: %v", s.name, all)
		}
		if len(leanGate) > 0 {
			t.Errorf("%s, lean, locks %v", s.name, leanGate)
		}
		if len(leanAll) >= len(all) {
			t.Errorf("%s locks %d relations lean, %d in full", s.name, len(leanAll), len(all))
		}
	}
}
