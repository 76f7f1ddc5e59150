// Package migrations holds circulation-storage's versioned SQL migrations,
// embedded so the binary carries them.
//
// FS is the shared schema's: every tenant's records in one set of tables
// (schema circulation_storage), each row carrying its tenant's id. They are
// applied by golang-migrate when a tenant is enabled or upgraded; the files
// name tables without a schema and the migrator sets search_path.
//
// TenantSchemaFS is the schema-per-tenant layout of earlier releases, one
// schema per tenant (<tenant>_mod_circulation_storage). It is applied only
// to bring such a schema to its last version before its rows are moved
// into the shared tables (see the tenant service's upgrade).
//
// Never edit a migration that has been released; add a new one.
package migrations

import (
	"embed"
	"io/fs"
)

// FS holds the shared schema's NNNNNN_name.up.sql / .down.sql files.
//
//go:embed *.sql
var FS embed.FS

//go:embed tenant_schema/*.sql
var tenantSchema embed.FS

// TenantSchemaFS holds the schema-per-tenant layout's files.
var TenantSchemaFS, _ = fs.Sub(tenantSchema, "tenant_schema")
