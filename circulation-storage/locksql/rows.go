package locksql

// LockRows locks, in one statement, the row of the lock a check-out writes
// under and the borrower's row, in the write's transaction, before the
// write takes its snapshot (a statement's snapshot is taken when it starts,
// and what it waits for later, it does not see). It guarantees that the
// fence still holds when the write commits: a takeover, a release or
// another write under the lock waits for this write, and so does every
// other check-out write for the patron (see PatronRow), whose count then
// includes this write's loan. A lock row that is gone locks nothing, and
// the write's fence then refuses it. It takes the lock and patron tables
// as its fmt arguments. Parameters: $1 lock id, $2 the patron, $3 the
// tenant.
const LockRows = `SELECT 1 FROM %s l, %s p
 WHERE l.tenant_id = $3 AND l.id = $1 AND p.tenant_id = $3 AND p.id = $2
   FOR UPDATE OF l FOR NO KEY UPDATE OF p`

// AcquireInWrite takes the patron's lock inside a check-out's write, as
// the write's first statement: it inserts the lock row, or, when the
// patron has a lock row already (live or expired, someone else's or a
// stale one), does nothing and returns no row. The row is never seen by
// anyone: the write deletes it before it commits (DropInWrite), whatever
// it wrote. Another write doing the same for the patron waits on this
// uncommitted row (the unique user_id) until this write commits, then
// inserts its own: a patron's burst is handed on inside PostgreSQL, one
// commit after another, with no round trip between them. A live lock
// held by someone else (taken by a call of its own, committed) makes it
// return nothing at once, and the caller takes the lock the ordinary way
// (Acquire, waiting for it). It takes the lock table as its fmt argument.
// Its arguments are named: @lock_id, @user_id, @ttl_ms (the TTL in
// milliseconds), @holder (JSON) and @tenant.
const AcquireInWrite = `INSERT INTO %s (tenant_id, id, user_id, expires_at, ttl_ms, holder)
VALUES (@tenant, @lock_id, @user_id, now() + @ttl_ms::integer * interval '1 millisecond', @ttl_ms, @holder::jsonb)
ON CONFLICT (tenant_id, user_id) DO NOTHING
RETURNING true`

// DropInWrite deletes the lock AcquireInWrite inserted, the write's last
// statement: its release when the write wrote nothing (a write that wrote
// its loan has released it already). It takes the lock table as its fmt
// argument. Parameters: $1 lock id, $2 the tenant.
const DropInWrite = `DELETE FROM %s WHERE tenant_id = $2 AND id = $1`

// PatronRow locks the borrower's row for a write without a lock. It
// guarantees that the patron's check-out writes, under a lock or not,
// happen one after another, each counting the loans of the one before, so
// the item limit holds for callers that skip the lock (a loan's reference
// to the patron takes a key share, which this does not block). It takes
// the patron table as its fmt argument. Parameters: $1 the patron, $2 the
// tenant.
const PatronRow = `SELECT 1 FROM %s WHERE tenant_id = $2 AND id = $1 FOR NO KEY UPDATE`
