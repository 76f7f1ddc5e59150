package tenants_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/checkoutlock/circulation-storage/internal/dbtest"
	"github.com/checkoutlock/circulation-storage/internal/pgtest"
	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/circulation-storage/internal/tenants"
	"github.com/checkoutlock/schemas/errs"
)

// TestAMigrationWhoseSessionDiesIsAppliedAgain: the session applying a
// migration is ended at the last moment a migration can be lost, when
// its statements are done and its version is being recorded. The
// migration and its record go together: the same call then records the
// migration as not applied, applies it again, and goes on to the last
// one; nothing is left for an operator to force. Were the record written
// after the migration's commit (golang-migrate's own way), the migration
// would be found applied but dirty, and applying it again would fail on
// the table it already made.
func TestAMigrationWhoseSessionDiesIsAppliedAgain(t *testing.T) {
	t.Parallel()
	db, schema := probeSchema(t)
	ctx := context.Background()
	key := rand.Int64()
	fsys := threeTables(key)
	advisory := holdAdvisory(t, db, key)
	done := migrateInBackground(db, schema, fsys)
	// Migration 2 waits for the advisory lock: its version is marked dirty.
	pid := waitsForAdvisory(t, db, key, "migration 2")
	if got, want := recorded(t, db, schema), (migrationRecord{2, true}); got != want {
		t.Fatalf("record while migration 2 runs: %+v, want %+v", got, want)
	}
	// Hold the migrations table, let migration 2's statements finish, and
	// end its session when it waits for the table to record its version.
	holder, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := holder.Exec(ctx, `LOCK TABLE `+pgx.Identifier{schema, "schema_migrations"}.Sanitize()+` IN ACCESS SHARE MODE`); err != nil {
		t.Fatal(err)
	}
	if _, err := advisory.Exec(ctx, `SELECT pg_advisory_unlock($1)`, key); err != nil {
		t.Fatal(err)
	}
	dbtest.Eventually(t, "migration 2 waits to record its version", func() bool {
		var n int
		err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND wait_event = 'relation'`, pid).Scan(&n)
		return err == nil && n == 1
	})
	var ended bool
	if err := db.Pool.QueryRow(ctx, `SELECT pg_terminate_backend($1)`, pid).Scan(&ended); err != nil || !ended {
		t.Fatalf("end the migrating session %d: %t, %v", pid, ended, err)
	}
	dbtest.Eventually(t, "the migrating session ends", func() bool {
		var n int
		err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE pid = $1`, pid).Scan(&n)
		return err == nil && n == 0
	})
	if err := holder.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	r := <-done
	if r.err != nil || r.version != 3 {
		t.Fatalf("migrate: version %d, %v; want 3 and no error", r.version, r.err)
	}
	threeTablesMade(t, db, schema)
}

// TestAMigrationADeadlockRollsBackIsTriedAgain: a migration holds one
// table and waits for a second, which a session of the test holds while
// it waits for the first. PostgreSQL's deadlock detector rolls the
// migration back: it is the one that waits last, and the test's session
// looks for a deadlock only after a minute. The same call tries the
// migration again, which succeeds once the test's session ends.
func TestAMigrationADeadlockRollsBackIsTriedAgain(t *testing.T) {
	t.Parallel()
	db, schema := probeSchema(t)
	ctx := context.Background()
	quoted := pgx.Identifier{schema}.Sanitize()
	if _, err := db.Pool.Exec(ctx, `CREATE SCHEMA `+quoted+`; CREATE TABLE `+quoted+`.first (); CREATE TABLE `+quoted+`.second ()`); err != nil {
		t.Fatal(err)
	}
	key := rand.Int64()
	fsys := fstest.MapFS{
		"000001_both.up.sql": {Data: []byte(fmt.Sprintf("LOCK TABLE first IN ACCESS EXCLUSIVE MODE;\n"+
			"SELECT pg_advisory_xact_lock(%d);\nLOCK TABLE second IN ACCESS EXCLUSIVE MODE;\nCREATE TABLE one (id int);\n", key))},
		"000001_both.down.sql": {Data: []byte("DROP TABLE one;")},
	}
	advisory := holdAdvisory(t, db, key)
	holder, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Rollback(context.WithoutCancel(ctx)) }()
	var holderPID int32
	if _, err := holder.Exec(ctx, `SET LOCAL deadlock_timeout = '1min'; LOCK TABLE `+quoted+`.second IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	if err := holder.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&holderPID); err != nil {
		t.Fatal(err)
	}

	done := migrateInBackground(db, schema, fsys)
	waitsForAdvisory(t, db, key, "the migration, holding the first table,")
	locked := make(chan error, 1)
	go func() {
		_, err := holder.Exec(ctx, `LOCK TABLE `+quoted+`.first IN ACCESS EXCLUSIVE MODE`)
		locked <- err
	}()
	dbtest.Eventually(t, "the test's session waits for the first table", func() bool {
		var n int
		err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND wait_event = 'relation'`, holderPID).Scan(&n)
		return err == nil && n == 1
	})
	// The migration goes on to the second table: a deadlock, which its
	// session finds (deadlock_timeout) and ends by rolling it back.
	if _, err := advisory.Exec(ctx, `SELECT pg_advisory_unlock($1)`, key); err != nil {
		t.Fatal(err)
	}
	if err := <-locked; err != nil {
		t.Fatalf("the test's session, not the migration, was rolled back: %v", err)
	}
	if err := holder.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || r.version != 1 {
		t.Fatalf("migrate: version %d, %v; want 1 and no error", r.version, r.err)
	}
	if got, want := recorded(t, db, schema), (migrationRecord{1, false}); got != want {
		t.Errorf("record after: %+v, want %+v", got, want)
	}
	var made bool
	if err := db.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_tables WHERE schemaname = $1 AND tablename = 'one')`, schema).Scan(&made); err != nil || !made {
		t.Errorf("table one made: %t, %v; want true", made, err)
	}
}

// TestAFirstMigrationFoundDirtyIsAppliedAgain: the first migration of a
// schema did not commit (its instance died): its version is recorded
// dirty and nothing of it is there. The next migration applies it, and
// the ones after.
func TestAFirstMigrationFoundDirtyIsAppliedAgain(t *testing.T) {
	t.Parallel()
	db, schema := probeSchema(t)
	ctx := context.Background()
	table := pgx.Identifier{schema, "schema_migrations"}.Sanitize()
	if _, err := db.Pool.Exec(ctx, `CREATE SCHEMA `+pgx.Identifier{schema}.Sanitize()+`;
CREATE TABLE `+table+` (version bigint NOT NULL PRIMARY KEY, dirty boolean NOT NULL);
INSERT INTO `+table+` VALUES (1, true)`); err != nil {
		t.Fatal(err)
	}
	v, err := tenants.NewTenants(db, dbtest.Discard).Migrate(ctx, schema, threeTables(0))
	if err != nil || v != 3 {
		t.Fatalf("migrate: version %d, %v; want 3 and no error", v, err)
	}
	threeTablesMade(t, db, schema)
}

// TestAMigrationTheDataRefusesIsTheReleasesFault: a migration the schema's
// data refuses (a unique index over duplicates) fails the tenant
// operation as the server's error, a 500 with the failure logged, not as
// the caller's 409 or 422; it is not tried again, and its version is left
// dirty, the schema at the migration before it.
func TestAMigrationTheDataRefusesIsTheReleasesFault(t *testing.T) {
	t.Parallel()
	db, schema := probeSchema(t)
	ctx := context.Background()
	fsys := fstest.MapFS{
		"000001_twice.up.sql":   {Data: []byte("CREATE TABLE twice (x int); INSERT INTO twice VALUES (1), (1);")},
		"000001_twice.down.sql": {Data: []byte("DROP TABLE twice;")},
		"000002_once.up.sql":    {Data: []byte("CREATE UNIQUE INDEX once ON twice (x);")},
		"000002_once.down.sql":  {Data: []byte("DROP INDEX once;")},
	}
	_, err := tenants.NewTenants(db, dbtest.Discard).Migrate(ctx, schema, fsys)
	if err == nil || !strings.Contains(err.Error(), "could not create unique index") {
		t.Fatalf("migrate: %v; want the unique index's failure", err)
	}
	if e, ok := errs.As(err); ok {
		t.Errorf("migrate: %v is a %d for the caller (%s); want the server's error", err, e.Kind, e.Code)
	}
	if got, want := recorded(t, db, schema), (migrationRecord{2, true}); got != want {
		t.Errorf("record: %+v, want %+v", got, want)
	}
}

// probeSchema is the shared test database and the name of a schema of t's
// own in it, dropped when t ends.
func probeSchema(t *testing.T) (*postgres.DB, string) {
	db := dbtest.OpenDB(t, pgtest.Shared(t))
	schema := "migrate_" + pgtest.RandomSuffix()
	t.Cleanup(func() {
		if _, err := db.Pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema: %v", err)
		}
	})
	return db, schema
}

// migrationRecord is a schema's record of its migration.
type migrationRecord struct {
	Version int64
	Dirty   bool
}

// holdAdvisory takes the session-level advisory lock key on a session of
// its own, released with the test.
func holdAdvisory(t *testing.T, db *postgres.DB, key int64) *pgxpool.Conn {
	t.Helper()
	conn, err := db.Pool.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Release)
	if _, err := conn.Exec(context.Background(), `SELECT pg_advisory_lock($1)`, key); err != nil {
		t.Fatal(err)
	}
	return conn
}

// migrated is what a call of Migrate returned.
type migrated struct {
	version uint
	err     error
}

// migrateInBackground migrates schema to fsys's last migration on a
// goroutine of its own; the channel gives what the call returned.
func migrateInBackground(db *postgres.DB, schema string, fsys fstest.MapFS) <-chan migrated {
	done := make(chan migrated, 1)
	go func() {
		v, err := tenants.NewTenants(db, dbtest.Discard).Migrate(context.Background(), schema, fsys)
		done <- migrated{v, err}
	}()
	return done
}

// waitsForAdvisory waits until a migrating session waits for the advisory
// lock key, and gives that session's process id.
func waitsForAdvisory(t *testing.T, db *postgres.DB, key int64, who string) int32 {
	t.Helper()
	var pid int32
	dbtest.Eventually(t, who+" waits for the advisory lock", func() bool {
		err := db.Pool.QueryRow(context.Background(), `SELECT pid FROM pg_stat_activity
WHERE application_name = $1 AND wait_event = 'advisory' AND query LIKE '%' || $2 || '%'`,
			tenants.MigrateSessionName, fmt.Sprint(key)).Scan(&pid)
		return err == nil
	})
	return pid
}

// recorded reads schema's record of its migration.
func recorded(t *testing.T, db *postgres.DB, schema string) migrationRecord {
	t.Helper()
	var r migrationRecord
	if err := db.Pool.QueryRow(context.Background(),
		`SELECT version, dirty FROM `+pgx.Identifier{schema, "schema_migrations"}.Sanitize()).Scan(&r.Version, &r.Dirty); err != nil {
		t.Fatal(err)
	}
	return r
}

// threeTables are migrations 1 to 3, each making a table: one, two and
// three. The second waits for the advisory lock key as it ends, and ends
// with a comment without a line break; the third has no semicolon.
func threeTables(key int64) fstest.MapFS {
	fsys := fstest.MapFS{
		"000001_one.up.sql":   {Data: []byte("CREATE TABLE one (id int);\n")},
		"000002_two.up.sql":   {Data: []byte(fmt.Sprintf("CREATE TABLE two (id int);\nSELECT pg_advisory_xact_lock(%d);\n-- the end", key))},
		"000003_three.up.sql": {Data: []byte("CREATE TABLE three (id int)")},
	}
	for v, name := range []string{"one", "two", "three"} {
		fsys[fmt.Sprintf("%06d_%s.down.sql", v+1, name)] = &fstest.MapFile{Data: []byte("DROP TABLE " + name + ";")}
	}
	return fsys
}

// threeTablesMade checks that schema holds threeTables' tables and
// records migration 3, clean.
func threeTablesMade(t *testing.T, db *postgres.DB, schema string) {
	t.Helper()
	ctx := context.Background()
	if got, want := recorded(t, db, schema), (migrationRecord{3, false}); got != want {
		t.Errorf("record after: %+v, want %+v", got, want)
	}
	var tables int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = $1 AND tablename IN ('one', 'two', 'three')`,
		schema).Scan(&tables); err != nil || tables != 3 {
		t.Errorf("tables one, two and three: %d of them (%v), want 3", tables, err)
	}
}
