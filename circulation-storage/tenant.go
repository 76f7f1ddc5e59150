package storage

import (
	"context"

	"github.com/checkoutlock/schemas/text"

	"github.com/checkoutlock/schemas/errs"

	"github.com/checkoutlock/schemas"
)

// Tenant is a validated tenant id, only ever made by ParseTenant. Its
// rows are those of the shared tables that carry its id; Schema() names
// the schema FOLIO would give it.
type Tenant string

// ParseTenant validates a tenant id from the X-Okapi-Tenant header
// (schemas.ValidTenant: the contract's pattern, and no "pg_" prefix, which
// PostgreSQL reserves for its own schemas).
func ParseTenant(s string) (Tenant, error) {
	if s == "" {
		return "", errs.Errorf(errs.KindBadRequest, schemas.CodeTenantMissing, "X-Okapi-Tenant header is required")
	}
	if !schemas.ValidTenant(s) {
		shown := text.Echoed(s)
		return "", errs.Errorf(errs.KindBadRequest, schemas.CodeInvalidTenant,
			"Invalid tenant %q: %s", shown, schemas.TenantRule).With("tenant", shown)
	}
	return Tenant(s), nil
}

// Schema is the PostgreSQL schema FOLIO names for the tenant's data in
// this module: it holds views of the tenant's rows (and held its tables in
// the schema-per-tenant layout of earlier releases).
func (t Tenant) Schema() string { return string(t) + "_mod_circulation_storage" }

// TenantNotInitialized is the error for a tenant that is not enabled.
func TenantNotInitialized(t Tenant) *errs.Error {
	return errs.Errorf(errs.KindBadRequest, schemas.CodeTenantNotInitialized,
		"Tenant %s is not initialised for circulation-storage: call POST /_/tenant first", t).With("tenant", string(t))
}

// TenantAttributes is the body of POST /_/tenant.
type TenantAttributes struct {
	ModuleTo   string           `json:"module_to,omitempty"`
	ModuleFrom string           `json:"module_from,omitempty"`
	Purge      bool             `json:"purge,omitempty"`
	Parameters []errs.Parameter `json:"parameters,omitempty"`
}

// Parameter returns the value of the named parameter and whether it was given.
func (a TenantAttributes) Parameter(key string) (string, bool) {
	for _, p := range a.Parameters {
		if p.Key == key {
			return p.Value, true
		}
	}
	return "", false
}

// TenantJob records one POST /_/tenant. Jobs run to completion before the
// request answers.
type TenantJob struct {
	ID         string
	Tenant     Tenant
	Attributes TenantAttributes
	Complete   bool
	Error      string
	Messages   []string
}

// TenantService creates, upgrades and removes tenants.
type TenantService interface {
	// Init enables or upgrades the tenant, loads the data its
	// parameters ask for and records the job. Concurrent calls for one tenant
	// are serialised.
	Init(ctx context.Context, t Tenant, attrs TenantAttributes) (TenantJob, error)
	// Purge removes the tenant and every row of its.
	Purge(ctx context.Context, t Tenant) error
	// Enabled says whether the tenant is enabled (Init, and not purged
	// since).
	Enabled(ctx context.Context, t Tenant) (bool, error)
	// Job reads a job recorded by Init.
	Job(ctx context.Context, t Tenant, id string) (TenantJob, error)
	// DeleteJob forgets a job.
	DeleteJob(ctx context.Context, t Tenant, id string) error
}
