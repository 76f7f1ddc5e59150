// Package postgres is what circulation-storage's storage packages share on
// PostgreSQL with pgx: the pools (DB, Pool: single-row reads run again on a
// fresh connection when theirs was dead), transactions and writes whose
// outcome is final before they return (DB.InTx, DB.Write), the closed list
// of shared tables (TableName, Table, WithTables: the only thing ever
// formatted into SQL), the translation of driver errors to domain errors
// (Interpret, by SQLSTATE, never by message text), the services' options,
// pages of a list (Page), and the tenants' gate rows (gate.go). Every
// tenant's records live in one set of shared tables (SharedSchema), each
// row carrying its tenant's id, which every statement takes as an argument
// and names first in its conditions. The concerns built on it are packages
// locks, records, lending, accounts, outbox, tenants and sweeper; the
// statements that carry the lock's guarantees are package locksql's.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/circulation-storage/locksql"
	"github.com/checkoutlock/schemas"
)

// DB is the connection pools shared by every service of this package.
type DB struct {
	Pool *Pool
	// LockPool runs the statements that acquire and release locks, with
	// their own synchronous_commit (see Open); it is pool when that is on.
	LockPool *Pool
	// LeadPool holds the sessions a background job leads on (TryLead),
	// LeadConns of them: apart from the pools the job's work runs on, so
	// that a job holding its lead never waits for a connection its own
	// lead keeps from them (with a main pool of one, for ever).
	LeadPool *Pool
	// Gates is the tenants known to have a check-out gate (gate.go).
	Gates gates
}

// PoolConfig is how the pools connect.
type PoolConfig struct {
	// MaxConns bounds the main pool; the lock statements' pool, when
	// they have one, has half as many.
	MaxConns int32
	// Tracer, when not nil, is told of every statement (a span each, while
	// tracing is on: otelpgx).
	Tracer pgx.QueryTracer
	// MaxConnLifetime bounds how long a connection, and the server
	// process behind it, lives (pgxpool's default, one hour, when zero):
	// what a backend keeps (catalog and plan caches, prepared statements)
	// goes with it. Connections are
	// retired at up to a tenth later than that, so that not all of them
	// are made again at once.
	MaxConnLifetime time.Duration
	// LockCommit is PostgreSQL's synchronous_commit for the statements
	// that acquire and release locks, run on a pool of their own ("on",
	// or "" for the server's setting, shares the main pool). With "off"
	// they do not wait for the WAL flush (or a standby), which is most of
	// their cost; a lock row lost in a crash makes its holder's fenced
	// write refuse (LOCK_LOST), and the write, whose commit is durable,
	// flushes every lock statement before it.
	LockCommit string
	// NoOutbox records no events: the sessions run with
	// checkoutlock.outbox = 'off' (OUTBOX=off).
	NoOutbox bool
	// IdleInTransaction, when positive, is how long a session may sit in
	// a transaction without a statement before PostgreSQL ends it
	// (idle_in_transaction_session_timeout): an instance frozen in the
	// middle of a transaction (paused, hung) gives back the rows and
	// locks it holds, rather than stall every other instance's writes of
	// them. This service's transactions do not wait between statements,
	// so the request deadline is a safe bound; the one that does (the
	// notice sender's, while the mail server takes a notice's mail) sets
	// its own.
	IdleInTransaction time.Duration
	// Logger logs what PostgreSQL warns a session of (a stored date that
	// cannot be read, migration 15's stored_time); nil discards it.
	Logger *slog.Logger
}

// LeadConns is the size of DB.LeadPool: one session for each background
// job that leads (the sweeper's pass and the notices' round).
const LeadConns = 2

// Open creates the pools. It does not wait for the database: connections
// are made on demand, so the service starts (and reports not ready) while
// the database is down, and recovers by itself when it comes back.
func Open(ctx context.Context, connString string, cfg PoolConfig) (*DB, error) {
	return OpenWithDial(ctx, connString, cfg, nil)
}

// OpenWithDial is Open with the pools' connections made by dial, when set (tests
// cut connections through it).
func OpenWithDial(ctx context.Context, connString string, cfg PoolConfig, dial pgconn.DialFunc) (*DB, error) {
	main, err := openPool(ctx, connString, cfg, cfg.MaxConns, "circulation-storage", "", dial)
	if err != nil {
		return nil, err
	}
	lead, err := openPool(ctx, connString, cfg, LeadConns, "circulation-storage-lead", "", dial)
	if err != nil {
		main.Close()
		return nil, err
	}
	db := &DB{Pool: &Pool{Pool: main}, LeadPool: &Pool{Pool: lead}}
	db.LockPool = db.Pool
	if cfg.LockCommit != "" && cfg.LockCommit != "on" {
		// Lock statements are short: half the connections serve them.
		locks, err := openPool(ctx, connString, cfg, max(2, cfg.MaxConns/2), "circulation-storage-locks", cfg.LockCommit, dial)
		if err != nil {
			lead.Close()
			main.Close()
			return nil, err
		}
		db.LockPool = &Pool{Pool: locks}
	}
	return db, nil
}

// openPool creates one pool of maxConns connections as pc says, its
// sessions named name, with synchronous_commit set when commit is not
// empty, connecting through dial when it is set.
func openPool(ctx context.Context, connString string, pc PoolConfig, maxConns int32, name, commit string,
	dial pgconn.DialFunc) (*pgxpool.Pool, error) {
	lifetime, noOutbox := pc.MaxConnLifetime, pc.NoOutbox
	cfg, err := pgxpool.ParseConfig(connString)
	if err != nil {
		// The parse error may quote the connection string, password included.
		return nil, fmt.Errorf("parse database connection string: %w", Redact(err))
	}
	cfg.MaxConns = maxConns
	if lifetime > 0 {
		cfg.MaxConnLifetime = lifetime
		cfg.MaxConnLifetimeJitter = lifetime / 10
	}
	// Dead connections (database restarted, proxy cut) are noticed when a
	// query fails; a periodic check finds idle ones before a request does.
	cfg.HealthCheckPeriod = 5 * time.Second
	cfg.ConnConfig.ConnectTimeout = ConnectTimeout(cfg.ConnConfig.ConnectTimeout)
	if cfg.ConnConfig.RuntimeParams == nil {
		cfg.ConnConfig.RuntimeParams = map[string]string{}
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = name
	if pc.Tracer != nil {
		cfg.ConnConfig.Tracer = pc.Tracer
	}
	if pc.IdleInTransaction > 0 {
		cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = strconv.FormatInt(pc.IdleInTransaction.Milliseconds(), 10)
	}
	// Every statement names its tenant, and every table has an index for
	// what a statement looks for within a tenant: reading a whole table,
	// every tenant's rows, is never the plan. PostgreSQL would still
	// choose it for a table its statistics last saw nearly empty, as they
	// often see the lock tables (rows come and go by the thousand between
	// two analyses), and a prepared statement keeps that plan.
	cfg.ConnConfig.RuntimeParams["enable_seqscan"] = "off"
	// Every session works in UTC, whatever the server's or the role's
	// TimeZone: a timestamptz written out as text (to_char, a cast) reads
	// the same from every session, and dates are stored as the services
	// write them, in UTC.
	cfg.ConnConfig.RuntimeParams["TimeZone"] = "UTC"
	if commit != "" {
		cfg.ConnConfig.RuntimeParams["synchronous_commit"] = commit
	}
	if noOutbox {
		cfg.ConnConfig.RuntimeParams["checkoutlock.outbox"] = "off"
	}
	if logger := pc.Logger; logger != nil {
		cfg.ConnConfig.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
			level := slog.LevelDebug // a NOTICE: a migration's "drop cascades", say
			if n.Severity == "WARNING" {
				level = slog.LevelWarn
			}
			logger.Log(context.Background(), level, "postgres: "+n.Message, slog.String("severity", n.Severity), slog.String("sqlstate", n.Code))
		}
	}
	// A connection the server closed while it sat in the pool (its backend
	// terminated, the server restarted) is dropped before it is handed out,
	// so that no statement, a write's least of all, is sent on it.
	cfg.PrepareConn = func(_ context.Context, c *pgx.Conn) (bool, error) { return !closedByServer(c), nil }
	cfg.AfterConnect = afterConnect
	if dial != nil {
		cfg.ConnConfig.DialFunc = dial
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("create database pool: %w", Redact(err))
	}
	return pool, nil
}

// defaultConnectTimeout bounds a connection attempt to one host when the
// connection string names no connect_timeout.
const defaultConnectTimeout = 5 * time.Second

// ConnectTimeout is the connection string's connect_timeout, or the
// default. With several hosts (an HA cluster) it applies to each in turn,
// so a short one passes over an unreachable node quickly.
func ConnectTimeout(configured time.Duration) time.Duration {
	if configured > 0 {
		return configured
	}
	return defaultConnectTimeout
}

// Close closes every connection.
func (db *DB) Close() {
	if db.LockPool != db.Pool {
		db.LockPool.Close()
	}
	db.LeadPool.Close()
	db.Pool.Close()
}

// Ping checks that the database answers.
func (db *DB) Ping(ctx context.Context) error {
	if err := db.Pool.Ping(ctx); err != nil {
		return Interpret(err, "")
	}
	return nil
}

// Redact drops the text of a connection-string parse error, which can quote
// the password, keeping only that parsing failed.
func Redact(err error) error {
	var pe *pgconn.ParseConfigError
	if errors.As(err, &pe) {
		return errors.New("invalid connection string")
	}
	return err
}

// Querier is what both the pool and a transaction offer, so a query helper
// runs the same inside or outside a transaction.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// SharedSchema is the schema holding every tenant's records, one set of
// tables in which each row carries its tenant's id (tenant_id; see package
// migrations): every tenant's statements are the same text, prepared and
// planned once per connection, and a server process keeps one set of
// catalog entries, whatever the number of tenants.
const SharedSchema = locksql.Schema

// PurgeChannel is the notification channel on which every purge of a
// tenant is announced, by the purging transaction, with the tenant as the
// payload: each instance forgets at once that the tenant was enabled.
const PurgeChannel = "circulation_storage_tenant_purged"

// TableName is one of the shared tables: the closed list of identifiers
// this package formats into SQL (with table and WithTables). Nothing else
// is ever formatted into a statement: values, the tenant's id among them,
// go in as parameters.
type TableName string

// The shared tables (see package migrations).
const (
	TableTenant           TableName = "tenant"
	TableTenantJob        TableName = "tenant_job"
	TableLock             TableName = "check_out_lock"
	TableLockWaiter       TableName = "check_out_lock_waiter"
	TableLockEvent        TableName = "check_out_lock_event"
	TablePatronGroup      TableName = "patron_group"
	TableMaterialType     TableName = "material_type"
	TableLoanType         TableName = "loan_type"
	TablePatron           TableName = "patron"
	TableItem             TableName = "item"
	TableLoanPolicy       TableName = "loan_policy"
	TableRequestPolicy    TableName = "request_policy"
	TableLoan             TableName = "loan"
	TableCirculationRule  TableName = "circulation_rule"
	TableCirculationRules TableName = "circulation_rules"
	TableSetting          TableName = "setting"
	TableSettingChange    TableName = "setting_change"
	TableManualBlock      TableName = "manual_block"
	TableBlockCondition   TableName = "patron_block_condition"
	TableBlockLimit       TableName = "patron_block_limit"
	TableRequest          TableName = "request"
	TableAccount          TableName = "account"
	TableCredential       TableName = "account_credential"
	TableRefreshToken     TableName = "refresh_token"
	TableLoginSession     TableName = "login_session"
	TableLoginFailure     TableName = "login_failure"
	TableServicePoint     TableName = "service_point"
	TablePatronPin        TableName = "patron_pin"
	TableOutbox           TableName = "outbox"
	TableOutboxTenant     TableName = "outbox_tenant"
	TableOutboxCommit     TableName = "outbox_commit"
	TableTenantGate       TableName = "tenant_gate"
	TableWriteLog         TableName = "write_log"
	TableKioskPresence    TableName = "kiosk_presence"
	TableFeeFineOwner     TableName = "fee_fine_owner"
	TableFeeFineType      TableName = "fee_fine_type"
	TablePaymentMethod    TableName = "payment_method"
	TableOverduePolicy    TableName = "overdue_fine_policy"
	TableLostItemPolicy   TableName = "lost_item_fee_policy"
	TableFeeFineAccount   TableName = "fee_fine_account"
	TableFeeFineAction    TableName = "fee_fine_action"
	TableRuleFee          TableName = "circulation_rule_fee"
	TableRulesFee         TableName = "circulation_rules_fee"
	TableCalendar         TableName = "calendar"
	TableCalendarAssigned TableName = "calendar_assignment"
	TableNoticePolicy     TableName = "patron_notice_policy"
	TableNoticeTemplate   TableName = "notice_template"
	TableScheduledNotice  TableName = "scheduled_notice"
	TableNoticeChange     TableName = "notice_change"
	// TypeOutboxEvent is not a table but the composite type of an event
	// in outbox_commit's payload (migration 10), named as the tables are.
	TypeOutboxEvent TableName = "outbox_event"
	// funcStoredTime is migration 15's function reading a stored date
	// (NULL, with a warning, for one that cannot be read).
	funcStoredTime TableName = "stored_time"
	// FuncCalendarZone is migration 35's function naming a tenant's time
	// zone (its locale settings').
	FuncCalendarZone TableName = "calendar_zone"
)

// LastTime is SQL for the last instant a stored date may name
// (schemas.LatestDate): a date the database computes from a period (a
// hold shelf's) is held to it, as a due date is (schemas.DueDate), so
// that it is stored as one that can be read.
var LastTime = `'` + schemas.FormatTime(schemas.LatestDate()) + `'::timestamptz`

// StoredTime is SQL reading the stored date expr (text) of field, as
// stored_time reads it.
func StoredTime(expr, field string) string {
	return Table(funcStoredTime) + `(` + expr + `, '` + field + `')`
}

// Passed is SQL holding when the stored date expr (text) of field names
// a time before now: the one comparison of every expiry (a request's, a
// hold shelf's). The date is the client's, with any offset from -18:00
// to +18:00 and either case of its T and Z: its text sorts by the date as
// written, which is at most 18 hours ahead of the time it names, so every
// date passed is written on a day before the one after now and 18 hours,
// and an index on expr finds it among those; each is then read as the
// time it names.
func Passed(expr, field string) string {
	return expr + ` < to_char((now() AT TIME ZONE 'UTC') + interval '42 hours', 'YYYY-MM-DD') AND ` + StoredTime(expr, field) + ` < now()`
}

// GenericPlans is the setting (set_config, local to the transaction) under
// which every statement after it in its transaction, a trigger's too, runs
// by its generic plan (plan_cache_mode), the plan made once per connection
// and kept: the plan TestCheckOutPlansReadOnlyWhatTheyNeed explains. Without it PostgreSQL
// makes a prepared statement's first five plans for the values it is given
// (custom plans) before it weighs them against the generic one, so that a
// connection new to a statement plans it six times; for a check-out's read
// and write, some 20 ms each, paid while check-outs wait when the pool
// opens a connection under load. It is an expression: a statement's
// column, or its own statement (GenericPlansSQL).
const GenericPlans = `set_config('plan_cache_mode', 'force_generic_plan', true)`

// GenericPlansSQL is GenericPlans as a statement of its own.
const GenericPlansSQL = `SELECT ` + GenericPlans

// OutboxOn is SQL that holds unless the session records no events
// (checkoutlock.outbox = 'off': a purge, a bulk load, OUTBOX=off). With
// 'own' the transaction records its events itself, not through the
// triggers (a check-out's write).
const OutboxOn = `coalesce(current_setting('checkoutlock.outbox', true), '') <> 'off'`

// TenantTables are the tables holding a tenant's rows, in the order a
// purge deletes them (what refers to a row before the row).
var TenantTables = []TableName{
	TableOutbox, TableOutboxCommit, TableOutboxTenant, TableNoticeChange, TableScheduledNotice, TableTenantGate, TableWriteLog, TableKioskPresence, TableFeeFineAction, TableFeeFineAccount, TablePaymentMethod, TableFeeFineType, TableFeeFineOwner, TableCalendarAssigned, TableCalendar, TableServicePoint, TableLoginFailure, TableRefreshToken, TableLoginSession, TableCredential, TableAccount, TableRequest, TableManualBlock, TableBlockLimit, TableBlockCondition, TableLoan, TableRuleFee, TableRulesFee, TableCirculationRule, TableCirculationRules, TableNoticePolicy, TableNoticeTemplate, TableOverduePolicy, TableLostItemPolicy, TableRequestPolicy, TableItem, TablePatronPin, TablePatron, TableLoanPolicy, TableLoanType,
	TableMaterialType, TablePatronGroup, TableSettingChange, TableSetting, TableLockEvent, TableLockWaiter, TableLock,
	TableTenantJob,
}

// Table is the quoted, schema-qualified name of one of the shared tables.
func Table(name TableName) string {
	return pgx.Identifier{SharedSchema, string(name)}.Sanitize()
}

// WithTables is stmt with the shared tables named in its fmt verbs (%s,
// or %[n]s), in order: identifier formatting only, from the closed list of
// TableName.
func WithTables(stmt string, names ...TableName) string {
	ids := make([]any, len(names))
	for i, name := range names {
		ids[i] = Table(name)
	}
	return fmt.Sprintf(stmt, ids...)
}

// InTx runs fn in a transaction that commits when fn returns nil; one
// whose BEGIN met a dead connection is run again on a fresh one (see
// Write).
func (db *DB) InTx(ctx context.Context, t storage.Tenant, fn func(tx pgx.Tx) error) error {
	return db.Write(ctx, t, func(c *pgx.Conn) error { return inTx(ctx, c, t, fn) })
}

// Write runs a write, fn, on a connection of its own. A transaction whose
// BEGIN failed because its pooled connection was already dead (fn
// returned a DeadBeforeRun) ran nothing: it is run again on a fresh
// connection (see pool). One whose connection broke while it ran (cut, or
// closed because ctx ended) is answered as it failed: whether it
// committed is not known here. The writes of loans, items and requests
// store their own id first (writes.go, WriteIdentified), which makes
// running them again safe and their outcome known.
func (db *DB) Write(ctx context.Context, t storage.Tenant, fn func(c *pgx.Conn) error) error {
	err := db.writeOnce(ctx, t, fn)
	var dead *DeadBeforeRun
	for attempt := 1; attempt < maxDeadAttempts && errors.As(err, &dead) && ctx.Err() == nil; attempt++ {
		db.Pool.Reset()
		err = db.writeOnce(ctx, t, fn)
	}
	if errors.As(err, &dead) {
		return Interpret(dead.Err, t)
	}
	var broken *Broken
	if errors.As(err, &broken) {
		return broken.Err
	}
	return err
}

// writeOnce is one attempt of write: fn's error, as a *Broken when fn
// left its connection closed.
func (db *DB) writeOnce(ctx context.Context, t storage.Tenant, fn func(c *pgx.Conn) error) error {
	c, err := db.Pool.Acquire(ctx)
	if err != nil {
		return Interpret(err, t)
	}
	returned := false
	defer func() {
		if !returned {
			// fn panicked, its connection in a state nobody knows: closed
			// (its server process rolls back what it had not committed),
			// and its place given back to the pool.
			closing, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			defer cancel()
			_ = c.Conn().Close(closing)
			c.Release()
		}
	}()
	err = fn(c.Conn())
	broken := err != nil && c.Conn().IsClosed()
	returned = true
	c.Release()
	if broken {
		var dead *DeadBeforeRun
		if errors.As(err, &dead) {
			return err
		}
		return &Broken{Err: err}
	}
	return err
}

// Broken is a write whose connection broke while it ran (cut, its server
// process ended, or closed because its context ended): what it sent may
// have committed or not. Its message is Err's.
type Broken struct{ Err error }

func (b *Broken) Error() string { return b.Err.Error() }
func (b *Broken) Unwrap() error { return b.Err }

// Lit is s as an SQL string literal: how a statement says a status, or
// another word of package schemas, without writing it twice.
func Lit(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// Lits is each of ss as an SQL string literal, separated by commas: the
// list of an IN (…).
func Lits(ss ...string) string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = Lit(s)
	}
	return strings.Join(out, ", ")
}
