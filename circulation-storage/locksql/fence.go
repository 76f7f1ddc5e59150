package locksql

// Fence is the check-out write's fence: one row when lockID names a live
// lock of the borrower, held by the caller (user and module, as Holder
// records them), none otherwise. It is what makes a lock worth having: a
// check-out that lost its lock (expired, released, taken over by another
// holder, or, after a crash, never durable) writes nothing, because its
// write names the lock it validated under and only that lock, while it
// lives, lets the write through; any other live lock of the patron, even
// the caller's own newer one, does not. The write takes its snapshot after
// the lock's row is locked (LockRows), so no takeover or release can slip
// between the fence and the write's commit.
//
// lock is the lock table; tenant, lockID, borrower, user and module are
// SQL expressions (text, uuid, uuid, text, text; user and module NULL when
// unnamed).
func Fence(lock, tenant, lockID, borrower, user, module string) string {
	return `SELECT 1 FROM ` + lock + `
     WHERE tenant_id = ` + tenant + ` AND id = ` + lockID + ` AND user_id = ` + borrower + ` AND expires_at > now()
       AND holder->>'acquiredBy' IS NOT DISTINCT FROM ` + user + ` AND holder->>'acquiredByModule' IS NOT DISTINCT FROM ` + module
}
