package storage

import (
	"context"

	"github.com/checkoutlock/schemas/errs"

	"github.com/checkoutlock/schemas"
)

// Tenant is a validated tenant id. Its data lives in the PostgreSQL schema
// Schema(); because that name is built from the id, an id is only ever made by
// ParseTenant.
type Tenant string

// ParseTenant validates a tenant id from the X-Okapi-Tenant header
// (schemas.ValidTenant: the contract's pattern, and no "pg_" prefix, which
// PostgreSQL reserves for its own schemas).
func ParseTenant(s string) (Tenant, error) {
	if s == "" {
		return "", errs.Errorf(errs.KindBadRequest, schemas.CodeTenantMissing, "X-Okapi-Tenant header is required")
	}
	if !schemas.ValidTenant(s) {
		shown := s
		if len(shown) > 64 {
			shown = shown[:64] + "…"
		}
		return "", errs.Errorf(errs.KindBadRequest, schemas.CodeInvalidTenant,
			"Invalid tenant %q: %s", shown, schemas.TenantRule).With("tenant", shown)
	}
	return Tenant(s), nil
}

// Schema is the PostgreSQL schema holding the tenant's data, named as FOLIO
// names module schemas.
func (t Tenant) Schema() string { return string(t) + "_mod_circulation_storage" }

// TenantNotInitialized is the error for a tenant whose schema does not exist.
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
	// Init creates or upgrades the tenant's schema, loads the data its
	// parameters ask for and records the job. Concurrent calls for one tenant
	// are serialised.
	Init(ctx context.Context, t Tenant, attrs TenantAttributes) (TenantJob, error)
	// Purge drops the tenant's schema and everything in it.
	Purge(ctx context.Context, t Tenant) error
	// Job reads a job recorded by Init.
	Job(ctx context.Context, t Tenant, id string) (TenantJob, error)
	// DeleteJob forgets a job.
	DeleteJob(ctx context.Context, t Tenant, id string) error
}
