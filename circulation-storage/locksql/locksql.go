// Package locksql holds the SQL that carries the check-out lock's
// guarantees, each statement with what it guarantees: acquiring and
// releasing a patron's lock (this file), the write's fence (fence.go) and
// the row locks that order a patron's writes (rows.go); the item limit's
// count is package rules' (internal/rules/limit.go). The service runs
// them (packages locks and lending), and the
// benchmarks run the very same text through pgbench to measure how close
// the service comes to the database's own limit.
//
// Each statement takes quoted, schema-qualified table names as its fmt
// arguments, as its comment says, and the tenant as a parameter: the
// tables are shared by every tenant, and a row is its tenant's by its
// tenant_id.
package locksql

// Schema is the schema of the tables every tenant shares, where the
// statements' tables are.
const Schema = "circulation_storage"

// Columns are the lock's columns, in the order the statements return them.
const Columns = `id, user_id, creation_date, expires_at, ttl_ms, holder`

// Acquire is the whole acquisition in one statement, so there is no window
// between looking and writing: it inserts the patron's lock, or, when the
// patron's row exists but has expired, takes it over with a new id. A live
// row makes the conflict's WHERE false, so nothing is written and no row is
// returned, unless the request names the live lock's own id and comes from
// the lock's owner (SameOwner: the holder's acquiredBy and
// acquiredByModule): then it is the holder asking again (its first answer
// lost, or to extend the lock), and the lock is renewed, keeping its id and
// creation date. A lock id alone renews nothing: anyone else naming it is
// refused as any other acquirer. The holder asking again
// after its lock expired takes it over like anyone else: a new creation date.
//
// Two flags tell the outcomes apart: inserted (xmax = 0 only for a freshly
// inserted row) and fresh (a takeover starts a new creation date, a renewal
// keeps the old one).
//
// The holder (@holder, JSON or NULL) is stored with the lock; it is not
// returned, being the caller's own. A takeover keeps what it replaced in
// previous, returned with the row, so the lock that expired while held can
// be recorded without the common path reading anything first; an insert or
// a renewal returns previous NULL.
//
// Its arguments are named: @user_id, @ttl_ms (the TTL in milliseconds),
// @lock_id (NULL for a new random one), @holder and @tenant.
var Acquire = `
INSERT INTO %[1]s AS l (tenant_id, id, user_id, expires_at, ttl_ms, holder)
VALUES (@tenant, coalesce(@lock_id::uuid, gen_random_uuid()), @user_id, now() + @ttl_ms::integer * interval '1 millisecond', @ttl_ms, @holder::jsonb)
ON CONFLICT (tenant_id, user_id) DO UPDATE
   SET id = excluded.id,
       creation_date = CASE WHEN l.id = excluded.id AND l.expires_at > now() THEN l.creation_date ELSE now() END,
       expires_at = excluded.expires_at,
       ttl_ms = excluded.ttl_ms,
       holder = excluded.holder,
       previous = CASE WHEN l.id = excluded.id AND l.expires_at > now() THEN NULL
                       ELSE jsonb_build_object('lockId', l.id, 'holder', l.holder, 'expiresAt', l.expires_at) END
 WHERE l.expires_at <= now() OR (l.id = excluded.id AND ` + SameOwner("l.holder", "excluded.holder") + `)
RETURNING ` + AcquireColumns + `, xmax = 0 AS inserted, creation_date = now() AS fresh, previous`

// AcquireColumns are the lock's columns Acquire returns: Columns but the
// holder.
const AcquireColumns = `id, user_id, creation_date, expires_at, ttl_ms`

// Release deletes a lock by id whatever its expiry, so an expired lock is
// cleaned up, and says whether it was still live: for a client an expired
// lock is the same as none. A live lock is deleted only for its owner
// (@by_user and @by_module, NULL when not known, as SameOwner compares
// them) or with @others true (the caller may release others' locks): otherwise no row
// is returned, as for no lock at all, and the caller asks which it was.
// When someone is waiting for the patron's lock (a live row in
// check_out_lock_waiter, see Watch), it announces the release
// on ReleaseChannel with the payload "<tenant>:<userId>" (see Announce),
// from the deleting statement's own transaction: PostgreSQL delivers a
// notification only when its transaction commits, so no waiter is woken
// before the row is gone. An uncontended release does not notify: PostgreSQL
// serialises the commits of notifying transactions. It also says whether it
// notified, and returns the holder, for the history, and the holder's
// acquiredBy and acquiredByModule on their own, so that the common release
// (by its owner) need not decode the holder to know it is the common one.
//
// Each statement here takes the lock table as its fmt argument; Release
// takes the waiter table as the second. Its arguments are named: @lock_id,
// @tenant, @by_user and @by_module (who releases), @others (whether it may
// release others' locks).
var Release = `
WITH released AS (
    DELETE FROM %[1]s
     WHERE tenant_id = @tenant AND id = @lock_id
       AND (expires_at <= now() OR @others::boolean
            OR (holder->>'acquiredBy' IS NOT DISTINCT FROM @by_user::text AND holder->>'acquiredByModule' IS NOT DISTINCT FROM @by_module::text))
    RETURNING user_id, expires_at > now() AS live, holder)
SELECT live, holder, holder->>'acquiredBy' AS acquired_by, holder->>'acquiredByModule' AS acquired_by_module,
       ` + Announce("%[2]s", "@tenant") + ` AS notified,
       user_id
  FROM released`

// SameOwner is the condition that the holders a and b (jsonb expressions,
// NULL when nothing is known) name the same owner: the user and the module
// that acquired the lock, either absent in both.
func SameOwner(a, b string) string {
	return `(` + a + `->>'acquiredBy') IS NOT DISTINCT FROM (` + b + `->>'acquiredBy')
        AND (` + a + `->>'acquiredByModule') IS NOT DISTINCT FROM (` + b + `->>'acquiredByModule')`
}

// ReleaseChannel is the notification channel on which releases are
// announced, with the payload "<tenant>:<userId>".
const ReleaseChannel = "checkout_lock_released"

// Announce is the expression that announces the release of the patron
// released.user_id (released: a row source of the statement) on
// ReleaseChannel when someone waits for that patron's lock in waiterTable,
// and says whether it did; tenant is the SQL that gives the tenant (a
// parameter). Release and a check-out's write that releases its lock
// announce with it.
func Announce(waiterTable, tenant string) string {
	return `CASE WHEN EXISTS (SELECT 1 FROM ` + waiterTable + ` w
                     WHERE w.tenant_id = ` + tenant + ` AND w.user_id = released.user_id AND w.expires_at > now())
            THEN (SELECT true FROM pg_notify('` + ReleaseChannel + `', ` + tenant + `::text || ':' || released.user_id::text))
            ELSE false END`
}

// Watch registers that someone waits for a patron's lock until at least
// $2 milliseconds from now, so its releases are announced (see Release).
// A registration only ever extends. It takes the waiter table as its fmt
// argument. Parameters: $1 user id, $2 milliseconds, $3 the tenant.
const Watch = `
INSERT INTO %s AS w (tenant_id, user_id, expires_at) VALUES ($3, $1, now() + $2::integer * interval '1 millisecond')
ON CONFLICT (tenant_id, user_id) DO UPDATE SET expires_at = greatest(w.expires_at, excluded.expires_at)`
