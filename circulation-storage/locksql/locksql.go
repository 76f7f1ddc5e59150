// Package locksql holds the SQL of the check-out lock: the statements that
// acquire and release a patron's lock. The service runs them (package
// postgres), and the benchmarks run the very same text through pgbench to
// measure how close the service comes to the database's own limit.
//
// Each statement takes the lock table's quoted, schema-qualified name as its
// one fmt argument.
package locksql

// Columns are the lock's columns, in the order the statements return them.
const Columns = `id, user_id, creation_date, expires_at, ttl_ms`

// Acquire is the whole acquisition in one statement, so there is no window
// between looking and writing: it inserts the patron's lock, or, when the
// patron's row exists but has expired, takes it over with a new id. A live
// row makes the conflict's WHERE false, so nothing is written and no row is
// returned, unless the request names the live lock's own id: then it is the
// holder asking again (its first answer lost, or to extend the lock), and the
// lock is renewed, keeping its id and creation date.
//
// Two flags tell the outcomes apart: inserted (xmax = 0 only for a freshly
// inserted row) and fresh (a takeover starts a new creation date, a renewal
// keeps the old one).
//
// Parameters: $1 user id, $2 TTL in milliseconds, $3 lock id or NULL for a
// new random one.
const Acquire = `
INSERT INTO %[1]s AS l (id, user_id, expires_at, ttl_ms)
VALUES (coalesce($3::uuid, gen_random_uuid()), $1, now() + $2::integer * interval '1 millisecond', $2)
ON CONFLICT (user_id) DO UPDATE
   SET id = excluded.id,
       creation_date = CASE WHEN l.id = excluded.id THEN l.creation_date ELSE now() END,
       expires_at = excluded.expires_at,
       ttl_ms = excluded.ttl_ms
 WHERE l.expires_at <= now() OR l.id = excluded.id
RETURNING ` + Columns + `, xmax = 0 AS inserted, creation_date = now() AS fresh`

// Release deletes a lock by id whatever its expiry, so an expired lock is
// cleaned up, and says whether it was still live: for a client an expired
// lock is the same as none. Parameter: $1 lock id.
const Release = `DELETE FROM %s WHERE id = $1 RETURNING expires_at > now()`
