package tenants_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/checkoutlock/circulation-storage/internal/dbtest"
	"github.com/checkoutlock/circulation-storage/internal/lending"
	"github.com/checkoutlock/circulation-storage/internal/locks"
	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/circulation-storage/internal/recordstore"
	"github.com/checkoutlock/circulation-storage/internal/tenants"
	"github.com/checkoutlock/circulation-storage/internal/waiting"
	"github.com/checkoutlock/schemas/errs"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/circulation-storage/internal/pgtest"
	"github.com/checkoutlock/migrations"
)

// TestUpgradeMovesASchemaPerTenantIntoTheSharedTables: a tenant whose data
// an earlier release kept in a schema of its own (the schema-per-tenant
// layout, at an old migration) is upgraded: every row is moved into the
// shared tables, where the services find it, and the old tables make way
// for the tenant's views.
func TestUpgradeMovesASchemaPerTenantIntoTheSharedTables(t *testing.T) {
	t.Parallel()
	f := dbtest.Setup(t) // the shared schema exists and another tenant is in it
	ctx := context.Background()
	tenant := storage.Tenant(pgtest.TenantID())
	t.Cleanup(func() { _ = f.Tenants.Purge(context.WithoutCancel(ctx), tenant) })
	if _, err := f.Tenants.MigrateTenantSchema(ctx, tenant); err != nil {
		t.Fatal(err)
	}
	old := func(name string) string { return pgx.Identifier{tenant.Schema(), name}.Sanitize() }
	group, patron, mt, lt, item, policy, loan, setting, job := uuid.NewString(), uuid.NewString(), uuid.NewString(),
		uuid.NewString(), uuid.NewString(), uuid.NewString(), uuid.NewString(), uuid.NewString(), uuid.NewString()
	doc := func(v map[string]any) string { b, _ := json.Marshal(v); return string(b) }
	for _, st := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO ` + old("patron_group") + ` (id, jsonb) VALUES ($1, $2)`, []any{group, doc(map[string]any{"id": group, "group": "staff"})}},
		{`INSERT INTO ` + old("patron") + ` (id, jsonb) VALUES ($1, $2)`, []any{patron, doc(map[string]any{"id": patron, "barcode": "P1", "patronGroup": group, "active": true})}},
		{`INSERT INTO ` + old("material_type") + ` (id, jsonb) VALUES ($1, $2)`, []any{mt, doc(map[string]any{"id": mt, "name": "book"})}},
		{`INSERT INTO ` + old("loan_type") + ` (id, jsonb) VALUES ($1, $2)`, []any{lt, doc(map[string]any{"id": lt, "name": "Can circulate"})}},
		{`INSERT INTO ` + old("item") + ` (id, jsonb) VALUES ($1, $2)`, []any{item, doc(map[string]any{"id": item, "barcode": "I1",
			"status": map[string]any{"name": "Checked out"}, "materialTypeId": mt, "permanentLoanTypeId": lt, "_version": 2})}},
		{`INSERT INTO ` + old("loan_policy") + ` (id, jsonb) VALUES ($1, $2)`, []any{policy, doc(map[string]any{"id": policy, "name": "Standard",
			"loansPolicy": map[string]any{"itemLimit": 5}})}},
		{`INSERT INTO ` + old("loan") + ` (id, jsonb) VALUES ($1, $2)`, []any{loan, doc(map[string]any{"id": loan, "userId": patron, "itemId": item,
			"status": map[string]any{"name": "Open"}, "loanDate": "2026-11-01T10:00:00.000Z", "action": "checkedout"})}},
		{`INSERT INTO ` + old("circulation_rules") + ` (fallback_loan_policy_id) VALUES ($1)`, []any{policy}},
		{`INSERT INTO ` + old("circulation_rule") + ` (position, material_type_id, loan_policy_id) VALUES (0, $1, $2)`, []any{mt, policy}},
		{`INSERT INTO ` + old("setting") + ` (id, jsonb) VALUES ($1, $2)`, []any{setting, doc(map[string]any{"id": setting, "scope": "mod-circulation",
			"key": "checkoutLockFeature", "value": map[string]any{"checkOutLockFeatureEnabled": true}, "_version": 3})}},
		{`INSERT INTO ` + old("setting_change") + ` (setting_id, scope, key, operation) VALUES ($1, 'mod-circulation', 'checkoutLockFeature', 'create')`, []any{setting}},
		{`INSERT INTO ` + old("check_out_lock") + ` (user_id, expires_at, ttl_ms) VALUES ($1, now() + interval '1 hour', 3600000)`, []any{patron}},
		{`INSERT INTO ` + old("check_out_lock_event") + ` (type, user_id) VALUES ('waiter_gave_up', $1)`, []any{patron}},
		{`INSERT INTO ` + old("tenant_job") + ` (id, tenant_attributes, complete) VALUES ($1, '{"module_to":"mod-circulation-storage-0.9.0"}', true)`, []any{job}},
	} {
		f.Exec(t, st.sql, st.args...)
	}

	res, err := f.Tenants.Init(ctx, tenant, storage.TenantAttributes{ModuleTo: "mod-circulation-storage-1.0.0", ModuleFrom: "mod-circulation-storage-0.9.0"})
	if err != nil {
		t.Fatalf("upgrade: %v", err)
	}
	if !strings.Contains(strings.Join(res.Messages, "\n"), "14 rows moved") {
		t.Errorf("upgrade's messages %q, want 14 rows moved", res.Messages)
	}
	records := recordstore.NewRecords(f.DB)
	got, err := records.Get(ctx, tenant, storage.Loans, loan)
	if err != nil || !strings.Contains(string(got), patron) {
		t.Errorf("the moved loan: %s, %v", got, err)
	}
	rules := lending.NewRules(f.DB, lending.Policy{})
	read, err := rules.ReadForCheckOut(ctx, tenant, "I1", "P1")
	if err != nil || read.OpenLoan == nil || read.Limit == nil || read.Limit.Limit != 5 || read.OpenLoans != 1 || read.LockSetting == nil {
		t.Errorf("the check-out's read of the moved records: %+v, %v", read, err)
	}
	if locks, total, err := locks.NewLocks(f.DB).List(ctx, tenant, storage.LockFilter{Limit: 10}); err != nil || total != 1 || locks[0].UserID != patron {
		t.Errorf("the moved lock: %+v, %d, %v", locks, total, err)
	}
	if events, total, err := locks.NewLocks(f.DB).History(ctx, tenant, storage.HistoryFilter{Limit: 10}); err != nil || total != 1 || events[0].Type != storage.EventWaiterGaveUp {
		t.Errorf("the moved history: %+v, %d, %v", events, total, err)
	}
	if _, err := f.Tenants.Job(ctx, tenant, job); err != nil {
		t.Errorf("the moved tenant job: %v", err)
	}
	// The tenant's schema now holds views of its rows, not tables.
	var kind string
	if err := f.DB.Pool.QueryRow(ctx, `SELECT c.relkind::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND c.relname = 'loan'`, tenant.Schema()).Scan(&kind); err != nil || kind != "v" {
		t.Errorf("%s.loan is %q (%v), want a view", tenant.Schema(), kind, err)
	}
	var viewed int
	if err := f.DB.Pool.QueryRow(ctx, `SELECT count(*) FROM `+dbtest.View(tenant, postgres.TableLoan)).Scan(&viewed); err != nil || viewed != 1 {
		t.Errorf("the tenant's view of its loans: %d rows, %v", viewed, err)
	}
	// A second upgrade finds nothing to move and changes nothing.
	res, err = f.Tenants.Init(ctx, tenant, storage.TenantAttributes{ModuleTo: "mod-circulation-storage-1.0.0"})
	if err != nil || strings.Contains(strings.Join(res.Messages, "\n"), "moved") {
		t.Errorf("second upgrade: %q, %v", res.Messages, err)
	}
	if n := (dbtest.Fixture{DB: f.DB, Tenant: tenant}).Count(t, postgres.TableLoan, ""); n != 1 {
		t.Errorf("loans after the second upgrade: %d, want 1", n)
	}
}

// TestEnabledIsRememberedAndForgottenOnPurge: a tenant found enabled is
// not looked up again; its purge on this instance forgets it at once, and
// a purge on another instance is announced to every instance's listener,
// which forgets it.
func TestEnabledIsRememberedAndForgottenOnPurge(t *testing.T) {
	t.Parallel()
	f := dbtest.Setup(t)
	ctx := context.Background()
	tenant := storage.Tenant(pgtest.TenantID())
	if _, err := f.Tenants.Init(ctx, tenant, storage.TenantAttributes{ModuleTo: "mod-circulation-storage-1.0.0"}); err != nil {
		t.Fatal(err)
	}
	if enabled, err := f.Tenants.Enabled(ctx, tenant); err != nil || !enabled {
		t.Fatalf("enabled %t, %v", enabled, err)
	}
	purged := make(chan storage.Tenant, 100)
	listening := make(chan bool, 10)
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	go waiting.NewListener(pgtest.Shared(t), dbtest.Discard, waiting.ListenerHandlers{Released: func(storage.Tenant, string) {},
		Purged:    func(p storage.Tenant) { purged <- p },
		Listening: func(up bool) { listening <- up }, Reconnecting: func() {}}).Run(lctx)
	select {
	case <-listening:
	case <-time.After(5 * time.Second):
		t.Fatal("the listener did not listen within 5 s")
	}
	// Another instance purges the tenant: this one goes on answering from
	// memory until the announcement arrives.
	other := tenants.NewTenants(f.DB, dbtest.Discard)
	if err := other.Purge(ctx, tenant); err != nil {
		t.Fatal(err)
	}
	if enabled, err := f.Tenants.Enabled(ctx, tenant); err != nil || !enabled {
		t.Errorf("remembered: enabled %t, %v", enabled, err)
	}
	if enabled, err := other.Enabled(ctx, tenant); err != nil || enabled {
		t.Errorf("on the purging instance: enabled %t, %v", enabled, err)
	}
	// Durable records cannot be written for it in the meantime.
	if _, err := recordstore.NewRecords(f.DB).Create(ctx, tenant, storage.MaterialTypes, uuid.NewString(), []byte(`{"name":"x"}`)); err == nil {
		t.Error("a record written for a purged tenant")
	}
	deadline := time.After(5 * time.Second)
	for {
		select {
		case p := <-purged:
			if p != tenant {
				continue // another test's tenant
			}
			f.Tenants.Forget(p)
			if enabled, err := f.Tenants.Enabled(ctx, tenant); err != nil || enabled {
				t.Errorf("after the announcement: enabled %t, %v", enabled, err)
			}
			return
		case <-deadline:
			t.Fatal("the purge was not announced within 5 s")
		}
	}
}

// TestTenantsEnabledAtOnceOnAFreshDatabase: the first tenants of a
// database are enabled at the same moment, by instances of their own; the
// shared schema is created once, and every one of them is enabled. Run
// five times, each on a database of its own.
func TestTenantsEnabledAtOnceOnAFreshDatabase(t *testing.T) {
	t.Parallel()
	// The rounds at once, each on a database of its own: 120 connections,
	// which the test run's PostgreSQL allows (scripts/test-postgres.sh).
	for round := range 5 {
		t.Run(fmt.Sprint("round ", round), func(t *testing.T) {
			t.Parallel()
			url := pgtest.Fresh(t)
			const n = 6
			errs := make(chan error, n)
			start := make(chan struct{})
			dbs := make([]*postgres.DB, n)
			for i := range dbs {
				db, err := postgres.Open(context.Background(), url, postgres.PoolConfig{MaxConns: 4, LockCommit: "off"})
				if err != nil {
					t.Fatalf("open database: %v", err)
				}
				dbs[i] = db
				t.Cleanup(func() { dbtest.CloseWithin(t, db, 10*time.Second) })
				go func() {
					<-start
					_, err := tenants.NewTenants(db, dbtest.Discard).Init(context.Background(), storage.Tenant(pgtest.TenantID()), storage.TenantAttributes{})
					errs <- err
				}()
			}
			close(start)
			for range n {
				if err := <-errs; err != nil {
					t.Errorf("a tenant enabled at once with others: %v", err)
				}
			}
		})
	}
}

// TestASchemaMigratedFurtherIsLeftAsItIs: a later release has migrated the
// shared schema beyond this release's last migration (a rolling upgrade:
// this instance is not upgraded yet), or tried to and failed, its
// migration rolled back and its version left dirty. Either way every
// migration this release needs is applied: enabling a tenant here leaves
// the schema and its record as they are and enables the tenant, instead
// of failing to find the later migration (or leaving the failed one to
// any release but the one that knows it).
func TestASchemaMigratedFurtherIsLeftAsItIs(t *testing.T) {
	t.Parallel()
	latest := tenants.LatestMigration(migrations.FS)
	for _, c := range []struct {
		name  string
		dirty bool
		at    uint // the migration the job reports
	}{
		{"migrated further", false, latest + 1},
		{"a later migration failed", true, latest},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			db := dbtest.OpenDB(t, pgtest.Fresh(t))
			ctx := context.Background()
			if _, err := tenants.NewTenants(db, dbtest.Discard).Init(ctx, storage.Tenant(pgtest.TenantID()), storage.TenantAttributes{}); err != nil {
				t.Fatal(err)
			}
			table := pgx.Identifier{postgres.SharedSchema, "schema_migrations"}.Sanitize()
			if _, err := db.Pool.Exec(ctx, `UPDATE `+table+` SET version = $1, dirty = $2`, latest+1, c.dirty); err != nil {
				t.Fatal(err)
			}
			// A new instance: nothing remembered of the schema.
			ts := tenants.NewTenants(db, dbtest.Discard)
			tenant := storage.Tenant(pgtest.TenantID())
			job, err := ts.Init(ctx, tenant, storage.TenantAttributes{})
			if err != nil {
				t.Fatalf("a tenant enabled on a schema migrated further: %v", err)
			}
			if want := fmt.Sprintf("schema %s at migration %d", postgres.SharedSchema, c.at); len(job.Messages) == 0 || job.Messages[0] != want {
				t.Errorf("job messages %q, want first %q", job.Messages, want)
			}
			if ok, err := tenants.NewTenants(db, dbtest.Discard).Enabled(ctx, tenant); err != nil || !ok {
				t.Errorf("tenant enabled: %t, %v; want true", ok, err)
			}
			if got, want := recorded(t, db, postgres.SharedSchema), (migrationRecord{int64(latest) + 1, c.dirty}); got != want {
				t.Errorf("record: %+v, want %+v as the later release left it", got, want)
			}
		})
	}
}

func TestTenantInitIsIdempotentAndConcurrent(t *testing.T) {
	t.Parallel()
	f := dbtest.Setup(t)
	ctx := context.Background()
	tenant := storage.Tenant("c" + f.Tenant[1:])
	t.Cleanup(func() { _ = f.Tenants.Purge(context.Background(), tenant) })
	var wg sync.WaitGroup
	results := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := f.Tenants.Init(ctx, tenant, storage.TenantAttributes{ModuleTo: "mod-circulation-storage-1.0.0"})
			results <- err
		}()
	}
	wg.Wait()
	close(results)
	for err := range results {
		if err != nil {
			t.Errorf("concurrent init: %v", err)
		}
	}
	if _, _, err := locks.NewLocks(f.DB).Acquire(ctx, tenant, uuid.NewString(), "", dbtest.TTL, storage.Holder{}); err != nil {
		t.Errorf("acquire in the new tenant: %v", err)
	}
	// Events of the tenant, one commit not numbered yet and one numbered
	// (each found through an index of its own by the purge).
	if _, err := f.DB.Pool.Exec(ctx, postgres.WithTables(`INSERT INTO %s (tenant_id, xid, events, seq)
		VALUES ($1, pg_current_xact_id(), 1, NULL), ($1, pg_current_xact_id(), 1, 1)`, postgres.TableOutboxCommit), string(tenant)); err != nil {
		t.Fatalf("record the tenant's commits: %v", err)
	}
	if err := f.Tenants.Purge(ctx, tenant); err != nil {
		t.Fatalf("purge: %v", err)
	}
	if enabled, err := f.Tenants.Enabled(ctx, tenant); err != nil || enabled {
		t.Errorf("after purge: enabled %t, %v", enabled, err)
	}
	// Nothing of the tenant is left: no row in any shared table, no
	// schema.
	for _, name := range append(postgres.TenantTables, postgres.TableTenant) {
		column := "tenant_id"
		if name == postgres.TableTenant {
			column = "id"
		}
		var n int
		if err := f.DB.Pool.QueryRow(ctx, postgres.WithTables(`SELECT count(*) FROM %s WHERE `+column+` = $1`, name), string(tenant)).Scan(&n); err != nil || n != 0 {
			t.Errorf("%s after purge: %d rows, %v", name, n, err)
		}
	}
	var schema bool
	if err := f.DB.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, tenant.Schema()).Scan(&schema); err != nil || schema {
		t.Errorf("schema %s after purge: %t, %v", tenant.Schema(), schema, err)
	}
}

func TestTenantJobs(t *testing.T) {
	t.Parallel()
	f := dbtest.Setup(t)
	ctx := context.Background()
	attrs := storage.TenantAttributes{ModuleTo: "mod-circulation-storage-1.0.1", ModuleFrom: "mod-circulation-storage-1.0.0",
		Parameters: []errs.Parameter{{Key: "loadReference", Value: "false"}}}
	job, err := f.Tenants.Init(ctx, f.Tenant, attrs)
	if err != nil {
		t.Fatal(err)
	}
	got, err := f.Tenants.Job(ctx, f.Tenant, job.ID)
	if err != nil {
		t.Fatalf("job: %v", err)
	}
	if got.ID != job.ID || !got.Complete || got.Attributes.ModuleTo != attrs.ModuleTo || got.Attributes.ModuleFrom != attrs.ModuleFrom ||
		len(got.Attributes.Parameters) != 1 || len(got.Messages) != len(job.Messages) {
		t.Errorf("job = %+v, want %+v", got, job)
	}
	if err := f.Tenants.DeleteJob(ctx, f.Tenant, job.ID); err != nil {
		t.Fatalf("delete job: %v", err)
	}
	if _, err := f.Tenants.Job(ctx, f.Tenant, job.ID); !errs.IsKind(err, errs.KindNotFound) {
		t.Errorf("job after delete: %v, want not found", err)
	}
	if err := f.Tenants.DeleteJob(ctx, f.Tenant, job.ID); !errs.IsKind(err, errs.KindNotFound) {
		t.Errorf("second delete: %v, want not found", err)
	}
}
