package postgres

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/circulation-storage/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

// fixture is what a test needs: the shared database and a tenant of its own,
// initialised, and purged when the test ends.
type fixture struct {
	db      *DB
	tenant  storage.Tenant
	tenants *Tenants
}

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// openDB opens a pool on url, closed when the test ends.
func openDB(t *testing.T, url string) *DB {
	t.Helper()
	db, err := Open(context.Background(), url, PoolConfig{MaxConns: 8, LockCommit: "off"})
	if err != nil {
		t.Fatalf("open database: %v", err)
	}
	t.Cleanup(func() { closeWithin(t, db, 10*time.Second) })
	return db
}

// closeWithin closes db, and fails the test if that takes longer than d: a
// connection a test took and never gave back would have the close wait for
// it for ever, and the package hang until go test's timeout.
func closeWithin(t *testing.T, db *DB, d time.Duration) {
	t.Helper()
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		db.Close()
	}()
	select {
	case <-closed:
	case <-time.After(d):
		t.Errorf("closing the database took longer than %s: a connection taken was not given back", d)
	}
}

var shared struct {
	once sync.Once
	db   *DB
	err  error
}

// setup gives the test a tenant of its own in the shared database, reached
// through one pool for the whole package (so parallel tests do not exhaust
// the server's connections).
func setup(t testing.TB) fixture {
	t.Helper()
	return setupTenant(t, sharedDB(t))
}

// sharedDB is the package's pool of the shared database.
func sharedDB(t testing.TB) *DB {
	t.Helper()
	url := pgtest.Shared(t)
	shared.once.Do(func() {
		shared.db, shared.err = Open(context.Background(), url, PoolConfig{MaxConns: 16, LockCommit: "off"})
	})
	if shared.err != nil {
		t.Fatalf("open database: %v", shared.err)
	}
	return shared.db
}

func setupTenant(t testing.TB, db *DB) fixture {
	t.Helper()
	f := fixture{db: db, tenant: storage.Tenant(pgtest.TenantID()), tenants: NewTenants(db, discard)}
	ctx := context.Background()
	if _, err := f.tenants.Init(ctx, f.tenant, storage.TenantAttributes{ModuleTo: "mod-circulation-storage-1.0.0"}); err != nil {
		t.Fatalf("init tenant: %v", err)
	}
	t.Cleanup(func() {
		// Within a bound: a test that failed holding connections must not
		// leave its purge waiting for one.
		pctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := f.tenants.Purge(pctx, f.tenant); err != nil {
			t.Errorf("purge tenant %s: %v", f.tenant, err)
		}
	})
	return f
}

// exec runs SQL directly (the tenant's tables through its views), for arranging state
// (an expired lock) and checking it.
func (f fixture) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	if _, err := f.db.pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("exec %q: %v", sql, err)
	}
}

// count returns the number of rows of the tenant's table matching where.
func (f fixture) count(t *testing.T, name tableName, where string, args ...any) int {
	t.Helper()
	var n int
	q := "SELECT count(*) FROM " + view(f.tenant, name)
	if where != "" {
		q += " WHERE " + where
	}
	if err := f.db.pool.QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatalf("count %s: %v", name, err)
	}
	return n
}

// view is the tenant's view of one of the shared tables, in its FOLIO
// schema (see createViews): the tenant's rows only, for arranging state
// and checking it.
func view(t storage.Tenant, name tableName) string {
	return pgx.Identifier{t.Schema(), string(name)}.Sanitize()
}
