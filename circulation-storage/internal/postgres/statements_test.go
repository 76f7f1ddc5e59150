package postgres

import (
	"fmt"
	"sync"
	"testing"

	storage "github.com/checkoutlock/circulation-storage"
)

// TestTenantStatementsAreMadeOnceAndBounded: a tenant's statements are
// made once while there is room, and a tenant beyond maxStatementTenants
// gets its own statements on every call without being kept, from many
// goroutines at once.
func TestTenantStatementsAreMadeOnceAndBounded(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	made := map[storage.Tenant]int{}
	c := tenantStatements[string]{make: func(t storage.Tenant) string {
		mu.Lock()
		made[t]++
		mu.Unlock()
		return "SELECT " + string(t)
	}}
	tenant := func(i int) storage.Tenant { return storage.Tenant(fmt.Sprintf("t%d", i)) }
	const extra = 50
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range maxStatementTenants + extra {
				if got, want := c.get(tenant(i)), "SELECT "+string(tenant(i)); got != want {
					t.Errorf("goroutine %d: statements of %s are %q, want %q", g, tenant(i), got, want)
				}
			}
		}()
	}
	wg.Wait()
	kept := 0
	c.kept.Range(func(any, any) bool { kept++; return true })
	if kept != maxStatementTenants || int(c.tenants.Load()) != maxStatementTenants {
		t.Errorf("%d tenants kept (counted %d), want %d", kept, c.tenants.Load(), maxStatementTenants)
	}
	// A kept tenant's statements are not made again.
	var keptOne storage.Tenant
	c.kept.Range(func(k, _ any) bool { keptOne = k.(storage.Tenant); return false })
	before := made[keptOne]
	for range 10 {
		c.get(keptOne)
	}
	if made[keptOne] != before {
		t.Errorf("%s's kept statements were made again: %d times, then %d", keptOne, before, made[keptOne])
	}
}
