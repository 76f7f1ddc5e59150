package contract_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/checkoutlock/integration-tests/contract"
	"github.com/checkoutlock/integration-tests/harness"
)

// TestMain builds the binaries and creates the run's database, for the
// storage under test.
func TestMain(m *testing.M) {
	os.Exit(harness.Main(m))
}

// TestContractRealStorage holds circulation-storage, one process of the
// binary on a real PostgreSQL, to its acceptance table: each case on a
// tenant of its own.
func TestContractRealStorage(t *testing.T) {
	t.Parallel()
	s := harness.StartStorage(t, fmt.Sprintf("LOCK_DEFAULT_TTL_MS=%d", contract.DefaultLockTTLMs),
		fmt.Sprintf("LOCK_MAX_TTL_MS=%d", contract.MaxLockTTLMs), fmt.Sprintf("LOCK_MAX_WAIT_MS=%d", contract.MaxWaitMs))
	contract.Exercise(t, func(t *testing.T) contract.Target {
		return &realTarget{url: s.URL(), tenant: s.InitTenant(t), never: harness.TenantID()}
	})
}

// realTarget is circulation-storage, seeded through its HTTP API.
type realTarget struct {
	url, tenant, never string
}

func (r *realTarget) URL() string                 { return r.url }
func (r *realTarget) Tenant() string              { return r.tenant }
func (r *realTarget) UninitializedTenant() string { return r.never }

func (r *realTarget) LimitItems(t *testing.T, rec contract.Records, n int) {
	t.Helper()
	contract.LimitItemsHTTP(t, r.url, r.tenant, rec, n)
}

func (r *realTarget) Block(t *testing.T, rec contract.Records, block map[string]any) {
	t.Helper()
	contract.BlockHTTP(t, r.url, r.tenant, rec, block)
}

func (r *realTarget) LimitChargedOut(t *testing.T, rec contract.Records, n int, message string) {
	t.Helper()
	contract.LimitChargedOutHTTP(t, r.url, r.tenant, rec, n, message)
}

func (r *realTarget) Request(t *testing.T, rec contract.Records, byAnother bool, position int) string {
	t.Helper()
	return contract.RequestHTTP(t, r.url, r.tenant, rec, byAnother, position)
}

func (r *realTarget) Seed(t *testing.T) contract.Records {
	t.Helper()
	return contract.SeedHTTP(t, r.url, r.tenant)
}
