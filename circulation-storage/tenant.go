package storage

import (
	"context"
	"regexp"
)

// Tenant is a validated tenant id. Its data lives in the PostgreSQL schema
// Schema(); because that name is built from the id, an id is only ever made by
// ParseTenant.
type Tenant string

// tenantPattern is what a tenant id may look like. It keeps the schema name a
// plain identifier within PostgreSQL's 63-byte limit.
var tenantPattern = regexp.MustCompile(`^[a-z][a-z0-9_]{0,30}$`)

// TenantPattern is tenantPattern's text, for error messages and docs.
const TenantPattern = `^[a-z][a-z0-9_]{0,30}$`

// ParseTenant validates a tenant id from the X-Okapi-Tenant header.
func ParseTenant(s string) (Tenant, error) {
	if s == "" {
		return "", Errorf(KindBadRequest, CodeTenantMissing, "X-Okapi-Tenant header is required")
	}
	if !tenantPattern.MatchString(s) {
		shown := s
		if len(shown) > 64 {
			shown = shown[:64] + "…"
		}
		return "", Errorf(KindBadRequest, CodeInvalidTenant,
			"Invalid tenant %q: X-Okapi-Tenant must match %s", shown, TenantPattern).With("tenant", shown)
	}
	return Tenant(s), nil
}

// Schema is the PostgreSQL schema holding the tenant's data, named as FOLIO
// names module schemas.
func (t Tenant) Schema() string { return string(t) + "_mod_circulation_storage" }

// TenantNotInitialized is the error for a tenant whose schema does not exist.
func TenantNotInitialized(t Tenant) *Error {
	return Errorf(KindBadRequest, CodeTenantNotInitialized,
		"Tenant %s is not initialised for circulation-storage: call POST /_/tenant first", t).With("tenant", string(t))
}

// TenantAttributes is the body of POST /_/tenant.
type TenantAttributes struct {
	ModuleTo   string      `json:"module_to,omitempty"`
	ModuleFrom string      `json:"module_from,omitempty"`
	Purge      bool        `json:"purge,omitempty"`
	Parameters []Parameter `json:"parameters,omitempty"`
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
