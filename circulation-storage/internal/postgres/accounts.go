package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/checkoutlock/circulation-storage/login"
	"github.com/checkoutlock/schemas/errs"
)

// Accounts is the login's store (login.Store) on the shared tables.
type Accounts struct{ db *DB }

var _ login.Store = (*Accounts)(nil)

// NewAccounts returns the login's store.
func NewAccounts(db *DB) *Accounts { return &Accounts{db: db} }

var (
	accountByNameSQL = withTables(`SELECT a.jsonb, c.hash FROM %[1]s a
  LEFT JOIN %[2]s c ON c.tenant_id = a.tenant_id AND c.account_id = a.id
 WHERE a.tenant_id = $1 AND a.username = lower($2)`, tableAccount, tableCredential)
	accountByIDSQL = withTables(`SELECT jsonb FROM %s WHERE tenant_id = $1 AND id = $2`, tableAccount)
	setHashSQL     = withTables(`INSERT INTO %[1]s (tenant_id, account_id, hash)
SELECT $1, a.id, $3 FROM %[2]s a WHERE a.tenant_id = $1 AND a.id = $2
ON CONFLICT (tenant_id, account_id) DO UPDATE SET hash = excluded.hash, changed_at = now()`, tableCredential, tableAccount)
	lockedUntilSQL = withTables(`SELECT max(locked_until) FROM %s WHERE tenant_id = $1 AND key = ANY($2::text[])`, tableLoginFailure)
	// failSQL counts one failure of each key ($2, with its maximum in $3):
	// a count older than the window ($4) starts again, and a count at its
	// maximum locks the key for $5 (each further failure locks it again).
	failSQL = withTables(`WITH k AS (SELECT key, max FROM unnest($2::text[], $3::integer[]) AS k(key, max))
INSERT INTO %s AS f (tenant_id, key, failures, first_at, locked_until)
SELECT $1, k.key, 1, now(), CASE WHEN k.max <= 1 THEN now() + $5::interval END FROM k
ON CONFLICT (tenant_id, key) DO UPDATE SET
    failures = CASE WHEN f.first_at < now() - $4::interval THEN 1 ELSE f.failures + 1 END,
    first_at = CASE WHEN f.first_at < now() - $4::interval THEN now() ELSE f.first_at END,
    locked_until = CASE WHEN (CASE WHEN f.first_at < now() - $4::interval THEN 1 ELSE f.failures + 1 END)
                             >= (SELECT max FROM k WHERE k.key = f.key)
                        THEN now() + $5::interval ELSE f.locked_until END`, tableLoginFailure)
	setPinSQL = withTables(`INSERT INTO %[1]s (tenant_id, patron_id, hash)
SELECT $1, p.id, $3 FROM %[2]s p WHERE p.tenant_id = $1 AND p.id = $2
ON CONFLICT (tenant_id, patron_id) DO UPDATE SET hash = excluded.hash, changed_at = now()`, tablePatronPin, tablePatron)
	pinSQL         = withTables(`SELECT hash FROM %s WHERE tenant_id = $1 AND patron_id = $2`, tablePatronPin)
	forgetSQL      = withTables(`DELETE FROM %s WHERE tenant_id = $1 AND key = $2`, tableLoginFailure)
	keepRefreshSQL = withTables(`INSERT INTO %s (tenant_id, hash, account_id, expires_at) VALUES ($1, $2, $3, $4)`, tableRefreshToken)
	takeRefreshSQL = withTables(`UPDATE %s SET revoked_at = now()
 WHERE tenant_id = $1 AND hash = $2 AND revoked_at IS NULL AND expires_at > now()
RETURNING account_id::text`, tableRefreshToken)
)

// accountOf reads an account's document.
func accountOf(doc []byte) (login.Account, error) {
	var a struct {
		ID       string   `json:"id"`
		Username string   `json:"username"`
		Active   *bool    `json:"active"`
		Roles    []string `json:"roles"`
	}
	if err := json.Unmarshal(doc, &a); err != nil {
		return login.Account{}, err
	}
	return login.Account{ID: a.ID, Username: a.Username, Active: a.Active == nil || *a.Active, Roles: a.Roles}, nil
}

// Account implements login.Store.
func (s *Accounts) Account(ctx context.Context, tenant, username string) (login.Account, string, bool, error) {
	var doc []byte
	var hash *string
	err := s.db.pool.QueryRow(ctx, accountByNameSQL, tenant, username).Scan(&doc, &hash)
	if errors.Is(err, pgx.ErrNoRows) {
		return login.Account{}, "", false, nil
	}
	if err != nil {
		return login.Account{}, "", false, interpret(err, "")
	}
	a, err := accountOf(doc)
	return a, deref(hash), err == nil, err
}

// AccountByID implements login.Store.
func (s *Accounts) AccountByID(ctx context.Context, tenant, id string) (login.Account, bool, error) {
	var doc []byte
	err := s.db.pool.QueryRow(ctx, accountByIDSQL, tenant, id).Scan(&doc)
	if errors.Is(err, pgx.ErrNoRows) {
		return login.Account{}, false, nil
	}
	if err != nil {
		return login.Account{}, false, interpret(err, "")
	}
	a, err := accountOf(doc)
	return a, err == nil, err
}

// SetHash implements login.Store.
func (s *Accounts) SetHash(ctx context.Context, tenant, accountID, hash string) error {
	tag, err := s.db.pool.Exec(ctx, setHashSQL, tenant, accountID, hash)
	if err != nil {
		return interpret(err, "")
	}
	if tag.RowsAffected() == 0 {
		return errs.NotFound("Account", accountID)
	}
	return nil
}

// LockedUntil implements login.Store.
func (s *Accounts) LockedUntil(ctx context.Context, tenant string, keys []string) (time.Time, error) {
	var until *time.Time
	if err := s.db.pool.QueryRow(ctx, lockedUntilSQL, tenant, keys).Scan(&until); err != nil {
		return time.Time{}, interpret(err, "")
	}
	if until == nil {
		return time.Time{}, nil
	}
	return *until, nil
}

// Fail implements login.Store.
func (s *Accounts) Fail(ctx context.Context, tenant string, keys []string, max []int, window, lockout time.Duration) error {
	_, err := s.db.pool.Exec(ctx, failSQL, tenant, keys, max, window, lockout)
	return interpret(err, "")
}

// Forget implements login.Store.
func (s *Accounts) Forget(ctx context.Context, tenant, key string) error {
	_, err := s.db.pool.Exec(ctx, forgetSQL, tenant, key)
	return interpret(err, "")
}

// KeepRefresh implements login.Store.
func (s *Accounts) KeepRefresh(ctx context.Context, tenant string, hash []byte, accountID string, expires time.Time) error {
	_, err := s.db.pool.Exec(ctx, keepRefreshSQL, tenant, hash, accountID, expires)
	return interpret(err, "")
}

// TakeRefresh implements login.Store.
func (s *Accounts) TakeRefresh(ctx context.Context, tenant string, hash []byte) (string, bool, error) {
	var id string
	err := s.db.pool.QueryRow(ctx, takeRefreshSQL, tenant, hash).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, interpret(err, "")
	}
	return id, true, nil
}

// SetPinHash implements login.Store.
func (s *Accounts) SetPinHash(ctx context.Context, tenant, patronID, hash string) error {
	tag, err := s.db.pool.Exec(ctx, setPinSQL, tenant, patronID, hash)
	if err != nil {
		return interpret(err, "")
	}
	if tag.RowsAffected() == 0 {
		return errs.NotFound("User", patronID)
	}
	return nil
}

// PinHash implements login.Store.
func (s *Accounts) PinHash(ctx context.Context, tenant, patronID string) (string, bool, error) {
	var hash string
	err := s.db.pool.QueryRow(ctx, pinSQL, tenant, patronID).Scan(&hash)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, interpret(err, "")
	}
	return hash, true, nil
}
