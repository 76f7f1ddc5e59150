// Package postgres implements circulation-storage's services on PostgreSQL
// with pgx. Every tenant's records live in the tenant's own schema; queries
// name their tables through table(), which quotes the validated schema name.
// Driver errors are translated to domain errors in errors.go (interpret and
// its refinements for named constraints), by SQLSTATE, never by message text.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	storage "github.com/checkoutlock/circulation-storage"
)

// DB is the connection pools shared by every service of this package.
type DB struct {
	pool *pgxpool.Pool
	// lockPool runs the statements that acquire and release locks, with
	// their own synchronous_commit (see Open); it is pool when that is on.
	lockPool *pgxpool.Pool
}

// Open creates the pools. It does not wait for the database: connections
// are made on demand, so the service starts (and reports not ready) while
// the database is down, and recovers by itself when it comes back.
//
// lockCommit is PostgreSQL's synchronous_commit for the statements that
// acquire and release locks, run on a pool of their own ("on", or "" for
// the server's setting, shares the main pool). With "off" they do not wait
// for the WAL flush (or a standby), which is most of their cost; a lock row
// lost in a crash makes its holder's fenced write refuse (LOCK_LOST), and
// the write, whose commit is durable, flushes every lock statement before
// it.
func Open(ctx context.Context, connString string, maxConns int32, lockCommit string) (*DB, error) {
	pool, err := openPool(ctx, connString, maxConns, "circulation-storage", "")
	if err != nil {
		return nil, err
	}
	db := &DB{pool: pool, lockPool: pool}
	if lockCommit != "" && lockCommit != "on" {
		// Lock statements are short: half the connections serve them.
		if db.lockPool, err = openPool(ctx, connString, max(2, maxConns/2), "circulation-storage-locks", lockCommit); err != nil {
			pool.Close()
			return nil, err
		}
	}
	return db, nil
}

// openPool creates one pool, its sessions named name, with
// synchronous_commit set when commit is not empty.
func openPool(ctx context.Context, connString string, maxConns int32, name, commit string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(connString)
	if err != nil {
		// The parse error may quote the connection string, password included.
		return nil, fmt.Errorf("parse database connection string: %w", redact(err))
	}
	cfg.MaxConns = maxConns
	// Dead connections (database restarted, proxy cut) are noticed when a
	// query fails; a periodic check finds idle ones before a request does.
	cfg.HealthCheckPeriod = 5 * time.Second
	cfg.ConnConfig.ConnectTimeout = connectTimeout(cfg.ConnConfig.ConnectTimeout)
	if cfg.ConnConfig.RuntimeParams == nil {
		cfg.ConnConfig.RuntimeParams = map[string]string{}
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = name
	if commit != "" {
		cfg.ConnConfig.RuntimeParams["synchronous_commit"] = commit
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("create database pool: %w", redact(err))
	}
	return pool, nil
}

// defaultConnectTimeout bounds a connection attempt to one host when the
// connection string names no connect_timeout.
const defaultConnectTimeout = 5 * time.Second

// connectTimeout is the connection string's connect_timeout, or the
// default. With several hosts (an HA cluster) it applies to each in turn,
// so a short one passes over an unreachable node quickly.
func connectTimeout(configured time.Duration) time.Duration {
	if configured > 0 {
		return configured
	}
	return defaultConnectTimeout
}

// Close closes every connection.
func (db *DB) Close() {
	if db.lockPool != db.pool {
		db.lockPool.Close()
	}
	db.pool.Close()
}

// Ping checks that the database answers.
func (db *DB) Ping(ctx context.Context) error {
	if err := db.pool.Ping(ctx); err != nil {
		return interpret(err, "")
	}
	return nil
}

// redact drops the text of a connection-string parse error, which can quote
// the password, keeping only that parsing failed.
func redact(err error) error {
	var pe *pgconn.ParseConfigError
	if errors.As(err, &pe) {
		return errors.New("invalid connection string")
	}
	return err
}

// querier is what both the pool and a transaction offer, so a query helper
// runs the same inside or outside a transaction.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// table is the quoted, schema-qualified name of one of the tenant's tables.
// The tenant id was validated by storage.ParseTenant; quoting makes the name
// safe regardless.
func table(t storage.Tenant, name string) string {
	return pgx.Identifier{t.Schema(), name}.Sanitize()
}

// inTx runs fn in a transaction that commits when fn returns nil.
func (db *DB) inTx(ctx context.Context, t storage.Tenant, fn func(tx pgx.Tx) error) error {
	tx, err := db.pool.Begin(ctx)
	if err != nil {
		return interpret(err, t)
	}
	// Rollback after Commit is a no-op; on error paths it ends the
	// transaction even if ctx was cancelled.
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return interpret(err, t)
	}
	return nil
}
