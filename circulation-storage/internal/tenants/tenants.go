// Package tenants keeps the tenants of circulation-storage on PostgreSQL:
// enabling one (migrating the shared tables, adopting a schema of an
// earlier release, creating its views, loading what its loaders load),
// whether it is enabled, its jobs, and purging it. The gate rows that say
// a tenant has requests or block limits are package postgres's (gate.go).
package tenants

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
	"github.com/checkoutlock/schemas/locksettings"

	"github.com/cenkalti/backoff/v4"
	"github.com/google/uuid"
	"github.com/hashicorp/golang-lru/v2/expirable"
	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	storage "github.com/checkoutlock/circulation-storage"
)

// Tenants implements storage.TenantService.
type Tenants struct {
	db     *postgres.DB
	logger *slog.Logger
	// loaders run, in order, inside the job's transaction after migrating.
	loaders []Loader
	// enabled remembers, for enabledFor, the tenants found enabled.
	enabled *expirable.LRU[storage.Tenant, struct{}]
	// schema is what this instance knows of the shared schema's
	// migration (schemaCurrent).
	schema schemaState
}

// schemaState is whether the shared schema has every migration this
// release needs: once it has, it always will (no release takes one back);
// until then it is asked again at most every schemaAskEvery.
type schemaState struct {
	mu      sync.Mutex
	current bool
	asked   time.Time
	behind  error
}

// schemaAskEvery is how often a storage whose shared schema is behind asks
// again, while it answers every call of a tenant's data SCHEMA_BEHIND.
const schemaAskEvery = time.Second

// Loader loads data into a freshly enabled tenant when the tenant
// attributes ask for it (loadReference, loadSample). It runs inside the job's
// transaction and must be idempotent: loading twice changes nothing.
type Loader func(ctx context.Context, tx pgx.Tx, t storage.Tenant, attrs storage.TenantAttributes) (messages []string, err error)

var _ storage.TenantService = (*Tenants)(nil)

// Enabled tenants are remembered for enabledFor, at most this many. A
// purge is announced to every instance (PurgeChannel), which forgets the
// tenant at once (Forget); enabledFor bounds how long one that missed the
// announcement remembers it.
const (
	enabledCacheSize = 10000
	enabledFor       = time.Minute
)

// NewTenants returns the tenant service.
func NewTenants(db *postgres.DB, logger *slog.Logger, loaders ...Loader) *Tenants {
	return &Tenants{db: db, logger: logger, loaders: loaders,
		enabled: expirable.NewLRU[storage.Tenant, struct{}](enabledCacheSize, nil, enabledFor)}
}

// tenantLockSQL serialises Init and Purge of one tenant across every instance
// of the service. The lock is transaction-scoped, so it cannot outlive a
// broken connection.
const tenantLockSQL = `SELECT pg_advisory_xact_lock(hashtextextended('circulation-storage tenant ' || $1, 0))`

// enableSQL registers a tenant, or records its upgrade. Parameters: $1 the
// tenant, $2 module_to.
var enableSQL = postgres.WithTables(`
INSERT INTO %s AS t (id, module_to) VALUES ($1, nullif($2, ''))
ON CONFLICT (id) DO UPDATE SET module_to = coalesce(excluded.module_to, t.module_to)`, postgres.TableTenant)

// conditionsSQL gives a tenant FOLIO's patron block conditions, each
// blocking nothing, as mod-patron-blocks does when it is enabled; a
// condition the tenant has is left as it is. Arguments: @tenant, and
// @ids, @names, @types the conditions' ids, names and value types.
var conditionsSQL = postgres.WithTables(`
INSERT INTO %s (tenant_id, id, jsonb)
SELECT @tenant, c.id, jsonb_build_object('id', c.id::text, 'name', c.name, 'blockBorrowing', false, 'blockRenewals', false,
                                    'blockRequests', false, 'valueType', c.value_type, 'message', '')
  FROM unnest(@ids::uuid[], @names::text[], @types::text[]) AS c(id, name, value_type)
ON CONFLICT (tenant_id, id) DO NOTHING`, postgres.TableBlockCondition)

// blockConditions is storage.PatronBlockConditionSet as conditionsSQL's
// parameters.
func blockConditions() (ids, names, types []string) {
	for _, c := range storage.PatronBlockConditionSet {
		ids, names, types = append(ids, c.ID), append(names, c.Name), append(types, c.ValueType)
	}
	return ids, names, types
}

// Init implements storage.TenantService: the shared schema is brought to
// its last migration (once for all tenants), the tenant is registered,
// its rows in a schema of the earlier schema-per-tenant layout are moved
// into the shared tables, FOLIO's schema for the tenant holds views of
// its rows, and the data the attributes ask for is loaded.
func (s *Tenants) Init(ctx context.Context, t storage.Tenant, attrs storage.TenantAttributes) (storage.TenantJob, error) {
	job := storage.TenantJob{ID: uuid.NewString(), Tenant: t, Attributes: attrs, Complete: true, Messages: []string{}}
	version, err := s.migrateShared(ctx)
	if err != nil {
		return storage.TenantJob{}, err
	}
	job.Messages = append(job.Messages, "schema "+postgres.SharedSchema+" at migration "+strconv.FormatUint(uint64(version), 10))
	legacy, err := s.tenantSchemaTables(ctx, t)
	if err != nil {
		return storage.TenantJob{}, err
	}
	if legacy {
		// Bring the old layout to its last version first, so that
		// adopting it reads one known shape.
		v, err := s.MigrateTenantSchema(ctx, t)
		if err != nil {
			return storage.TenantJob{}, err
		}
		job.Messages = append(job.Messages, "schema "+t.Schema()+" at migration "+strconv.FormatUint(uint64(v), 10)+
			" of the schema-per-tenant layout")
	}
	err = s.db.InTx(ctx, t, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, tenantLockSQL, string(t)); err != nil {
			return postgres.Interpret(err, t)
		}
		if _, err := tx.Exec(ctx, enableSQL, string(t), attrs.ModuleTo); err != nil {
			return postgres.Interpret(err, t)
		}
		ids, names, types := blockConditions()
		if _, err := tx.Exec(ctx, conditionsSQL, pgx.StrictNamedArgs{"tenant": string(t), "ids": ids, "names": names, "types": types}); err != nil {
			return postgres.Interpret(err, t)
		}
		if legacy {
			msgs, err := adoptTenantSchema(ctx, tx, t)
			if err != nil {
				return err
			}
			job.Messages = append(job.Messages, msgs...)
		}
		if err := createViews(ctx, tx, t); err != nil {
			return err
		}
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
			postgres.WithTables(`INSERT INTO %s (tenant_id, id, tenant_attributes, complete, messages)
VALUES (@tenant, @id, @attributes, true, @messages)`, postgres.TableTenantJob),
			pgx.StrictNamedArgs{"tenant": string(t), "id": job.ID, "attributes": attrsJSON, "messages": messagesJSON})
		return postgres.Interpret(err, t)
	})
	if err != nil {
		return storage.TenantJob{}, err
	}
	// The lock settings entries written before the shared schema learned
	// to keep what they say decoded (migration 12), or by an earlier
	// release, of every tenant.
	if n, err := DecodeLockFeatures(ctx, s.db); err != nil {
		return storage.TenantJob{}, err
	} else if n > 0 {
		s.logger.InfoContext(ctx, "lock settings entries decoded", slog.Int("entries", n))
	}
	s.logger.InfoContext(ctx, "tenant initialised", slog.String("tenant", string(t)), slog.Any("messages", job.Messages))
	return job, nil
}

// Enabled implements storage.TenantService. A tenant found enabled is
// remembered for enabledFor, so that the common request asks the database
// nothing; a purge on another instance is forgotten when its announcement
// arrives (Forget), or at the latest after enabledFor, and in the meantime
// no durable record can be written for the purged tenant (their tables
// refer to the tenant's row). A tenant not found is asked again every
// time: one enabled a moment ago is served at once.
func (s *Tenants) Enabled(ctx context.Context, t storage.Tenant) (bool, error) {
	if _, ok := s.enabled.Get(t); ok {
		return true, nil
	}
	if err := s.schemaCurrent(ctx); err != nil {
		return false, err
	}
	var enabled bool
	err := s.db.Pool.QueryRow(ctx, postgres.WithTables(`SELECT EXISTS (SELECT 1 FROM %s WHERE id = $1)`, postgres.TableTenant), string(t)).Scan(&enabled)
	if err != nil {
		if postgres.TablesMissing(err) {
			return false, nil // no shared schema yet: no tenant at all
		}
		return false, postgres.Interpret(err, t)
	}
	if enabled {
		s.enabled.Add(t, struct{}{})
	}
	return enabled, nil
}

// schemaCurrent answers nil when the shared schema has every migration
// this release runs on (sharedRecord.current), or none at all (no tenant is
// enabled yet: the tenant is refused as not initialized); else a 503
// SCHEMA_BEHIND naming the migration it is at and the one this release
// needs. A storage started before its tenants are upgraded (a rolling
// upgrade's new instance) answers that, not a failed statement, until an
// upgrade on any instance brings the schema on.
func (s *Tenants) schemaCurrent(ctx context.Context) error {
	st := &s.schema
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.current {
		return nil
	}
	if time.Since(st.asked) < schemaAskEvery && st.behind != nil {
		return st.behind
	}
	r, err := s.sharedMigration(ctx)
	if errors.Is(err, pgx.ErrNoRows) || postgres.TablesMissing(err) {
		return nil // no shared schema yet: nothing is enabled
	}
	if err != nil {
		return postgres.Interpret(err, "")
	}
	if r.current() {
		st.current, st.behind = true, nil
		return nil
	}
	st.asked = time.Now()
	have := r.applied()
	e := errs.Errorf(errs.KindUnavailable, schemas.CodeSchemaBehind,
		"The database's schema is at migration %d%s; this circulation-storage needs migration %d: upgrade the tenant "+
			"(POST /_/tenant with module_from and module_to, docs/operations.md) and this instance serves it",
		have, map[bool]string{true: fmt.Sprintf(" (migration %d is being applied, or failed and was rolled back)", r.version)}[r.dirty], latestShared).
		With("schemaVersion", strconv.FormatInt(have, 10)).With("needs", strconv.FormatUint(uint64(latestShared), 10))
	e.RetryAfter = 5 * time.Second
	st.behind = e
	return e
}

// Forget forgets that t was enabled: the next request asks the database.
// The listener calls it for each purge announced. A purged tenant's gate
// row is gone too (gate.go).
func (s *Tenants) Forget(t storage.Tenant) {
	s.enabled.Remove(t)
	s.db.Gates.Forget(t)
}

// ForgetAll forgets every tenant found enabled, and every gate row met:
// the listener calls it when it listens again, after a time in which
// announcements may have been missed.
func (s *Tenants) ForgetAll() {
	s.enabled.Purge()
	s.db.Gates.ForgetAll()
}

// tenantSchemaTables says whether t's FOLIO-named schema holds tables of
// the schema-per-tenant layout (an earlier release's), rather than this
// layout's views.
func (s *Tenants) tenantSchemaTables(ctx context.Context, t storage.Tenant) (bool, error) {
	var legacy bool
	err := s.db.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND c.relname = 'check_out_lock' AND c.relkind = 'r')`, t.Schema()).Scan(&legacy)
	return legacy, postgres.Interpret(err, t)
}

// adoptSQL moves a tenant's rows from its schema of the schema-per-tenant
// layout (the statements' fmt argument, the schema's quoted name; the
// layout's last version) into the shared tables (%[2]s…, in the order of
// the list), tagged with the tenant ($1). Identity columns (the history's
// and the settings audit's ids) are numbered anew, in their old order.
var adoptSQL = []struct {
	table postgres.TableName
	sql   string
}{
	{postgres.TablePatronGroup, `INSERT INTO %[2]s (tenant_id, id, jsonb) SELECT $1, id, jsonb FROM %[1]s.patron_group`},
	{postgres.TableMaterialType, `INSERT INTO %[2]s (tenant_id, id, jsonb) SELECT $1, id, jsonb FROM %[1]s.material_type`},
	{postgres.TableLoanType, `INSERT INTO %[2]s (tenant_id, id, jsonb) SELECT $1, id, jsonb FROM %[1]s.loan_type`},
	{postgres.TableLoanPolicy, `INSERT INTO %[2]s (tenant_id, id, jsonb) SELECT $1, id, jsonb FROM %[1]s.loan_policy`},
	{postgres.TablePatron, `INSERT INTO %[2]s (tenant_id, id, jsonb) SELECT $1, id, jsonb FROM %[1]s.patron`},
	{postgres.TableItem, `INSERT INTO %[2]s (tenant_id, id, jsonb) SELECT $1, id, jsonb FROM %[1]s.item`},
	{postgres.TableLoan, `INSERT INTO %[2]s (tenant_id, id, jsonb) SELECT $1, id, jsonb FROM %[1]s.loan`},
	{postgres.TableCirculationRules, `INSERT INTO %[2]s (tenant_id, fallback_loan_policy_id) SELECT $1, fallback_loan_policy_id FROM %[1]s.circulation_rules`},
	{postgres.TableCirculationRule, `INSERT INTO %[2]s (tenant_id, position, patron_group_id, material_type_id, loan_type_id, loan_policy_id)
		SELECT $1, position, patron_group_id, material_type_id, loan_type_id, loan_policy_id FROM %[1]s.circulation_rule`},
	{postgres.TableSetting, `INSERT INTO %[2]s (tenant_id, id, jsonb) SELECT $1, id, jsonb FROM %[1]s.setting`},
	{postgres.TableSettingChange, `INSERT INTO %[2]s (tenant_id, changed_at, setting_id, scope, key, operation, value, changed_by, changed_by_module)
		SELECT $1, changed_at, setting_id, scope, key, operation, value, changed_by, changed_by_module FROM %[1]s.setting_change ORDER BY id`},
	{postgres.TableLock, `INSERT INTO %[2]s (tenant_id, id, user_id, creation_date, expires_at, ttl_ms, holder, previous)
		SELECT $1, id, user_id, creation_date, expires_at, ttl_ms, holder, previous FROM %[1]s.check_out_lock`},
	{postgres.TableLockWaiter, `INSERT INTO %[2]s (tenant_id, user_id, expires_at) SELECT $1, user_id, expires_at FROM %[1]s.check_out_lock_waiter`},
	{postgres.TableLockEvent, `INSERT INTO %[2]s (tenant_id, occurred_at, type, user_id, lock_id, holder, by_whom, waited_ms)
		SELECT $1, occurred_at, type, user_id, lock_id, holder, by_whom, waited_ms FROM %[1]s.check_out_lock_event ORDER BY id`},
	{postgres.TableTenantJob, `INSERT INTO %[2]s (tenant_id, id, tenant_attributes, complete, error, messages, created_at)
		SELECT $1, id, tenant_attributes, complete, error, messages, created_at FROM %[1]s.tenant_job`},
}

// adoptTenantSchema moves t's rows from its schema of the schema-per-tenant
// layout into the shared tables and drops the old tables, in the
// tenant's Init transaction: the move is all or nothing.
func adoptTenantSchema(ctx context.Context, tx pgx.Tx, t storage.Tenant) ([]string, error) {
	schema := pgx.Identifier{t.Schema()}.Sanitize()
	moved := 0
	for _, a := range adoptSQL {
		tag, err := tx.Exec(ctx, fmt.Sprintf(a.sql, schema, postgres.Table(a.table)), string(t))
		if err != nil {
			return nil, fmt.Errorf("move %s.%s: %w", t.Schema(), a.table, postgres.Interpret(err, t))
		}
		moved += int(tag.RowsAffected())
	}
	if _, err := tx.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
		return nil, postgres.Interpret(err, t)
	}
	return []string{"schema-per-tenant layout: " + strconv.Itoa(moved) + " rows moved into " + postgres.SharedSchema}, nil
}

// createViews gives t the schema FOLIO names for it, holding a view of
// its rows in each shared table (without tenant_id, whose value the view
// supplies on insert), for operators, reports and tools that read a
// tenant's tables by FOLIO's names. The service itself never reads them.
// A view is replaced, so an upgrade that adds columns shows them.
func createViews(ctx context.Context, tx pgx.Tx, t storage.Tenant) error {
	schema := pgx.Identifier{t.Schema()}.Sanitize()
	if _, err := tx.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+schema); err != nil {
		return postgres.Interpret(err, t)
	}
	var literal string
	if err := tx.QueryRow(ctx, `SELECT quote_literal($1::text)`, string(t)).Scan(&literal); err != nil {
		return postgres.Interpret(err, t)
	}
	for _, name := range postgres.TenantTables {
		if name == postgres.TableTenantGate || name == postgres.TableWriteLog || name == postgres.TableKioskPresence {
			// Storage's own, not FOLIO tables: no view to write them through.
			continue
		}
		view := schema + "." + pgx.Identifier{string(name)}.Sanitize()
		if _, err := tx.Exec(ctx, "CREATE OR REPLACE VIEW "+view+" AS SELECT * FROM "+postgres.Table(name)+" WHERE tenant_id = "+literal); err != nil {
			return postgres.Interpret(err, t)
		}
		if _, err := tx.Exec(ctx, "ALTER VIEW "+view+" ALTER COLUMN tenant_id SET DEFAULT "+literal); err != nil {
			return postgres.Interpret(err, t)
		}
	}
	return nil
}

// purgeAttempts bounds the attempts of a purge, which is tried again,
// after a short wait, when a write committed a row referring to one the
// purge had deleted, or a write still running when the purge began locked
// rows in the other order (deadlock), or its session was lost
// (postgres.TryAgainAtOnce): a purge that had committed all the same
// deletes nothing the second time.
const purgeAttempts = 5

// Purge implements storage.TenantService: every row of the tenant is
// deleted, then the tenant, and its schema of views. A write of the tenant
// that commits while the purge runs (a loan, after the purge deleted the
// loans and before it deletes the items) makes the purge fail on the
// reference; it is tried again, and a write after it finds no patron,
// item or tenant to refer to.
func (s *Tenants) Purge(ctx context.Context, t storage.Tenant) error {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 20 * time.Millisecond
	err := backoff.Retry(func() error {
		err := s.purgeOnce(ctx, t)
		var pgErr *pgconn.PgError
		if err != nil && !postgres.TryAgainAtOnce(err) && !(errors.As(err, &pgErr) && pgErr.Code == pgerrcode.ForeignKeyViolation) {
			return backoff.Permanent(err)
		}
		return err
	}, backoff.WithContext(backoff.WithMaxRetries(b, purgeAttempts-1), ctx))
	if err != nil {
		return postgres.Interpret(err, t)
	}
	s.Forget(t)
	s.logger.InfoContext(ctx, "tenant purged", slog.String("tenant", string(t)))
	return nil
}

// purgeOnce is one attempt of Purge; a reference that fails it is
// returned as the driver's error.
func (s *Tenants) purgeOnce(ctx context.Context, t storage.Tenant) error {
	return s.db.InTx(ctx, t, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, tenantLockSQL, string(t)); err != nil {
			return postgres.Interpret(err, t)
		}
		// A purge announces nothing: the tenant's events go with it. Its
		// loans go before its loan policies, which it deletes without
		// holding every tenant's loan writes (migration 14).
		for _, set := range []string{`SET LOCAL checkoutlock.outbox = 'off'`, `SET LOCAL checkoutlock.purge = 'on'`} {
			if _, err := tx.Exec(ctx, set); err != nil {
				return postgres.Interpret(err, t)
			}
		}
		var shared bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, postgres.SharedSchema).Scan(&shared); err != nil {
			return postgres.Interpret(err, t)
		}
		if shared {
			for _, name := range append(postgres.TenantTables, postgres.TableTenant) {
				where := []string{"tenant_id = $1"}
				switch name {
				case postgres.TableTenant:
					where = []string{"id = $1"}
				case postgres.TableOutboxCommit:
					// Its indexes hold numbered and unnumbered commits
					// apart (migration 10): one statement for each, each
					// through its index.
					where = []string{"tenant_id = $1 AND seq IS NOT NULL", "seq IS NULL AND tenant_id = $1"}
				}
				for _, w := range where {
					if _, err := tx.Exec(ctx, postgres.WithTables(`DELETE FROM %s WHERE `+w, name), string(t)); err != nil {
						return err
					}
				}
			}
		}
		if _, err := tx.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{t.Schema()}.Sanitize()+" CASCADE"); err != nil {
			return postgres.Interpret(err, t)
		}
		// Every instance forgets the tenant when this commits.
		_, err := tx.Exec(ctx, `SELECT pg_notify('`+postgres.PurgeChannel+`', $1)`, string(t))
		return postgres.Interpret(err, t)
	})
}

// Job implements storage.TenantService.
func (s *Tenants) Job(ctx context.Context, t storage.Tenant, id string) (storage.TenantJob, error) {
	job := storage.TenantJob{ID: id, Tenant: t}
	var attrsJSON, messagesJSON []byte
	var jobErr sql.NullString
	err := s.db.Pool.QueryRow(ctx,
		postgres.WithTables(`SELECT tenant_attributes, complete, error, messages FROM %s WHERE tenant_id = $2 AND id = $1`, postgres.TableTenantJob), id, string(t)).
		Scan(&attrsJSON, &job.Complete, &jobErr, &messagesJSON)
	if errors.Is(err, pgx.ErrNoRows) {
		return storage.TenantJob{}, errs.NotFound("Tenant job", id)
	}
	if err != nil {
		return storage.TenantJob{}, postgres.Interpret(err, t)
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
	tag, err := s.db.Pool.Exec(ctx, postgres.WithTables(`DELETE FROM %s WHERE tenant_id = $2 AND id = $1`, postgres.TableTenantJob), id, string(t))
	if err != nil {
		return postgres.Interpret(err, t)
	}
	if tag.RowsAffected() == 0 {
		return errs.NotFound("Tenant job", id)
	}
	return nil
}

// undecodedSQL lists, across tenants, the lock settings entries whose
// feature is not decoded yet (written before migration 12, or by an
// earlier release).
var undecodedSQL = postgres.WithTables(`SELECT tenant_id, id::text, jsonb FROM %s
 WHERE scope = '`+locksettings.Scope+`' AND key = '`+locksettings.Key+`' AND lock_feature IS NULL`, postgres.TableSetting)

// DecodeLockFeatures decodes the lock settings entries of every tenant that
// are not decoded yet, and says how many it decoded. Storage runs it at
// start-up and with every tenant operation; until an entry is decoded, a
// check-out's write takes the environment's CHECKOUT_LOCK_FEATURE_ENABLED
// for it. Running it twice, or on two instances at once, decodes alike.
func DecodeLockFeatures(ctx context.Context, db *postgres.DB) (int, error) {
	rows, err := db.Pool.Query(ctx, undecodedSQL)
	if postgres.TablesMissing(err) {
		return 0, nil // no tenant yet, so no entry
	}
	if err != nil {
		return 0, postgres.Interpret(err, "")
	}
	type entry struct {
		tenant, id string
		doc        json.RawMessage
	}
	var found []entry
	for rows.Next() {
		var e entry
		if err := rows.Scan(&e.tenant, &e.id, &e.doc); err != nil {
			rows.Close()
			return 0, postgres.Interpret(err, "")
		}
		found = append(found, e)
	}
	if err := rows.Err(); err != nil {
		return 0, postgres.Interpret(err, "")
	}
	for _, e := range found {
		// Only a row still as read is decoded: one written meanwhile is
		// its writer's to decode.
		if _, err := db.Pool.Exec(ctx, postgres.WithTables(`UPDATE %s SET lock_feature = @feature
 WHERE tenant_id = @tenant AND id = @id AND jsonb = @read`, postgres.TableSetting),
			pgx.StrictNamedArgs{"tenant": e.tenant, "id": e.id, "feature": postgres.LockFeature(e.doc), "read": e.doc}); err != nil {
			return 0, postgres.Interpret(err, storage.Tenant(e.tenant))
		}
	}
	return len(found), nil
}
