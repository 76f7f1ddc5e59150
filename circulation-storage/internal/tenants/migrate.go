package tenants

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/golang-migrate/migrate/v4"
	"github.com/golang-migrate/migrate/v4/database"
	migratepgx "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	"github.com/golang-migrate/migrate/v4/source"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/schemas/errs"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/migrations"
)

// A migration is applied by one statement of several, which PostgreSQL
// runs as one transaction (the files hold no transaction control of their
// own: TestMigrationsHoldNoTransactionControl), and that transaction also
// records the migration's version, clean (stamped). golang-migrate marks
// the version dirty in a transaction of its own before it runs the
// migration, so a version found dirty is always one whose migration did
// not commit (it failed, or its session or its instance died first): the
// schema holds every migration before it and nothing of it. A dirty
// version is therefore no more than a migration still to apply; the next
// migration of the schema records the version before it and applies it
// again (migrate), instead of leaving the schema stuck for an operator to
// force.
//
// A dirty version an earlier release left, which did not record versions
// so, is read the same way; its one exception is an instance that died
// between its migration's commit and that release's next transaction,
// which the migration's statements then find half done (a table that
// already exists): the error names it.

// applied is the last migration a schema recorded at version, dirty or
// not, holds: 0 is none. The migrations are numbered 1, 2, 3… without a
// gap (TestFilesArePairedAndNumberedInOrder), so the one before a version
// is version - 1.
func applied(version int64, dirty bool) int64 {
	if dirty {
		return version - 1
	}
	return version
}

// latestShared is the shared schema's last migration in this release.
var latestShared = LatestMigration(migrations.FS)

// sharedRecord is the shared schema's record of its migration.
type sharedRecord struct {
	version int64 // the last one recorded
	dirty   bool  // recorded, but not committed (see applied)
}

// applied is the last migration the shared schema holds.
func (r sharedRecord) applied() int64 { return applied(r.version, r.dirty) }

// current says whether the shared schema holds every migration this
// release needs: its last, or a later release's (see migrateShared).
func (r sharedRecord) current() bool { return r.applied() >= int64(latestShared) }

// sharedMigration reads the shared schema's record of its migration. Its
// error is the driver's: pgx.ErrNoRows, or postgres.TablesMissing, where
// no tenant was ever enabled.
func (s *Tenants) sharedMigration(ctx context.Context) (sharedRecord, error) {
	var r sharedRecord
	err := s.db.Pool.QueryRow(ctx,
		`SELECT version, dirty FROM `+pgx.Identifier{postgres.SharedSchema, "schema_migrations"}.Sanitize()).Scan(&r.version, &r.dirty)
	return r, err
}

// migrateShared brings the shared schema to its last migration, unless it
// is there already (the common case, answered by one query), and returns
// the schema's migration version. Instances migrating at once are
// serialised (migrate). A schema a later release has migrated further is
// left as it is: migrations add tables, columns and indexes, so this
// release works on it, as an instance not yet upgraded must during a
// rolling upgrade.
func (s *Tenants) migrateShared(ctx context.Context) (uint, error) {
	if r, err := s.sharedMigration(ctx); err == nil && r.current() {
		return uint(r.applied()), nil
	}
	return s.migrate(ctx, postgres.SharedSchema, migrations.FS)
}

// LatestMigration is the highest version in a migrations directory.
func LatestMigration(fsys fs.FS) uint {
	names, _ := fs.Glob(fsys, "*.up.sql")
	var latest uint
	for _, n := range names {
		if v, err := strconv.ParseUint(strings.SplitN(n, "_", 2)[0], 10, 32); err == nil && uint(v) > latest {
			latest = uint(v)
		}
	}
	return latest
}

// MigrateTenantSchema brings t's schema of the schema-per-tenant layout to
// that layout's last migration.
func (s *Tenants) MigrateTenantSchema(ctx context.Context, t storage.Tenant) (uint, error) {
	return s.migrate(ctx, t.Schema(), migrations.TenantSchemaFS)
}

// migrateLockSQL serialises the migrations of one schema across every
// instance, from the schema's creation on: two tenants enabled at once on
// a database without the shared schema would otherwise both create it, and
// one would fail (golang-migrate's own lock is taken only after).
const migrateLockSQL = `SELECT pg_advisory_lock(hashtextextended('circulation-storage migrate ' || $1, 0))`

// migrateSessionName is the application_name of the sessions that migrate.
const migrateSessionName = "circulation-storage-migrate"

// migrateTries bounds the attempts of one migrate call: a migration that
// meets PostgreSQL's deadlock detector, or loses its session, is rolled
// back whole and is tried again after a short wait
// (postgres.TryAgainAtOnce, which finds the PostgreSQL error inside
// golang-migrate's in migrationFailed's); the caller hears of the last
// failure (a 503 when it is one to try again later).
const migrateTries = 3

// migrate creates schema if needed and applies every pending migration of
// fsys inside it, returning the schema's migration version. A migration
// that fails for a reason worth trying again is tried again, up to
// migrateTries times in all.
func (s *Tenants) migrate(ctx context.Context, schema string, fsys fs.FS) (uint, error) {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 50 * time.Millisecond
	var version uint
	err := backoff.Retry(func() error {
		var err error
		version, err = s.migrateOnce(ctx, schema, fsys)
		if err != nil && !postgres.TryAgainAtOnce(err) {
			return backoff.Permanent(err)
		}
		if err != nil {
			s.logger.WarnContext(ctx, "migration failed and was rolled back", slog.String("schema", schema), slog.Any("error", err))
		}
		return err
	}, backoff.WithContext(backoff.WithMaxRetries(b, migrateTries-1), ctx))
	return version, err
}

// migrateOnce is one attempt of migrate. It uses its own connections whose
// search_path is the schema, because the migration files name their
// tables without a schema; one of them holds migrateLockSQL's lock
// throughout.
func (s *Tenants) migrateOnce(ctx context.Context, schema string, fsys fs.FS) (uint, error) {
	connCfg := s.db.Pool.Config().ConnConfig.Copy()
	connCfg.RuntimeParams["search_path"] = pgx.Identifier{schema}.Sanitize()
	connCfg.RuntimeParams["application_name"] = migrateSessionName
	sqlDB := stdlib.OpenDB(*connCfg)
	defer sqlDB.Close()
	lock, err := sqlDB.Conn(ctx)
	if err != nil {
		return 0, postgres.Interpret(err, "")
	}
	// sqlDB.Close, deferred before, ends the session and the lock with it.
	defer lock.Close()
	if _, err := lock.ExecContext(ctx, migrateLockSQL, schema); err != nil {
		return 0, postgres.Interpret(err, "")
	}
	if _, err := lock.ExecContext(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{schema}.Sanitize()); err != nil {
		return 0, postgres.Interpret(err, "")
	}
	driver, err := migratepgx.WithInstance(sqlDB, &migratepgx.Config{})
	if err != nil {
		return 0, migrationFailed(schema, err)
	}
	src, err := iofs.New(fsys, ".")
	if err != nil {
		return 0, fmt.Errorf("read migrations: %w", err)
	}
	table := pgx.Identifier{schema, "schema_migrations"}.Sanitize()
	m, err := migrate.NewWithInstance("iofs", stamped{Driver: src, table: table}, "pgx5", driver)
	if err != nil {
		return 0, migrationFailed(schema, err)
	}
	defer m.Close()
	if version, dirty, err := m.Version(); err == nil && dirty && version <= LatestMigration(fsys) {
		// Not applied (see applied): recorded as what it is, the version
		// before it (none, before the first: golang-migrate has no
		// version 0), and applied now.
		before := int(applied(int64(version), dirty))
		if before == 0 {
			before = database.NilVersion
		}
		if err := m.Force(before); err != nil {
			return 0, migrationFailed(schema, err)
		}
		s.logger.InfoContext(ctx, "a migration that had not committed is applied again",
			slog.String("schema", schema), slog.Uint64("migration", uint64(version)))
	}
	if err := m.Up(); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return 0, migrationFailed(schema, err)
	}
	version, _, err := m.Version()
	if err != nil {
		return 0, migrationFailed(schema, err)
	}
	return version, nil
}

// stamped is a migration source whose up migrations each end by recording
// their own version, clean, in the migrations table: in the transaction
// that applies them (see applied).
type stamped struct {
	source.Driver
	table string // the schema's schema_migrations, quoted
}

func (s stamped) ReadUp(version uint) (io.ReadCloser, string, error) {
	r, id, err := s.Driver.ReadUp(version)
	if err != nil {
		return r, id, err
	}
	defer r.Close()
	body, err := io.ReadAll(r)
	if err != nil {
		return nil, id, err
	}
	// The line break and the empty statement end whatever the file ends
	// with (a comment, a statement without its semicolon).
	stamp := fmt.Sprintf("\n;\nTRUNCATE %[1]s;\nINSERT INTO %[1]s (version, dirty) VALUES (%[2]d, false);\n", s.table, version)
	return io.NopCloser(strings.NewReader(string(body) + stamp)), id, nil
}

// migrationFailed is the error of a migration that failed: a 503 when the
// database could not run it (unavailable, a deadlock, too slow), else the
// failure itself, a 500: a migration that a schema's data refuses (a
// unique index over duplicates) is the release's fault, not the caller's.
func migrationFailed(schema string, err error) error {
	if e := postgres.Interpret(queryError(err), ""); errs.IsKind(e, errs.KindUnavailable) {
		return fmt.Errorf("migrate %s: %w", schema, e)
	}
	return fmt.Errorf("migrate %s: %w", schema, err)
}

// queryError lets errors.As find the PostgreSQL error inside the
// database.Error golang-migrate returns for a failed statement, which
// does not unwrap.
func queryError(err error) error {
	var v database.Error
	if errors.As(err, &v) {
		return unwrappable{v}
	}
	var p *database.Error
	if errors.As(err, &p) {
		return unwrappable{*p}
	}
	return err
}

type unwrappable struct{ err database.Error }

func (e unwrappable) Error() string { return e.err.Error() }
func (e unwrappable) Unwrap() error { return e.err.OrigErr }
