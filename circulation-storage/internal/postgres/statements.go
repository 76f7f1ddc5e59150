package postgres

import (
	"sync"
	"sync/atomic"

	storage "github.com/checkoutlock/circulation-storage"
)

// maxStatementTenants bounds the tenants whose statements a
// tenantStatements keeps; those of any other are made on every call.
const maxStatementTenants = 1000

// tenantStatements keeps the SQL of the hottest statements, made for each
// tenant's tables once rather than on every call (a table name is quoted
// and formatted into the text), for at most maxStatementTenants tenants.
type tenantStatements[T any] struct {
	make    func(t storage.Tenant) T
	kept    sync.Map // storage.Tenant → T
	tenants atomic.Int32
}

// get is t's statements.
func (c *tenantStatements[T]) get(t storage.Tenant) T {
	if st, ok := c.kept.Load(t); ok {
		return st.(T)
	}
	st := c.make(t)
	if c.tenants.Add(1) <= maxStatementTenants {
		if prev, loaded := c.kept.LoadOrStore(t, st); loaded {
			c.tenants.Add(-1)
			return prev.(T)
		}
	} else {
		c.tenants.Add(-1)
	}
	return st
}
