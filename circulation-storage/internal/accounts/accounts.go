// Package accounts keeps what signing in needs on PostgreSQL, as package
// login's Store: the accounts and their password hashes, the counts of
// sign-ins and PIN checks (claimed in one statement before the check
// runs), the sessions and their refresh tokens, and the patrons' PINs.
package accounts

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/circulation-storage/login"
	"github.com/checkoutlock/schemas/errs"
)

// Accounts is the login's store (login.Store) on the shared tables.
type Accounts struct{ db *postgres.DB }

var _ login.Store = (*Accounts)(nil)

// NewAccounts returns the login's store.
func NewAccounts(db *postgres.DB) *Accounts { return &Accounts{db: db} }

var (
	accountByNameSQL = postgres.WithTables(`SELECT a.jsonb, c.hash FROM %[1]s a
  LEFT JOIN %[2]s c ON c.tenant_id = a.tenant_id AND c.account_id = a.id
 WHERE a.tenant_id = $1 AND a.username = lower($2)`, postgres.TableAccount, postgres.TableCredential)
	accountByIDSQL = postgres.WithTables(`SELECT jsonb FROM %s WHERE tenant_id = $1 AND id = $2`, postgres.TableAccount)
	setHashSQL     = postgres.WithTables(`INSERT INTO %[1]s (tenant_id, account_id, hash)
SELECT $1, a.id, $3 FROM %[2]s a WHERE a.tenant_id = $1 AND a.id = $2
ON CONFLICT (tenant_id, account_id) DO UPDATE SET hash = excluded.hash, changed_at = now()`, postgres.TableCredential, postgres.TableAccount)
	// lockCountsSQL makes the rows of keys ($2, sorted) that are not there
	// yet and locks every one, in key order, until the transaction ends
	// (DO UPDATE locks a row that is there; the update changes nothing),
	// and answers each count as it is, with the transaction's time: a row
	// the sweeper deletes meanwhile is made again, and no attempt reads a
	// count another is deciding on.
	lockCountsSQL = postgres.WithTables(`INSERT INTO %s AS f (tenant_id, key, failures, first_at)
SELECT $1, k, 0, now() FROM unnest($2::text[]) AS k ORDER BY k
ON CONFLICT (tenant_id, key) DO UPDATE SET failures = f.failures
RETURNING key, failures, first_at, locked_until, checking, coalesce(checking_at, first_at), now()`, postgres.TableLoginFailure)
	// setCountsSQL stores the counts decided, and marks the key
	// @signed_in (when it is one of them) signed in now.
	setCountsSQL = postgres.WithTables(`UPDATE %s AS f SET failures = n.failures, first_at = n.first_at, locked_until = n.locked_until,
    checking = n.checking, checking_at = n.checking_at,
    succeeded_at = CASE WHEN f.key = @signed_in THEN now() ELSE f.succeeded_at END
  FROM unnest(@keys::text[], @failures::integer[], @first_at::timestamptz[], @locked_until::timestamptz[],
              @checking::integer[], @checking_at::timestamptz[])
       AS n(key, failures, first_at, locked_until, checking, checking_at)
 WHERE f.tenant_id = @tenant AND f.key = n.key`, postgres.TableLoginFailure)
	signedInSQL = postgres.WithTables(`SELECT EXISTS (SELECT FROM %s WHERE tenant_id = $1 AND key = $2
   AND succeeded_at > now() - $3::double precision * interval '1 second')`, postgres.TableLoginFailure)
	setPinSQL = postgres.WithTables(`INSERT INTO %[1]s (tenant_id, patron_id, hash)
SELECT $1, p.id, $3 FROM %[2]s p WHERE p.tenant_id = $1 AND p.id = $2
ON CONFLICT (tenant_id, patron_id) DO UPDATE SET hash = excluded.hash, changed_at = now()`, postgres.TablePatronPin, postgres.TablePatron)
	pinSQL          = postgres.WithTables(`SELECT hash FROM %s WHERE tenant_id = $1 AND patron_id = $2`, postgres.TablePatronPin)
	forgetSQL       = postgres.WithTables(`DELETE FROM %s WHERE tenant_id = $1 AND key = $2`, postgres.TableLoginFailure)
	startSessionSQL = postgres.WithTables(`WITH s AS (
    INSERT INTO %[1]s (tenant_id, id, account_id, expires_at) VALUES (@tenant, @session, @account, @expires)
)
INSERT INTO %[2]s (tenant_id, hash, account_id, session_id, expires_at) VALUES (@tenant, @hash, @account, @session, @expires)`, postgres.TableLoginSession, postgres.TableRefreshToken)
	// rotateSQL takes a live refresh token of a live session and keeps
	// the next one (@next) in its place, extending the session; a token found
	// already taken ends its session instead (it was used twice). The
	// taking and the ending read the token's row as the UPDATE left it:
	// of two refreshes with one token at once, one takes it and the other
	// ends the session. The statement may run again after its commit (its
	// answer lost on a dead connection, see pool): the next token, new to
	// this call, already kept says it did its work, and that is answered.
	rotateSQL = postgres.WithTables(`WITH done AS (
    SELECT account_id, session_id FROM %[2]s WHERE tenant_id = @tenant AND hash = @next
), taken AS (
    UPDATE %[2]s AS r SET revoked_at = now()
      FROM %[1]s s
     WHERE NOT EXISTS (SELECT FROM done)
       AND r.tenant_id = @tenant AND r.hash = @hash AND r.revoked_at IS NULL AND r.expires_at > now()
       AND s.tenant_id = r.tenant_id AND s.id = r.session_id AND s.ended_at IS NULL
    RETURNING r.account_id, r.session_id
), kept AS (
    INSERT INTO %[2]s (tenant_id, hash, account_id, session_id, expires_at)
    SELECT @tenant, @next, account_id, session_id, @expires FROM taken
), extended AS (
    UPDATE %[1]s s SET expires_at = @expires FROM taken WHERE s.tenant_id = @tenant AND s.id = taken.session_id
), reused AS (
    UPDATE %[1]s s SET ended_at = now(), end_reason = 'refresh_reused'
      FROM %[2]s r
     WHERE NOT EXISTS (SELECT FROM taken) AND NOT EXISTS (SELECT FROM done)
       AND r.tenant_id = @tenant AND r.hash = @hash AND r.revoked_at IS NOT NULL
       AND s.tenant_id = r.tenant_id AND s.id = r.session_id AND s.ended_at IS NULL
)
SELECT account_id::text, session_id::text FROM taken
UNION ALL
SELECT account_id::text, session_id::text FROM done`, postgres.TableLoginSession, postgres.TableRefreshToken)
	// endSessionSQL ends the session named by id (@session) or by a
	// refresh token's hash (@hash), and revokes its refresh tokens.
	endSessionSQL = postgres.WithTables(`WITH s AS (
    UPDATE %[1]s s SET ended_at = now(), end_reason = @reason
     WHERE s.tenant_id = @tenant AND s.ended_at IS NULL
       AND (s.id = @session::uuid OR s.id = (SELECT session_id FROM %[2]s WHERE tenant_id = @tenant AND hash = @hash))
    RETURNING s.id
)
UPDATE %[2]s r SET revoked_at = now() FROM s
 WHERE r.tenant_id = @tenant AND r.session_id = s.id AND r.revoked_at IS NULL`, postgres.TableLoginSession, postgres.TableRefreshToken)
	// sessionAliveSQL: a session speaks for its account while it has not
	// ended nor expired. Disabling the account ends it, and so does
	// changing its roles (the triggers account_disabled and
	// account_roles_changed, migrations 11 and 20); deleting it deletes it.
	sessionAliveSQL = postgres.WithTables(`SELECT EXISTS (SELECT FROM %s
 WHERE tenant_id = $1 AND id = $2 AND ended_at IS NULL AND expires_at > now())`, postgres.TableLoginSession)
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
	err := s.db.Pool.QueryRow(ctx, accountByNameSQL, tenant, username).Scan(&doc, &hash)
	if errors.Is(err, pgx.ErrNoRows) {
		return login.Account{}, "", false, nil
	}
	if err != nil {
		return login.Account{}, "", false, postgres.Interpret(err, "")
	}
	a, err := accountOf(doc)
	return a, postgres.Deref(hash), err == nil, err
}

// AccountByID implements login.Store.
func (s *Accounts) AccountByID(ctx context.Context, tenant, id string) (login.Account, bool, error) {
	var doc []byte
	err := s.db.Pool.QueryRow(ctx, accountByIDSQL, tenant, id).Scan(&doc)
	if errors.Is(err, pgx.ErrNoRows) {
		return login.Account{}, false, nil
	}
	if err != nil {
		return login.Account{}, false, postgres.Interpret(err, "")
	}
	a, err := accountOf(doc)
	return a, err == nil, err
}

// SetHash implements login.Store.
func (s *Accounts) SetHash(ctx context.Context, tenant, accountID, hash string) error {
	tag, err := s.db.Pool.Exec(ctx, setHashSQL, tenant, accountID, hash)
	if err != nil {
		return postgres.Interpret(err, "")
	}
	if tag.RowsAffected() == 0 {
		return errs.NotFound("Account", accountID)
	}
	return nil
}

// Count implements login.Store: in one transaction, the rows of the
// limits' keys are made if missing and locked in key order (so that
// attempts on the same keys queue, and attempts on overlapping keys
// cannot deadlock), each limit's verdict decided (login.Admit), and the
// counts stored only when every limit admitted the attempt. Nothing is
// checked before the attempt is counted: the caller checks the secret
// after Count returns.
func (s *Accounts) Count(ctx context.Context, tenant string, limits []login.Limit) (login.Admission, error) {
	var a login.Admission
	err := s.decide(ctx, tenant, limits, "", func(limits []login.Limit, counts []login.Count, now time.Time) bool {
		a = login.Admission{Verdict: login.Admitted}
		for i, l := range limits {
			var v login.Verdict
			var w time.Duration
			counts[i], v, w = login.Admit(l, counts[i], now)
			if v > a.Verdict || (v == a.Verdict && w > a.Wait) {
				a.Verdict, a.Wait = v, w
			}
			if v == login.Locked {
				if a.Locks == nil {
					a.Locks = map[string]time.Duration{}
				}
				a.Locks[l.Key] = w
			}
		}
		return a.Verdict == login.Admitted
	})
	if err != nil {
		return login.Admission{}, err
	}
	return a, nil
}

// Settle implements login.Store: in one transaction, the rows locked in
// key order (as Count locks them, made again if the sweeper took them
// meanwhile), the outcome settled on each (login.Settle) and stored.
func (s *Accounts) Settle(ctx context.Context, tenant string, limits []login.Limit, o login.Outcome, signedIn string) error {
	if o != login.Right {
		signedIn = ""
	}
	return s.decide(ctx, tenant, limits, signedIn, func(limits []login.Limit, counts []login.Count, now time.Time) bool {
		for i, l := range limits {
			counts[i] = login.Settle(l, counts[i], o, now)
		}
		return true
	})
}

// decide runs one decision on the counts of limits' keys, in two round
// trips: their rows made if missing, locked in key order and read
// (lockCountsSQL, sent with the transaction's BEGIN), handed to next with
// the transaction's time to be changed in place, and what next leaves
// stored when it returns true, signedIn (when not "") marked signed in
// with it, sent with the COMMIT. The rows are locked for one round trip
// and the decision: attempts at one count queue for no longer.
func (s *Accounts) decide(ctx context.Context, tenant string, limits []login.Limit, signedIn string,
	next func(limits []login.Limit, counts []login.Count, now time.Time) (store bool)) error {
	limits = slices.Clone(limits)
	slices.SortFunc(limits, func(a, b login.Limit) int { return strings.Compare(a.Key, b.Key) })
	keys := make([]string, len(limits))
	for i, l := range limits {
		keys[i] = l.Key
	}
	t := storage.Tenant(tenant)
	return s.db.Write(ctx, t, func(c *pgx.Conn) error {
		committed := false
		defer func() {
			if !committed && !c.IsClosed() {
				_, _ = c.Exec(context.WithoutCancel(ctx), "ROLLBACK")
			}
		}()
		b := &pgx.Batch{}
		b.Queue("BEGIN")
		b.Queue(lockCountsSQL, tenant, keys)
		br := c.SendBatch(ctx, b)
		if _, err := br.Exec(); err != nil {
			br.Close()
			if postgres.DeadConnection(err) {
				return &postgres.DeadBeforeRun{Err: err}
			}
			return postgres.Interpret(err, t)
		}
		byKey := map[string]login.Count{}
		var now time.Time
		rows, err := br.Query()
		if err == nil {
			for rows.Next() {
				var key string
				var c login.Count
				if err = rows.Scan(&key, &c.Failures, &c.FirstAt, &c.LockedUntil, &c.Checking, &c.CheckingAt, &now); err != nil {
					break
				}
				byKey[key] = c
			}
			rows.Close()
			err = cmp.Or(err, rows.Err())
		}
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return postgres.Interpret(err, t)
		}
		counts := make([]login.Count, len(limits))
		for i, l := range limits {
			counts[i] = byKey[l.Key]
		}
		b = &pgx.Batch{}
		if next(limits, counts, now) {
			n := len(counts)
			failures, checking := make([]int, n), make([]int, n)
			firsts, checkingAt := make([]time.Time, n), make([]time.Time, n)
			locks := make([]*time.Time, n)
			for i, c := range counts {
				failures[i], firsts[i], locks[i], checking[i], checkingAt[i] = c.Failures, c.FirstAt, c.LockedUntil, c.Checking, c.CheckingAt
			}
			b.Queue(setCountsSQL, pgx.StrictNamedArgs{"tenant": tenant, "keys": keys, "failures": failures,
				"first_at": firsts, "locked_until": locks, "checking": checking, "checking_at": checkingAt, "signed_in": signedIn})
		}
		b.Queue("COMMIT")
		if err := c.SendBatch(ctx, b).Close(); err != nil {
			return postgres.Interpret(err, t)
		}
		committed = true
		return nil
	})
}

// SignedIn implements login.Store.
func (s *Accounts) SignedIn(ctx context.Context, tenant, key string, d time.Duration) (bool, error) {
	var known bool
	err := s.db.Pool.QueryRow(ctx, signedInSQL, tenant, key, d.Seconds()).Scan(&known)
	return known, postgres.Interpret(err, "")
}

// Forget implements login.Store.
func (s *Accounts) Forget(ctx context.Context, tenant, key string) error {
	_, err := s.db.Pool.Exec(ctx, forgetSQL, tenant, key)
	return postgres.Interpret(err, "")
}

// StartSession implements login.Store.
func (s *Accounts) StartSession(ctx context.Context, tenant, sessionID, accountID string, refreshHash []byte, expires time.Time) error {
	_, err := s.db.Pool.Exec(ctx, startSessionSQL, pgx.StrictNamedArgs{"tenant": tenant, "session": sessionID, "account": accountID,
		"hash": refreshHash, "expires": expires})
	return postgres.Interpret(err, "")
}

// Rotate implements login.Store.
func (s *Accounts) Rotate(ctx context.Context, tenant string, hash, next []byte, expires time.Time) (string, string, bool, error) {
	var id, sid string
	err := s.db.Pool.QueryRow(ctx, rotateSQL, pgx.StrictNamedArgs{"tenant": tenant, "hash": hash, "next": next, "expires": expires}).Scan(&id, &sid)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", "", false, nil
	}
	if err != nil {
		return "", "", false, postgres.Interpret(err, "")
	}
	return id, sid, true, nil
}

// EndSession implements login.Store.
func (s *Accounts) EndSession(ctx context.Context, tenant, sessionID string, refreshHash []byte, reason string) error {
	var id *string
	if sessionID != "" {
		if _, err := uuid.Parse(sessionID); err != nil {
			return nil // no such session
		}
		id = &sessionID
	}
	_, err := s.db.Pool.Exec(ctx, endSessionSQL, pgx.StrictNamedArgs{"tenant": tenant, "session": id, "hash": refreshHash, "reason": reason})
	return postgres.Interpret(err, "")
}

// SessionAlive implements login.Store.
func (s *Accounts) SessionAlive(ctx context.Context, tenant, sessionID string) (bool, error) {
	if _, err := uuid.Parse(sessionID); err != nil {
		return false, nil
	}
	var alive bool
	err := s.db.Pool.QueryRow(ctx, sessionAliveSQL, tenant, sessionID).Scan(&alive)
	return alive, postgres.Interpret(err, "")
}

// SetPinHash implements login.Store.
func (s *Accounts) SetPinHash(ctx context.Context, tenant, patronID, hash string) error {
	tag, err := s.db.Pool.Exec(ctx, setPinSQL, tenant, patronID, hash)
	if err != nil {
		return postgres.Interpret(err, "")
	}
	if tag.RowsAffected() == 0 {
		return errs.NotFound("User", patronID)
	}
	return nil
}

// PinHash implements login.Store.
func (s *Accounts) PinHash(ctx context.Context, tenant, patronID string) (string, bool, error) {
	var hash string
	err := s.db.Pool.QueryRow(ctx, pinSQL, tenant, patronID).Scan(&hash)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, postgres.Interpret(err, "")
	}
	return hash, true, nil
}
