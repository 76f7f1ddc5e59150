// Package migrations holds circulation-storage's versioned SQL migrations,
// embedded so the binary carries them. They are applied by golang-migrate once
// per tenant, inside the tenant's own schema: the files name tables without a
// schema and the migrator sets search_path to the tenant's schema.
//
// Never edit a migration that has been released; add a new one.
package migrations

import "embed"

// FS holds the NNNNNN_name.up.sql / .down.sql files.
//
//go:embed *.sql
var FS embed.FS
