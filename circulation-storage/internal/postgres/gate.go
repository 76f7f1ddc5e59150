package postgres

import (
	"sync"

	storage "github.com/checkoutlock/circulation-storage"
)

// The check-out gate is what a check-out reads beyond the item limit:
// the patron's manual blocks and automated blocks, and the item's request
// queue (validation's read), the queue's head and the maximum items charged
// out (the write). Most tenants have none of these records, and reading
// them anyway cost each check-out 5 to 14 % more (BENCHMARKS §6d):
// PostgreSQL opens and locks every table and index a statement names,
// whether it finds anything there or not (the locks past the sixteen a
// session keeps on its fast path go to the shared lock table), and starts
// every subplan. Validation's read locks 26 relations in full and 20
// lean, the write 30 and 22, the lean ones tenant_gate and its key among
// them (TestLeanStatementsLockNoGateTable).
//
// So each statement comes in two forms: the full one, and a lean one that
// names none of the gate's tables and reads instead, in its own snapshot,
// whether the tenant has a gate row (migration 18's tenant_gate, written by
// the transaction that writes the tenant's first manual block, block limit
// or request, and never removed but by a purge). A lean statement that
// finds the row does nothing and says so; the full one is then run, and
// this instance runs the full one for that tenant from then on.

// Gates is the tenants this instance has found a gate row for: at most the
// tenants of the database that have one, as a purge announced to every
// instance drops its tenant (Tenants.Forget). A tenant missing here is
// only slower once: its lean statement finds the row.
type gates struct{ gated sync.Map }

// Has says whether t is known to have a gate row.
func (g *gates) Has(t storage.Tenant) bool {
	_, ok := g.gated.Load(t)
	return ok
}

// Found records that a lean statement found t's gate row.
func (g *gates) Found(t storage.Tenant) { g.gated.Store(t, struct{}{}) }

// Forget drops t, purged with its gate row.
func (g *gates) Forget(t storage.Tenant) { g.gated.Delete(t) }

// ForgetAll drops every tenant, after a time in which purges may have gone
// unannounced.
func (g *gates) ForgetAll() { g.gated.Clear() }

// GateRowSQL is SQL saying whether the tenant (an SQL expression) has a
// gate row.
func GateRowSQL(tenant string) string {
	return `EXISTS (SELECT 1 FROM ` + Table(TableTenantGate) + ` WHERE tenant_id = ` + tenant + `)`
}
