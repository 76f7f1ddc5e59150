package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/circulation-storage/locksql"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
	"github.com/checkoutlock/schemas/locksettings"
)

var _ storage.LoanWriter = (*Records)(nil)

// checkOutSQL is a check-out's writes in one statement: the item moves to
// "Checked out" at the version the check-out read ($4), and the loan is
// inserted, only if everything storage itself requires holds, whoever
// calls:
//
//   - the lock: with the tenant's lock feature on (lockFeatureSQL: the
//     tenant's setting, else $7, the environment's), a lock is required;
//     a lock named ($3) must be live, the borrower's and held by the
//     caller ($8 user, $11 module: its owner), the fence;
//   - the item limit: the loan policy the circulation rules choose for
//     the borrower and the item (policyMatchSQL) sets it, enforced for a
//     rule naming neither a material nor a loan type only when $6; the
//     patron's open loans are counted here, in the write's own statement;
//   - maximum items charged out: when the borrower's patron group has a
//     limit for that condition of automated patron blocks and the
//     condition blocks borrowing (chargedSQL), the patron's open loans
//     are counted here too, as the item limit's are, and the loan is
//     written only below the limit;
//   - the item's request queue: when its first request (queueHeadSQL)
//     is another patron's, nothing is written; when it is the
//     borrower's, the loan fills it: the request is "Closed - Filled",
//     without a position, and every later request of the queue moves up
//     one, in this statement;
//   - the item at that version. A second open loan for the item fails the
//     whole statement, the item update included.
//
// The write runs in the transaction of its row locks, after them (see
// checkOutBatch): the patron's row is locked against every other check-out
// write for the patron, and the lock's row, under a lock, against every
// acquisition of the patron's lock, before this statement takes its
// snapshot, so the count is exact at the moment of the write: a second
// write for the patron waits for this one's commit and then counts its
// loan too.
//
// With $9 true, the loan written releases the lock in the same statement,
// and the release is announced to the patron's waiters as locksql.Release
// announces it (locksql.Announce, $10 the tenant): the next holder's
// acquisition waits for this transaction's commit, so its recount sees the
// loan.
//
// It always answers one row: the loan as stored (NULL when nothing was
// written), whether the fence held, whether the lock requirement held, the
// open loans counted and the limit (NULL without a limit), the patron whose
// lock was released (NULL when none was), and whether the release was
// announced, so a refusal is explained by what this very statement saw.
var checkOutSQL = `
WITH fence AS (
    ` + locksql.Fence("%[2]s", "$10::text", "$3::uuid", "($2::jsonb ->> 'userId')::uuid", "$8::text", "$11::text") + `
), required AS (
    SELECT $3::uuid IS NOT NULL OR NOT ` + lockFeatureSQL("%[5]s", "$10", "$7::boolean") + ` AS ok
), lent AS (
    SELECT material_type_id, coalesce(temporary_loan_type_id, permanent_loan_type_id) AS loan_type_id, jsonb AS before
      FROM %[3]s WHERE tenant_id = $10 AND id = ($2::jsonb ->> 'itemId')::uuid
), matched AS (` + policyMatchSQL("%[6]s", "%[7]s", "$10",
	"(SELECT patron_group_id FROM %[8]s WHERE tenant_id = $10 AND id = ($2::jsonb ->> 'userId')::uuid)",
	"(SELECT material_type_id FROM lent)", "(SELECT loan_type_id FROM lent)") + `
), limited AS (
    SELECT ` + itemLimitSQL("m", "lp", "$6::boolean") + ` AS n,
           CASE WHEN m.mt_match THEN (SELECT material_type_id FROM lent) END AS mt,
           CASE WHEN m.lt_match THEN (SELECT loan_type_id FROM lent) END AS lt
      FROM matched m JOIN %[9]s lp ON lp.tenant_id = $10 AND lp.id = m.loan_policy_id
), counted AS (
    SELECT (` + locksql.OpenLoanCount("%[1]s", "%[3]s", "$10", "($2::jsonb ->> 'userId')::uuid", "(SELECT mt FROM limited)", "(SELECT lt FROM limited)") + `) AS n
     WHERE (SELECT n FROM limited) IS NOT NULL
), head AS (` + queueHeadSQL("%[12]s", "($2::jsonb ->> 'itemId')::uuid", "$10") + `
), queued AS (
    SELECT coalesce((SELECT requester_id <> ($2::jsonb ->> 'userId')::uuid FROM head), false) AS other
), charged AS (` + chargedSQL("%[10]s", "%[11]s", "$10",
	"(SELECT patron_group_id FROM %[8]s WHERE tenant_id = $10 AND id = ($2::jsonb ->> 'userId')::uuid)") + `
), charged_count AS (
    SELECT (` + locksql.OpenLoanCount("%[1]s", "%[3]s", "$10", "($2::jsonb ->> 'userId')::uuid", "NULL::uuid", "NULL::uuid") + `) AS n
     WHERE EXISTS (SELECT 1 FROM charged)
), allowed AS (
    SELECT (SELECT ok FROM required)
       AND ($3::uuid IS NULL OR EXISTS (SELECT 1 FROM fence))
       AND ($12::boolean OR NOT ` + locksql.Reached("SELECT n FROM counted", "SELECT n FROM limited") + `)
       AND ($13::boolean OR NOT ` + locksql.Reached("SELECT n FROM charged_count", "SELECT lim FROM charged") + `)
       AND NOT (SELECT other FROM queued) AS ok
), item AS (
    UPDATE %[3]s
       SET jsonb = ` + withMetadata(itemWithStatus("Checked out"), 5, true) + `
     WHERE tenant_id = $10 AND id = ($2::jsonb ->> 'itemId')::uuid AND version = $4::integer
       AND (SELECT ok FROM allowed)
 RETURNING id, jsonb
), loan AS (
    INSERT INTO %[1]s (tenant_id, id, jsonb)
    SELECT $10, $1, ` + withMetadata(withID(storage.Loans, `'1'`), 5, false) + `
     WHERE (SELECT ok FROM allowed) AND EXISTS (SELECT 1 FROM item)
    RETURNING jsonb
), filled AS (
    UPDATE %[12]s r
       SET jsonb = ` + withMetadata(`jsonb_set(r.jsonb - 'position', '{status}', '"Closed - Filled"')`, 5, true) + `
     WHERE r.tenant_id = $10 AND r.id = (SELECT id FROM head) AND EXISTS (SELECT 1 FROM loan)
    RETURNING r.id, r.jsonb
), moved_up AS (
    UPDATE %[12]s r
       SET jsonb = jsonb_set(r.jsonb, '{position}', to_jsonb(r.position - 1))
     WHERE r.item_id = ($2::jsonb ->> 'itemId')::uuid AND r.tenant_id = $10 AND left(r.status, 5) = 'Open '
       AND r.position > (SELECT position FROM head) AND EXISTS (SELECT 1 FROM filled)
    RETURNING r.id, r.position, r.jsonb
), announced AS (
    -- The write's events, as migration 9's triggers record other writes'
    -- (the session's checkoutlock.outbox is 'own' here: they record
    -- nothing), and the check-out's own, in the order recorded: each
    -- record's states as they are (building JSON of whole documents
    -- would cost the write more than all the rest of its events).
    SELECT count(*) AS events,
           array_agg(ROW(gen_random_uuid(), e.kind, e.type, e.old, e.new)::%[14]s ORDER BY e.n, e.k) AS payload
      FROM (
        SELECT 1 AS n, 0 AS k, 'item' AS kind, 'UPDATED' AS type, (SELECT before FROM lent) AS old, i.jsonb AS new
          FROM item i WHERE ((SELECT before FROM lent) #>> '{status,name}') IS DISTINCT FROM (i.jsonb #>> '{status,name}')
        UNION ALL
        SELECT 2, 0, 'loan', 'CREATED', NULL, l.jsonb FROM loan l
        UNION ALL
        SELECT 3, 0, 'request', 'UPDATED', (SELECT jsonb FROM head), f.jsonb FROM filled f
        UNION ALL
        SELECT 4, m.position, 'request', 'UPDATED', jsonb_set(m.jsonb, '{position}', to_jsonb(m.position + 1)), m.jsonb FROM moved_up m
        UNION ALL
        SELECT 5, 0, '` + storage.EventKindCheckOut + `', '` + storage.EventCheckedOut + `', NULL, jsonb_strip_nulls(jsonb_build_object(
               'loanId', l.jsonb -> 'id', 'userId', l.jsonb -> 'userId', 'itemId', l.jsonb -> 'itemId',
               'servicePointId', l.jsonb -> 'checkoutServicePointId', 'lockId', $3::uuid,
               'loanDate', l.jsonb -> 'loanDate', 'dueDate', l.jsonb -> 'dueDate')) FROM loan l
      ) e
     WHERE ` + outboxOn + `
), committed AS (
    -- The transaction's commit with its events (migration 10's payload),
    -- recorded after everything it waited for: one row, one index entry
    -- (migration 9's outbox_commit_events, which this statement stands in
    -- for, would find a row of outbox for each event).
    INSERT INTO %[13]s (tenant_id, xid, events, payload)
    SELECT $10, pg_current_xact_id(), events, payload FROM announced WHERE events > 0
), released AS (
    DELETE FROM %[2]s
     WHERE $9::boolean AND tenant_id = $10 AND id = $3::uuid AND EXISTS (SELECT 1 FROM fence) AND EXISTS (SELECT 1 FROM loan)
    RETURNING user_id
)
SELECT (SELECT jsonb FROM loan), $3::uuid IS NULL OR EXISTS (SELECT 1 FROM fence), (SELECT ok FROM required),
       (SELECT n FROM counted), (SELECT n FROM limited),
       released.user_id::text,
       ` + locksql.Announce("%[4]s", "$10") + `,
       (SELECT n FROM charged_count), (SELECT lim FROM charged), (SELECT message FROM charged),
       (SELECT other FROM queued), (SELECT id::text FROM head),
       ` + locksql.Reached("SELECT n FROM counted", "SELECT n FROM limited") + `,
       ` + locksql.Reached("SELECT n FROM charged_count", "SELECT lim FROM charged") + `
  FROM (SELECT 1) AS one LEFT JOIN released ON true`

// chargedSQL is the limit of maximum items charged out that holds a
// check-out's write: one row (lim, message) when the patron group (group,
// an SQL expression) has a limit for the condition and the condition
// blocks borrowing, none otherwise. limit and condition are the tables,
// tenant the SQL that gives the tenant.
func chargedSQL(limit, condition, tenant, group string) string {
	return `
    SELECT pl.value AS lim, coalesce(nullif(c.jsonb ->> 'message', ''), c.jsonb ->> 'name') AS message
      FROM ` + limit + ` pl JOIN ` + condition + ` c ON c.tenant_id = pl.tenant_id AND c.id = pl.condition_id
     WHERE pl.tenant_id = ` + tenant + ` AND pl.patron_group_id = ` + group + `
       AND pl.condition_id = '` + storage.ConditionItemsChargedOut + `' AND c.jsonb ->> 'blockBorrowing' = 'true'`
}

// lockFeatureSQL is whether the tenant's check-out lock feature is on, as
// storage reads it in a write: what the checkoutLockFeature entry says,
// decoded when the entry was written by the decoder circulation reads it
// with (lockFeature, migration 12), else def (the environment's). The
// value's text is never read here. setting is the settings table, tenant
// the SQL that gives the tenant.
func lockFeatureSQL(setting, tenant, def string) string {
	return `coalesce((SELECT CASE s.lock_feature WHEN 'on' THEN true WHEN 'off' THEN false END
      FROM ` + setting + ` s WHERE s.tenant_id = ` + tenant + ` AND s.scope = '` + locksettings.Scope + `' AND s.key = '` + locksettings.Key + `'), ` + def + `)`
}

// itemWithStatus is the item row's document with the status named
// (a constant of this package, never a client's value), dated now, one
// version on: what a check-out or a check-in writes.
func itemWithStatus(name string) string {
	return `jsonb_set(jsonb_set(jsonb, '{status}', jsonb_build_object('name', '` + name + `', 'date', ` + sqlNow + `)),
                   '{_version}', to_jsonb(version + 1))`
}

// A check-out's write on the shared tables: locksql.LockRows (under a
// lock) or locksql.PatronRow (without one), and checkOutSQL, whose
// parameters are: $1 loan id, $2 loan, $3 lock id, $4 item version, $5 user
// for the metadata, $6 whether an unscoped item limit is enforced, $7 the
// lock feature's default, $8 and $11 the caller (user and module), $9
// whether to release the lock, $10 the tenant, $12 and $13 whether an
// override lifts the item limit and the maximum items charged out.
var (
	lockRowsSQL   = withTables(locksql.LockRows, tableLock, tablePatron)
	patronRowSQL  = withTables(locksql.PatronRow, tablePatron)
	checkOutWrite = withTables(checkOutSQL, tableLoan, tableLock, tableItem, tableLockWaiter, tableSetting,
		tableCirculationRule, tableCirculationRules, tablePatron, tableLoanPolicy, tableBlockLimit, tableBlockCondition, tableRequest, tableOutboxCommit,
		typeOutboxEvent)
)

// checkOutResult is the row checkOutSQL answers.
type checkOutResult struct {
	stored           json.RawMessage
	fenced, required bool
	open, limit      *int
	released         *string
	notified         bool
	// charged and chargedLimit are the open loans counted against the
	// patron group's maximum items charged out, and the limit, with the
	// condition's message; nil without such a limit.
	charged       *int
	chargedLimit  *float64
	chargedReason *string
	// requested says the item's first request is another patron's, head
	// names the first request (nil without one).
	requested bool
	head      *string
	// limitReached and chargedReached say the patron is at the item limit
	// and at the maximum items charged out, as the write compared them.
	limitReached, chargedReached bool
}

// ownEventsSQL has the transaction record its events itself (checkOutSQL
// does, and records its commit), instead of the triggers of migration 9,
// unless the session records none: one statement inserts them all, where
// the triggers would run a statement for each.
var ownEventsSQL = `SELECT set_config('checkoutlock.outbox', 'own', true) WHERE ` + outboxOn

// checkOutBatch is a check-out's write as one batch, sent in one round trip
// and run as one transaction: ownEventsSQL, locksql.LockRows under a lock,
// locksql.PatronRow without one, then checkOutSQL. The result is filled in when the batch's
// results are read.
func (s *Records) checkOutBatch(ctx context.Context, t storage.Tenant, w storage.CheckOutWrite) (*pgx.Batch, *checkOutResult) {
	caller := storage.CallerFrom(ctx)
	b := &pgx.Batch{}
	b.Queue(ownEventsSQL)
	if w.LockID != "" {
		b.Queue(lockRowsSQL, w.LockID, w.UserID, string(t))
	} else {
		b.Queue(patronRowSQL, w.UserID, string(t))
	}
	r := &checkOutResult{}
	b.Queue(checkOutWrite, w.LoanID, w.Loan, nullable(w.LockID), w.ItemVersion, metadataUser(ctx),
		s.policy.EnforceUnscopedItemLimit, s.policy.LockFeatureDefault, nullable(caller.User), w.ReleaseLock, string(t),
		nullable(caller.Module), w.OverrideItemLimit, w.OverridePatronBlock).QueryRow(func(row pgx.Row) error {
		return row.Scan(&r.stored, &r.fenced, &r.required, &r.open, &r.limit, &r.released, &r.notified,
			&r.charged, &r.chargedLimit, &r.chargedReason, &r.requested, &r.head, &r.limitReached, &r.chargedReached)
	})
	return b, r
}

// CreateCheckOutLoan implements storage.LoanWriter.
func (s *Records) CreateCheckOutLoan(ctx context.Context, t storage.Tenant, w storage.CheckOutWrite) (storage.CheckOutWritten, error) {
	b, r := s.checkOutBatch(ctx, t, w)
	// A batch runs in one implicit transaction, committed at its end.
	err := s.db.write(ctx, t, func(c *pgx.Conn) error { return c.SendBatch(ctx, b).Close() })
	switch {
	case err != nil:
		return storage.CheckOutWritten{}, interpretWrite(err, t, storage.Loans, w.Loan)
	case r.stored != nil:
		if r.released != nil {
			s.releasedByWrite(t, r)
		}
		return storage.CheckOutWritten{Loan: r.stored, LockReleased: r.released != nil}, nil
	// Nothing written: say which condition failed, as the statement saw it.
	case !r.required:
		return storage.CheckOutWritten{}, errs.Errorf(errs.KindInvalid, schemas.CodeLockRequired,
			"The check-out lock is on for this tenant: a loan is opened only under the borrower's live lock (%s); nothing was written",
			schemas.HeaderLockID)
	case !r.fenced:
		return storage.CheckOutWritten{}, errs.Errorf(errs.KindConflict, schemas.CodeLockLost,
			"Check-out lock %s is not held for this patron by this caller (it expired, was released, or is someone else's); nothing was written", w.LockID).
			With("lockId", w.LockID)
	case r.requested:
		return storage.CheckOutWritten{}, errs.Errorf(errs.KindInvalid, schemas.CodeItemRequestedByAnotherPatron,
			"The item's first request is another patron's; nothing was written").With("requestId", deref(r.head))
	case !w.OverrideItemLimit && r.limitReached:
		return storage.CheckOutWritten{}, storage.ItemLimitReached(*r.limit, *r.open)
	case !w.OverridePatronBlock && r.chargedReached:
		return storage.CheckOutWritten{}, storage.ChargedOutLimitReached(deref(r.chargedReason), *r.chargedLimit, *r.charged)
	}
	itemID := fieldValue(w.Loan, "itemId")
	var stored2 int
	err = s.db.pool.QueryRow(ctx, withTables(`SELECT version FROM %s WHERE tenant_id = $2 AND id = $1`, tableItem), itemID, string(t)).Scan(&stored2)
	if errors.Is(err, pgx.ErrNoRows) {
		return storage.CheckOutWritten{}, errs.Errorf(errs.KindInvalid, schemas.CodeValidation, "itemId: item %s does not exist", itemID).With("itemId", itemID)
	}
	if err != nil {
		return storage.CheckOutWritten{}, interpret(err, t)
	}
	return storage.CheckOutWritten{}, errs.Errorf(errs.KindConflict, schemas.CodeVersionConflict,
		"Cannot check out item %s because it has been changed: stored _version is %d, request has %d; nothing was written",
		itemID, stored2, w.ItemVersion).With("_version", fmt.Sprint(stored2))
}

// releasedByWrite tells the patron's waiters on this instance, at once,
// of a lock a check-out's write released, when the release was announced.
// The history has nothing to learn of it: the fence lets only the lock's
// owner write under it, so the release is always the owner's own.
func (s *Records) releasedByWrite(t storage.Tenant, r *checkOutResult) {
	if r.notified && s.released != nil {
		s.released(t, *r.released)
	}
}
