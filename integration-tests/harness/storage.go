package harness

import (
	"net/http"
	"path/filepath"
	"testing"
	"time"
)

// Storage is one circulation-storage process on the test run's database,
// without circulation instances: for tests of storage's own HTTP contract,
// each on tenants of its own (see InitTenant).
type Storage struct {
	*Process
}

// StartStorage starts circulation-storage alone on a free port, with env
// added to its environment; it stops when t ends.
func StartStorage(t testing.TB, env ...string) *Storage {
	t.Helper()
	e := envState()
	// The contract is storage's API; who may call it is tested on its
	// own, so these run without authentication, as asked for here.
	p := startProcess(t, "storage", filepath.Join(e.BinDir, "circulation-storage"),
		append([]string{"AUTH_MODE=none", "DATABASE_URL=" + e.DatabaseURL, "LOG_LEVEL=info"}, env...)...)
	return &Storage{Process: p}
}

// InitTenant initialises a new tenant through POST /_/tenant, failing t
// unless storage answers 201, and returns its id.
func (s *Storage) InitTenant(t testing.TB) string {
	t.Helper()
	// A cluster of storage alone, for its request helpers.
	c := &Cluster{t: t, Tenant: TenantID(), Storage: s.Process, client: &http.Client{Timeout: 60 * time.Second}}
	c.enableTenant(t)
	return c.Tenant
}
