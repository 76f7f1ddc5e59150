package postgres

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/checkoutlock/schemas/errs"

	"github.com/golang-migrate/migrate/v4"
	migratepgx "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/migrations"
)

// Tenants implements storage.TenantService.
type Tenants struct {
	db     *DB
	logger *slog.Logger
	// loaders run, in order, inside the job's transaction after migrating.
	loaders []Loader
}

// Loader loads data into a freshly migrated tenant schema when the tenant
// attributes ask for it (loadReference, loadSample). It runs inside the job's
// transaction and must be idempotent: loading twice changes nothing.
type Loader func(ctx context.Context, tx pgx.Tx, t storage.Tenant, attrs storage.TenantAttributes) (messages []string, err error)

var _ storage.TenantService = (*Tenants)(nil)

// NewTenants returns the tenant service.
func NewTenants(db *DB, logger *slog.Logger, loaders ...Loader) *Tenants {
	return &Tenants{db: db, logger: logger, loaders: loaders}
}

// tenantLockSQL serialises Init and Purge of one tenant across every instance
// of the service: two instances enabling a tenant at once would otherwise race
// on CREATE SCHEMA. The lock is transaction-scoped, so it cannot outlive a
// broken connection.
const tenantLockSQL = `SELECT pg_advisory_xact_lock(hashtextextended('circulation-storage tenant ' || $1, 0))`

// Init implements storage.TenantService.
func (s *Tenants) Init(ctx context.Context, t storage.Tenant, attrs storage.TenantAttributes) (storage.TenantJob, error) {
	job := storage.TenantJob{ID: uuid.NewString(), Tenant: t, Attributes: attrs, Complete: true, Messages: []string{}}
	err := s.db.inTx(ctx, t, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, tenantLockSQL, string(t)); err != nil {
			return interpret(err, t)
		}
		version, err := s.migrate(ctx, t)
		if err != nil {
			return err
		}
		job.Messages = append(job.Messages, "schema "+t.Schema()+" at migration "+strconv.FormatUint(uint64(version), 10))
		for _, load := range s.loaders {
			msgs, err := load(ctx, tx, t, attrs)
			if err != nil {
				return err
			}
			job.Messages = append(job.Messages, msgs...)
		}
		attrsJSON, err := json.Marshal(attrs)
		if err != nil {
			return err
		}
		messagesJSON, err := json.Marshal(job.Messages)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx,
			withTables(`INSERT INTO %s (id, tenant_attributes, complete, messages) VALUES ($1, $2, true, $3)`, t, "tenant_job"),
			job.ID, attrsJSON, messagesJSON)
		return interpret(err, t)
	})
	if err != nil {
		return storage.TenantJob{}, err
	}
	s.logger.InfoContext(ctx, "tenant initialised", slog.String("schema", t.Schema()), slog.Any("messages", job.Messages))
	return job, nil
}

// migrate creates the tenant's schema if needed and applies every pending
// migration inside it, returning the schema's migration version. It uses its
// own connection whose search_path is the tenant's schema, because the
// migration files name their tables without a schema.
func (s *Tenants) migrate(ctx context.Context, t storage.Tenant) (uint, error) {
	connCfg := s.db.pool.Config().ConnConfig.Copy()
	connCfg.RuntimeParams["search_path"] = pgx.Identifier{t.Schema()}.Sanitize()
	sqlDB := stdlib.OpenDB(*connCfg)
	defer sqlDB.Close()
	if _, err := sqlDB.ExecContext(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{t.Schema()}.Sanitize()); err != nil {
		return 0, interpret(err, t)
	}
	driver, err := migratepgx.WithInstance(sqlDB, &migratepgx.Config{})
	if err != nil {
		return 0, fmt.Errorf("migrate %s: %w", t.Schema(), interpret(err, t))
	}
	src, err := iofs.New(migrations.FS, ".")
	if err != nil {
		return 0, fmt.Errorf("read migrations: %w", err)
	}
	m, err := migrate.NewWithInstance("iofs", src, "pgx5", driver)
	if err != nil {
		return 0, fmt.Errorf("migrate %s: %w", t.Schema(), err)
	}
	defer m.Close()
	if err := m.Up(); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return 0, fmt.Errorf("migrate %s: %w", t.Schema(), interpret(err, t))
	}
	version, _, err := m.Version()
	if err != nil {
		return 0, fmt.Errorf("migrate %s: %w", t.Schema(), err)
	}
	return version, nil
}

// Purge implements storage.TenantService.
func (s *Tenants) Purge(ctx context.Context, t storage.Tenant) error {
	err := s.db.inTx(ctx, t, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, tenantLockSQL, string(t)); err != nil {
			return interpret(err, t)
		}
		_, err := tx.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{t.Schema()}.Sanitize()+" CASCADE")
		return interpret(err, t)
	})
	if err != nil {
		return err
	}
	s.logger.InfoContext(ctx, "tenant purged", slog.String("schema", t.Schema()))
	return nil
}

// Job implements storage.TenantService.
func (s *Tenants) Job(ctx context.Context, t storage.Tenant, id string) (storage.TenantJob, error) {
	job := storage.TenantJob{ID: id, Tenant: t}
	var attrsJSON, messagesJSON []byte
	var jobErr sql.NullString
	err := s.db.pool.QueryRow(ctx,
		withTables(`SELECT tenant_attributes, complete, error, messages FROM %s WHERE id = $1`, t, "tenant_job"), id).
		Scan(&attrsJSON, &job.Complete, &jobErr, &messagesJSON)
	if errors.Is(err, pgx.ErrNoRows) {
		return storage.TenantJob{}, errs.NotFound("Tenant job", id)
	}
	if err != nil {
		return storage.TenantJob{}, interpret(err, t)
	}
	job.Error = jobErr.String
	if err := json.Unmarshal(attrsJSON, &job.Attributes); err != nil {
		return storage.TenantJob{}, fmt.Errorf("decode tenant job %s: %w", id, err)
	}
	if err := json.Unmarshal(messagesJSON, &job.Messages); err != nil {
		return storage.TenantJob{}, fmt.Errorf("decode tenant job %s: %w", id, err)
	}
	return job, nil
}

// DeleteJob implements storage.TenantService.
func (s *Tenants) DeleteJob(ctx context.Context, t storage.Tenant, id string) error {
	tag, err := s.db.pool.Exec(ctx, withTables(`DELETE FROM %s WHERE id = $1`, t, "tenant_job"), id)
	if err != nil {
		return interpret(err, t)
	}
	if tag.RowsAffected() == 0 {
		return errs.NotFound("Tenant job", id)
	}
	return nil
}
