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

// PatronRow locks the borrower's row for a write without a lock. It
// guarantees that the patron's check-out writes, under a lock or not,
// happen one after another, each counting the loans of the one before, so
// the item limit holds for callers that skip the lock (a loan's reference
// to the patron takes a key share, which this does not block). It takes
// the patron table as its fmt argument. Parameters: $1 the patron, $2 the
// tenant.
const PatronRow = `SELECT 1 FROM %s WHERE tenant_id = $2 AND id = $1 FOR NO KEY UPDATE`
