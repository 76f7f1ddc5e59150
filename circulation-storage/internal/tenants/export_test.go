package tenants

import (
	"context"
	"io/fs"
)

// Migrate is migrate, for the tests' own migrations.
func (s *Tenants) Migrate(ctx context.Context, schema string, fsys fs.FS) (uint, error) {
	return s.migrate(ctx, schema, fsys)
}

// MigrateSessionName is migrateSessionName.
const MigrateSessionName = migrateSessionName
