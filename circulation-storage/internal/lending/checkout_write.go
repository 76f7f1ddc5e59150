package lending

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/circulation-storage/internal/record"
	"github.com/checkoutlock/circulation-storage/internal/requests"
	"github.com/checkoutlock/circulation-storage/internal/rules"
	"github.com/jackc/pgx/v5"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/circulation-storage/locksql"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
	"github.com/checkoutlock/schemas/locksettings"
)

// Loans writes loans as circulation does: a check-out, a check-in, a
// renewal and a loan action, each in one transaction that holds the
// rules (the lock, the limits, the blocks, the requests, the versions
// read) whoever calls.
type Loans struct {
	db *postgres.DB
	// Released, when set, is told of a check-out's release of a lock
	// that someone waits for, at once (see OnRelease).
	released func(t storage.Tenant, userID string)
	// policy is how the check-out write applies the rules and the lock.
	policy Policy
	// history says whether a check-out lent offline past a rule is a line
	// of the lock history (LOCK_HISTORY); events is told of each.
	history bool
	events  storage.EventObserver
	// rules are the check-out's rules as its write judges them
	// (writeRules), write and writeLean its statement in full and lean
	// judging them (checkOutWrite, checkOutWriteLean).
	rules            []writeRule
	write, writeLean locksql.Named
}

var _ storage.LoanWriter = (*Loans)(nil)

// NewLoans returns the loan writer, configured by opts (OnRelease).
func NewLoans(db *postgres.DB, policy Policy, opts ...postgres.Option) *Loans {
	o := postgres.ApplyOptions(opts)
	return &Loans{db: db, policy: policy, released: o.Released, history: o.History, events: o.Events,
		rules: writeRules, write: checkOutWrite, writeLean: checkOutWriteLean}
}

// checkOutSQL is a check-out's writes in one statement: the item moves to
// "Checked out" at the version the check-out read (@item_version), and the loan is
// inserted, only if everything storage itself requires holds, whoever
// calls:
//
//   - the lock: with the tenant's lock feature on (lockFeatureSQL: the
//     tenant's setting, else @lock_default, the environment's), a lock is required;
//     a lock named (@lock_id) must be live, the borrower's and held by the
//     caller (@caller_user, @caller_module: its owner), the fence;
//   - the item limit: the loan policy the circulation rules choose for
//     the borrower and the item (rules.PolicyMatchSQL) sets it, enforced for a
//     rule naming neither a material nor a loan type only when @enforce_unscoped; the
//     patron's open loans are counted here, in the write's own statement;
//   - maximum items charged out: when the borrower's patron group has a
//     limit for that condition of automated patron blocks and the
//     condition blocks borrowing (chargedSQL), the patron's open loans
//     are counted here too, as the item limit's are, and the loan is
//     written only below the limit;
//   - the item's request queue: when its first request (requests.QueueHeadSQL)
//     is another patron's, nothing is written; when it is the
//     borrower's, the loan fills it: the request is "Closed - Filled",
//     without a position, and every later request of the queue moves up
//     one, in this statement;
//   - the borrower active and not expired (FOLIO's InactiveUserValidator,
//     not overridable), the item's status one FOLIO checks out
//     (schemas.ItemStatusesNotCheckedOut), the loan policy lending
//     (loanable, unless @override_not_loanable), and no manual block of
//     the borrower's borrowing in force nor automated block of it
//     (rules.AutomatedBlocksSQL: maximum lost and overdue items; maximum items
//     charged out is counted above), unless @override_charged, the patron
//     block override: so a write that skips circulation's validation is
//     refused as circulation would refuse it;
//   - the item at that version. A second open loan for the item fails the
//     whole statement, the item update included.
//
// A check-out a self-check machine made offline (@offline: its loan
// carries offline) is recorded past every rule above but the lock, its
// fence and the item's version: it already happened. It is refused, as
// one made on line (on_line), when a door saw its machine on line at its
// transaction date: inside a span of the machine's presence by more than
// @offline_grace_ms (schemas.MaxOfflineGrace), the machine being
// @caller_account's at @caller_kiosk when the call names a machine
// (@caller_kiosk_named; "" for one that gave no location code), at any
// location when it names none (a call no door passed on). Whatever loan
// carries offline, its offline.brokenRules is what this statement found
// broken (brokenRulesSQL, never the caller's list), a line of the lock
// history says so when it broke any (@history), and the check-out's event
// carries it. Another patron's request heading the queue stays open.
//
// The write runs in the transaction of its row locks, after them (see
// checkOutBatch): the patron's row is locked against every other check-out
// write for the patron, and the lock's row, under a lock, against every
// acquisition of the patron's lock, before this statement takes its
// snapshot, so the count is exact at the moment of the write: a second
// write for the patron waits for this one's commit and then counts its
// loan too.
//
// With @release true, the loan written releases the lock in the same statement,
// and the release is announced to the patron's waiters as locksql.Release
// announces it (locksql.Announce)): the next holder's
// acquisition waits for this transaction's commit, so its recount sees the
// loan.
//
// It always answers one row: the loan as stored (NULL when nothing was
// written), whether the fence held, whether the lock requirement held, the
// open loans counted and the limit (NULL without a limit), the patron whose
// lock was released (NULL when none was), and whether the release was
// announced, so a refusal is explained by what this very statement saw;
// and, last, whether the statement must be run in full: always false in
// full; lean (gate.go), whether the tenant has a gate row, in which case
// nothing was written. The lean form reads no request and no block limit:
// the item's queue is taken as empty and no maximum items charged out
// applies.
func checkOutSQL(lean bool, judges []writeRule) string {
	loan, lock, item, waiter := postgres.Table(postgres.TableLoan), postgres.Table(postgres.TableLock), postgres.Table(postgres.TableItem), postgres.Table(postgres.TableLockWaiter)
	setting, rule, ruleSet, patron := postgres.Table(postgres.TableSetting), postgres.Table(postgres.TableCirculationRule), postgres.Table(postgres.TableCirculationRules), postgres.Table(postgres.TablePatron)
	policy, blockLimit, condition, request := postgres.Table(postgres.TableLoanPolicy), postgres.Table(postgres.TableBlockLimit), postgres.Table(postgres.TableBlockCondition), postgres.Table(postgres.TableRequest)
	commit, event := postgres.Table(postgres.TableOutboxCommit), postgres.Table(postgres.TypeOutboxEvent)
	history, presence := postgres.Table(postgres.TableLockEvent), postgres.Table(postgres.TableKioskPresence)
	group := "(SELECT patron_group_id FROM " + patron + " WHERE tenant_id = @tenant AND id = (@loan::jsonb ->> 'userId')::uuid)"
	head := requests.QueueHeadSQL(request, "(@loan::jsonb ->> 'itemId')::uuid", "@tenant")
	charged := chargedSQL(blockLimit, condition, "@tenant", group)
	// The queue's changes, as package requests makes every one: the
	// borrower's request at its head filled, the requests after it
	// moved up.
	// The loan's policy, and whether the due date sent is the one it
	// gives, to be moved off closed days: a check-out's, or one through an
	// override of a block or the limit (FOLIO's); not one lending an item
	// its policy does not lend, due when the librarian says.
	loanPolicy := "(SELECT jsonb FROM " + policy + " WHERE tenant_id = @tenant AND id = (@loan::jsonb ->> 'loanPolicyId')::uuid)"
	policysDue := "@loan::jsonb ->> 'action' = " + postgres.Lit(schemas.LoanCheckedOut) +
		" OR (@loan::jsonb ->> 'action' = " + postgres.Lit(schemas.LoanCheckedOutThroughOverride) + " AND coalesce((" + loanPolicy + " ->> 'loanable')::boolean, true))"
	filled := requests.FillSQL("@tenant", "(SELECT id FROM head)", "NOT (SELECT other FROM queued) AND EXISTS (SELECT 1 FROM loan)", "@metadata_user")
	movedUp := requests.ShiftSQL("(@loan::jsonb ->> 'itemId')::uuid", "@tenant", "-1", "r.position > (SELECT position FROM head)", "EXISTS (SELECT 1 FROM filled)")
	manual := rules.ManuallyBlockedSQL("(@loan::jsonb ->> 'userId')::uuid", "borrowing")
	automated := `
    SELECT b ->> 'patronBlockConditionId' AS condition, b ->> 'message' AS message
      FROM jsonb_array_elements(coalesce(` + rules.AutomatedBlocksSQL("@tenant", "(@loan::jsonb ->> 'userId')::uuid", group) + `, '[]'::jsonb)) b
     WHERE (b ->> 'blockBorrowing')::boolean AND b ->> 'patronBlockConditionId' <> '` + storage.ConditionItemsChargedOut + `'`
	gated := "false"
	if lean {
		manual = "false"
		automated = `SELECT NULL::text AS condition, NULL::text AS message WHERE false`
		head = `SELECT NULL::uuid AS id, NULL::uuid AS requester_id, NULL::integer AS position, NULL::jsonb AS jsonb WHERE false`
		charged = `SELECT NULL::numeric AS lim, NULL::text AS message WHERE false`
		filled = `SELECT NULL::uuid AS id, NULL::jsonb AS jsonb WHERE false`
		movedUp = `SELECT NULL::uuid AS id, NULL::integer AS position, NULL::jsonb AS jsonb WHERE false`
		gated = postgres.GateRowSQL("@tenant")
	}
	return `
WITH fence AS (
    ` + locksql.Fence(lock, "@tenant::text", "@lock_id::uuid", "(@loan::jsonb ->> 'userId')::uuid", "@caller_user::text", "@caller_module::text") + `
), required AS (
    SELECT @lock_id::uuid IS NOT NULL OR NOT ` + lockFeatureSQL(setting, "@tenant", "@lock_default::boolean") + ` AS ok
), lent AS (
    SELECT material_type_id, coalesce(temporary_loan_type_id, permanent_loan_type_id) AS loan_type_id, jsonb AS before,
           status_name = ANY(@refused_statuses::text[]) AS refused
      FROM ` + item + ` WHERE tenant_id = @tenant AND id = (@loan::jsonb ->> 'itemId')::uuid
), borrower AS (
    SELECT ` + rules.PatronActiveSQL("p") + ` AS active,
           ` + manual + ` AS blocked
      FROM ` + patron + ` p WHERE p.tenant_id = @tenant AND p.id = (@loan::jsonb ->> 'userId')::uuid
), matched AS (` + rules.PolicyMatchSQL(rule, ruleSet, "@tenant", group,
		"(SELECT material_type_id FROM lent)", "(SELECT loan_type_id FROM lent)") + `
), limited AS (
    SELECT ` + itemLimitSQL("m", "lp", "@enforce_unscoped::boolean") + ` AS n,
           coalesce((lp.jsonb ->> 'loanable')::boolean, true) AS loanable,
           CASE WHEN m.mt_match THEN (SELECT material_type_id FROM lent) END AS mt,
           CASE WHEN m.lt_match THEN (SELECT loan_type_id FROM lent) END AS lt
      FROM matched m JOIN ` + policy + ` lp ON lp.tenant_id = @tenant AND lp.id = m.loan_policy_id
), counted AS (
    SELECT (` + rules.OpenLoanCount(loan, item, "@tenant", "(@loan::jsonb ->> 'userId')::uuid", "(SELECT mt FROM limited)", "(SELECT lt FROM limited)") + `) AS n
     WHERE (SELECT n FROM limited) IS NOT NULL
), gate AS (
    SELECT ` + gated + ` AS gated
), in_time AS (
    -- Before the caller's deadline (@write_within_ms after the transaction
    -- began; NULL: none): a write that reaches this statement later, having
    -- waited for rows, writes nothing. Read once: clock_timestamp() moves.
    SELECT @write_within_ms::bigint IS NULL
        OR clock_timestamp() < transaction_timestamp() + @write_within_ms::bigint * interval '1 millisecond' AS ok
), head AS (` + head + `
), queued AS (
    SELECT coalesce((SELECT requester_id <> (@loan::jsonb ->> 'userId')::uuid FROM head), false) AS other
), charged AS (` + charged + `
), automated AS (` + automated + `
), charged_count AS (
    SELECT (` + rules.OpenLoanCount(loan, item, "@tenant", "(@loan::jsonb ->> 'userId')::uuid", "NULL::uuid", "NULL::uuid") + `) AS n
     WHERE EXISTS (SELECT 1 FROM charged)
), seen AS (
    SELECT @offline::boolean AND EXISTS (
        SELECT 1 FROM ` + presence + ` p
         WHERE p.tenant_id = @tenant AND p.account_id = @caller_account::uuid
           AND (NOT @caller_kiosk_named::boolean OR p.location = @caller_kiosk::text)
           AND p.on_from + @offline_grace_ms::bigint * interval '1 millisecond' < (@loan::jsonb ->> 'loanDate')::timestamptz
           AND p.on_to - @offline_grace_ms::bigint * interval '1 millisecond' > (@loan::jsonb ->> 'loanDate')::timestamptz
    ) AS on_line
), judged AS (
    -- Every check-out rule, judged once (checkout_rules.go).
    ` + judgedSQL(judges) + `
), allowed AS (
    SELECT (SELECT ok FROM required)
       AND (@lock_id::uuid IS NULL OR EXISTS (SELECT 1 FROM fence))
       AND (@offline::boolean OR NOT EXISTS (SELECT 1 FROM judged WHERE hit AND name <> ALL (coalesce(@lifted::text[], '{}'))))
       AND NOT (SELECT on_line FROM seen)
       AND NOT (SELECT gated FROM gate)
       AND (SELECT ok FROM in_time) AS ok
), item AS (
    UPDATE ` + item + `
       SET jsonb = ` + record.WithMetadata(record.ItemWithStatus(schemas.ItemCheckedOut), "@metadata_user", true) + `
     WHERE tenant_id = @tenant AND id = (@loan::jsonb ->> 'itemId')::uuid AND version = @item_version::integer
       AND (SELECT ok FROM allowed)
 RETURNING id, jsonb
), broken AS (
    SELECT ` + brokenRulesSQL + ` AS rules
), sent AS (
    -- The loan as sent, but for a loan made offline its broken rules:
    -- this statement's; for any other, its due date off the library's
    -- closed days.
    SELECT CASE WHEN @loan::jsonb ? 'offline'
                THEN jsonb_set(@loan::jsonb, '{offline,brokenRules}', (SELECT rules FROM broken))
                ELSE ` + movedDueSQL("@loan::jsonb", loanPolicy, policysDue) + ` END AS doc
), loan AS (
    INSERT INTO ` + loan + ` (tenant_id, id, jsonb)
    SELECT @tenant, @loan_id, ` + record.WithMetadata(record.WithID(storage.Loans, "@loan_id", "(SELECT doc FROM sent)", `'1'`), "@metadata_user", false) + `
     WHERE (SELECT ok FROM allowed) AND EXISTS (SELECT 1 FROM item)
    RETURNING jsonb
), lent_offline AS (
    -- The operator's line: a loan made offline that broke a rule.
    INSERT INTO ` + history + ` (tenant_id, type, user_id, lock_id, by_whom, loan_id, broken_rules)
    SELECT @tenant, '` + string(storage.EventLentOffline) + `', (l.jsonb ->> 'userId')::uuid, @lock_id::uuid, @by_whom::jsonb, @loan_id::uuid,
           ARRAY(SELECT jsonb_array_elements_text(l.jsonb #> '{offline,brokenRules}'))
      FROM loan l
     WHERE @history::boolean AND jsonb_array_length(coalesce(l.jsonb #> '{offline,brokenRules}', '[]')) > 0
    RETURNING 1
), filled AS (` + filled + `
), moved_up AS (` + movedUp + `
), announced AS (
    -- The write's events, as migration 9's triggers record other writes'
    -- (the session's checkoutlock.outbox is 'own' here: they record
    -- nothing), and the check-out's own, in the order recorded: each
    -- record's states as they are (building JSON of whole documents
    -- would cost the write more than all the rest of its events).
    SELECT count(*) AS events,
           array_agg(ROW(gen_random_uuid(), e.kind, e.type, e.old, e.new)::` + event + ` ORDER BY e.n, e.k) AS payload
      FROM (
        SELECT 1 AS n, 0 AS k, 'item' AS kind, 'UPDATED' AS type, (SELECT before FROM lent) AS old, i.jsonb AS new
          FROM item i WHERE ((SELECT before FROM lent) #>> '{status,name}') IS DISTINCT FROM (i.jsonb #>> '{status,name}')
        UNION ALL
        SELECT 2, 0, 'loan', 'CREATED', NULL, l.jsonb FROM loan l
        UNION ALL
        SELECT 3, 0, 'request', 'UPDATED', (SELECT jsonb FROM head), f.jsonb FROM filled f
        UNION ALL
        SELECT 4, m.position, 'request', 'UPDATED', ` + requests.ShiftedPosition("m", "1") + `, m.jsonb FROM moved_up m
        UNION ALL
        SELECT 5, 0, '` + storage.EventKindCheckOut + `', '` + storage.EventCheckedOut + `', NULL, jsonb_strip_nulls(jsonb_build_object(
               'loanId', l.jsonb -> 'id', 'userId', l.jsonb -> 'userId', 'itemId', l.jsonb -> 'itemId',
               'servicePointId', l.jsonb -> 'checkoutServicePointId', 'lockId', @lock_id::uuid,
               'loanDate', l.jsonb -> 'loanDate', 'dueDate', l.jsonb -> 'dueDate', 'offline', l.jsonb -> 'offline')) FROM loan l
      ) e
     WHERE ` + postgres.OutboxOn + `
), committed AS (
    -- The transaction's commit with its events (migration 10's payload),
    -- recorded after everything it waited for: one row, one index entry
    -- (migration 9's outbox_commit_events, which this statement stands in
    -- for, would find a row of outbox for each event).
    INSERT INTO ` + commit + ` (tenant_id, xid, events, payload)
    SELECT @tenant, pg_current_xact_id(), events, payload FROM announced WHERE events > 0
), ` + postgres.AnsweredSQL("(SELECT jsonb FROM loan)", "EXISTS (SELECT 1 FROM loan)") + `
), released AS (
    DELETE FROM ` + lock + `
     WHERE @release::boolean AND tenant_id = @tenant AND id = @lock_id::uuid AND EXISTS (SELECT 1 FROM fence) AND EXISTS (SELECT 1 FROM loan)
    RETURNING user_id
)
SELECT (SELECT jsonb FROM loan) AS stored, @lock_id::uuid IS NULL OR EXISTS (SELECT 1 FROM fence) AS fenced,
       (SELECT ok FROM required) AS required,
       (SELECT n FROM counted) AS open, (SELECT n FROM limited) AS item_limit,
       released.user_id::text AS released,
       ` + locksql.Announce(waiter, "@tenant") + ` AS notified,
       (SELECT n FROM charged_count) AS charged, (SELECT lim FROM charged) AS charged_limit,
       (SELECT message FROM charged) AS charged_reason,
       (SELECT id::text FROM head) AS head,
       ARRAY(SELECT name FROM judged WHERE hit ORDER BY n) AS broken_rules,
       (SELECT before #>> '{status,name}' FROM lent WHERE refused) AS refused_status,
       (SELECT jsonb_agg(jsonb_build_object('condition', condition, 'message', message) ORDER BY condition) FROM automated) AS automated,
       (SELECT gated FROM gate) AS full,
       NOT (SELECT ok FROM in_time) AS late,
       (SELECT on_line FROM seen) AS on_line,
       EXISTS (SELECT 1 FROM lent_offline) AS lent_offline
  FROM (SELECT 1) AS one LEFT JOIN released ON true`
}

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
// with (LockFeature, migration 12), else def (the environment's). The
// value's text is never read here. setting is the settings table, tenant
// the SQL that gives the tenant.
func lockFeatureSQL(setting, tenant, def string) string {
	return `coalesce((SELECT CASE s.lock_feature WHEN 'on' THEN true WHEN 'off' THEN false END
      FROM ` + setting + ` s WHERE s.tenant_id = ` + tenant + ` AND s.scope = '` + locksettings.Scope + `' AND s.key = '` + locksettings.Key + `'), ` + def + `)`
}

// A check-out's write on the shared tables: locksql.LockRows (under a
// lock) or locksql.PatronRow (without one), and checkOutSQL, whose
// arguments are named (checkOutArgs).
var (
	lockRowsSQL = postgres.WithTables(locksql.LockRows, postgres.TableLock, postgres.TablePatron)
	// acquireInWriteSQL and dropInWriteSQL take and drop the lock of a
	// write that acquires it itself (CheckOutWrite.AcquireInWrite).
	acquireInWriteSQL = postgres.WithTables(locksql.AcquireInWrite, postgres.TableLock)
	dropInWriteSQL    = postgres.WithTables(locksql.DropInWrite, postgres.TableLock)
	// itemRowSQL locks the item's row after the patron's (and the lock's),
	// before the write takes its snapshot: the write fills the item's
	// queue and moves it up, and a request joining the queue meanwhile
	// (package requests' queue.go, which takes the same row first) must
	// be seen by it or wait for it. Parameters: $1 the item, $2 the tenant.
	itemRowSQL = postgres.WithTables(`SELECT 1 FROM %s WHERE tenant_id = $2 AND id = $1 FOR NO KEY UPDATE`, postgres.TableItem)
	// checkOutWrite is checkOutSQL in full, checkOutWriteLean lean (gate.go).
	checkOutWrite     = locksql.NewNamed(checkOutSQL(false, writeRules), checkOutNames...)
	checkOutWriteLean = locksql.NewNamed(checkOutSQL(true, writeRules), checkOutNames...)
)

// checkOutNames are the names of checkOutSQL's arguments.
var checkOutNames = []string{"tenant", "loan_id", "loan", "lock_id", "item_version", "metadata_user",
	"enforce_unscoped", "lock_default", "caller_user", "caller_module", "release", "lifted", "refused_statuses", "write_within_ms", "offline", "history", "by_whom", "write_id",
	"caller_account", "caller_kiosk", "caller_kiosk_named", "offline_grace_ms"}

// checkOutArgs are checkOutSQL's arguments, by name: a name the statement
// uses and this does not give, or one it gives and the statement does not
// use, fails the write (locksql.Named.Bind) before it reaches the database.
func (s *Loans) checkOutArgs(ctx context.Context, t storage.Tenant, w storage.CheckOutWrite) pgx.StrictNamedArgs {
	caller := storage.CallerFrom(ctx)
	return pgx.StrictNamedArgs{
		"tenant":        string(t),
		"loan_id":       w.LoanID,
		"loan":          w.Loan,
		"lock_id":       postgres.Nullable(w.LockID),
		"item_version":  w.ItemVersion,
		"metadata_user": record.MetadataUser(ctx),
		// The environment's part: whether a rule naming neither a material
		// nor a loan type limits, and whether the lock is on for a tenant
		// without a setting.
		"enforce_unscoped": s.policy.EnforceUnscopedItemLimit,
		"lock_default":     s.policy.LockFeatureDefault,
		// The caller, who must own the lock named.
		"caller_user":   postgres.Nullable(caller.User),
		"caller_module": postgres.Nullable(caller.Module),
		"release":       w.ReleaseLock,
		// The rules the check-out's overrides lift, by name.
		"lifted":           overrides(w).Lifted(),
		"refused_statuses": schemas.ItemStatusesNotCheckedOut,
		// A check-out made offline, recorded past the rules; the lock
		// history's line of it, and who sent it.
		"offline": w.Offline,
		"history": s.history,
		"by_whom": postgres.HolderValue(caller.Holder()),
		// The machine whose presence judges a check-out made offline,
		// and how far inside a span of it one is taken as made on line.
		"caller_account":     postgres.Nullable(caller.Account()),
		"caller_kiosk":       caller.Kiosk,
		"caller_kiosk_named": caller.NamesKiosk(),
		"offline_grace_ms":   s.policy.OfflineGrace.Milliseconds(),
		// The caller's deadline, as the time left from now: PostgreSQL's
		// clock and this server's need not agree.
		"write_within_ms": writeWithin(ctx),
		// The write's id, claimed before (nil: none).
		"write_id": postgres.WriteID(ctx),
	}
}

// writeWithin is the time ctx leaves for a write, in milliseconds from
// now (at least 0: none), nil without a deadline.
func writeWithin(ctx context.Context) *int64 {
	d, ok := ctx.Deadline()
	if !ok {
		return nil
	}
	ms := max(time.Until(d).Milliseconds(), 0)
	return &ms
}

// checkOutResult is the row checkOutSQL answers, read by column name.
type checkOutResult struct {
	Stored json.RawMessage `db:"stored"`
	// Fenced says the lock named covers the write (or none was named),
	// Required that the tenant's lock rule lets it be written.
	Fenced   bool `db:"fenced"`
	Required bool `db:"required"`
	// Open and Limit are the patron's open loans counted against the item
	// limit, and the limit; nil without one.
	Open     *int    `db:"open"`
	Limit    *int    `db:"item_limit"`
	Released *string `db:"released"`
	Notified bool    `db:"notified"`
	// Charged and ChargedLimit are the open loans counted against the
	// patron group's maximum items charged out, and the limit, with the
	// condition's message; nil without such a limit.
	Charged       *int     `db:"charged"`
	ChargedLimit  *float64 `db:"charged_limit"`
	ChargedReason *string  `db:"charged_reason"`
	// Head names the item's first request (nil without one).
	Head *string `db:"head"`
	// Broken is the names of the rules the check-out breaks, in order,
	// whether or not an override lifts them (schemas.CheckOutRules).
	Broken []string `db:"broken_rules"`
	// RefusedStatus is the item's status when it is one not checked out
	// (nil otherwise).
	RefusedStatus *string `db:"refused_status"`
	// Automated is the automated blocks of borrowing but maximum items
	// charged out: [{condition, message}], nil for none.
	Automated json.RawMessage `db:"automated"`
	// Full says the lean statement found the tenant's gate row and wrote
	// nothing: the full one must run.
	Full bool `db:"full"`
	// Late says the statement ran past the caller's deadline and wrote
	// nothing.
	Late bool `db:"late"`
	// OnLine says the check-out says it was made offline, but a door saw
	// its machine on line then: nothing was written.
	OnLine bool `db:"on_line"`
	// LentOffline says the statement wrote the lock history's line of a
	// loan made offline past a rule.
	LentOffline bool `db:"lent_offline"`
	// acquired says a write that acquires its lock itself took it.
	acquired bool
}

// writeSettingsSQL is the settings a check-out's write runs under, local
// to its transaction: the transaction's statements after it (its triggers'
// too) run by their generic plans (postgres.GenericPlans), and it records
// its events itself (checkOutSQL does, and records its commit), instead
// of the triggers of migration 9, unless the session records none: one
// statement inserts them all, where the triggers would run a statement
// for each.
var writeSettingsSQL = `SELECT ` + postgres.GenericPlans + `, CASE WHEN ` + postgres.OutboxOn + ` THEN set_config('checkoutlock.outbox', 'own', true) END`

// checkOutBatch is a check-out's write as one batch, sent in one round
// trip and run as one transaction: the write's id (id, nil for none),
// writeSettingsSQL, locksql.LockRows under a lock, locksql.PatronRow without
// one, the item's row (itemRowSQL), then checkOutSQL, lean or in full
// (gate.go). The result is filled in when the batch's results are read.
func (s *Loans) checkOutBatch(ctx context.Context, t storage.Tenant, w storage.CheckOutWrite, lean bool, id *storage.Write) (*pgx.Batch, *checkOutResult) {
	b := &pgx.Batch{}
	if id != nil {
		// The write's id first: a second run of the same write waits here
		// for the first's transaction, and fails if it landed.
		b.Queue(postgres.ClaimSQL, postgres.ClaimArgs(t, *id, schemas.WriteCheckOut))
	}
	b.Queue(writeSettingsSQL)
	return b, s.queueCheckOut(ctx, b, t, w, lean)
}

// queueCheckOut queues a check-out's statements, after writeSettingsSQL, in
// b; the result is filled in when b's results are read.
func (s *Loans) queueCheckOut(ctx context.Context, b *pgx.Batch, t storage.Tenant, w storage.CheckOutWrite, lean bool) *checkOutResult {
	r := &checkOutResult{}
	if a := w.AcquireInWrite; a != nil {
		// The lock first, so that a patron's writes queue on its row.
		b.Queue(acquireInWriteSQL, pgx.StrictNamedArgs{"lock_id": w.LockID, "user_id": w.UserID, "ttl_ms": a.TTL.Milliseconds(),
			"holder": postgres.HolderValue(a.Holder), "tenant": string(t)}).
			Query(func(rows pgx.Rows) error {
				acquired, err := pgx.CollectRows(rows, pgx.RowTo[bool])
				r.acquired = len(acquired) == 1
				return err
			})
	}
	if w.LockID != "" {
		b.Queue(lockRowsSQL, w.LockID, w.UserID, string(t))
	} else {
		b.Queue(postgres.PatronRowSQL, w.UserID, string(t))
	}
	b.Queue(itemRowSQL, record.FieldValue(w.Loan, "itemId"), string(t))
	write := s.write
	if lean {
		write = s.writeLean
	}
	b.Queue(write.SQL, write.Bind(s.checkOutArgs(ctx, t, w))).Query(func(rows pgx.Rows) error {
		row, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[checkOutResult])
		row.acquired = r.acquired
		*r = row
		return err
	})
	if w.AcquireInWrite != nil {
		b.Queue(dropInWriteSQL, w.LockID, string(t))
	}
	return r
}

// CreateCheckOutLoan implements storage.LoanWriter.
func (s *Loans) CreateCheckOutLoan(ctx context.Context, t storage.Tenant, w storage.CheckOutWrite) (storage.CheckOutWritten, error) {
	// A check-out made offline records every rule it broke: the full
	// statement judges them all.
	lean := !s.db.Gates.Has(t) && !w.Offline
	return s.createCheckOutLoan(ctx, t, w, lean)
}

// createCheckOutLoan is CreateCheckOutLoan, lean or in full (gate.go); a
// lean write that meets a gate row, having written nothing, runs in full.
// A write whose id landed before (postgres.Claimed) answers that write's
// loan, as a *storage.Replayed, and writes nothing.
func (s *Loans) createCheckOutLoan(ctx context.Context, t storage.Tenant, w storage.CheckOutWrite, lean bool) (storage.CheckOutWritten, error) {
	var r *checkOutResult
	// A batch runs in one implicit transaction, committed at its end.
	err := s.db.Once(ctx, t, schemas.WriteCheckOut, func(c *pgx.Conn, id *storage.Write) error {
		var b *pgx.Batch
		b, r = s.checkOutBatch(ctx, t, w, lean, id)
		return c.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return storage.CheckOutWritten{}, record.InterpretWrite(err, t, storage.Loans, w.Loan)
	}
	return s.checkOutAnswer(ctx, t, w, r, lean)
}

// checkOutAnswer is what a check-out's write answers, from what its
// statements returned (r): the loan written, or why nothing was.
func (s *Loans) checkOutAnswer(ctx context.Context, t storage.Tenant, w storage.CheckOutWrite, r *checkOutResult, lean bool) (storage.CheckOutWritten, error) {
	switch {
	case w.AcquireInWrite != nil && !r.acquired:
		return storage.CheckOutWritten{}, storage.ErrLockTaken
	case r.Full:
		// The tenant has a gate row this instance did not know of: the
		// lean write wrote nothing, and the full one runs.
		s.db.Gates.Found(t)
		return s.createCheckOutLoan(ctx, t, w, false)
	case r.Stored != nil:
		if r.Released != nil {
			s.releasedByWrite(t, r)
		}
		if r.LentOffline {
			s.events.Event(storage.EventLentOffline)
		}
		return storage.CheckOutWritten{Loan: r.Stored, LockReleased: r.Released != nil}, nil
	// Nothing written: say which condition failed, as the statement saw it.
	case r.Late:
		return storage.CheckOutWritten{}, tooLate()
	case !r.Required:
		return storage.CheckOutWritten{}, errs.Errorf(errs.KindInvalid, schemas.CodeLockRequired,
			"The check-out lock is on for this tenant: a loan is opened only under the borrower's live lock (%s); nothing was written",
			schemas.HeaderLockID)
	case !r.Fenced:
		return storage.CheckOutWritten{}, errs.Errorf(errs.KindConflict, schemas.CodeLockLost,
			"Check-out lock %s is not held for this patron by this caller (it expired, was released, or is someone else's); nothing was written", w.LockID).
			With("lockId", w.LockID)
	case r.OnLine:
		at := record.FieldValue(w.Loan, "loanDate")
		return storage.CheckOutWritten{}, errs.Errorf(errs.KindInvalid, schemas.CodeOfflineWhileOnLine,
			"The machine was seen on line at %s: a check-out it made then is a live one, under every rule; nothing was written", at).
			With("transactionDate", at)
	}
	if refused := r.refusal(w, s.rules); refused != nil {
		return storage.CheckOutWritten{}, refused
	}
	itemID := record.FieldValue(w.Loan, "itemId")
	var stored2 int
	err := s.db.Pool.QueryRow(ctx, postgres.WithTables(`SELECT version FROM %s WHERE tenant_id = $2 AND id = $1`, postgres.TableItem), itemID, string(t)).Scan(&stored2)
	if errors.Is(err, pgx.ErrNoRows) {
		return storage.CheckOutWritten{}, errs.Errorf(errs.KindInvalid, schemas.CodeValidation, "itemId: item %s does not exist", itemID).With("itemId", itemID)
	}
	if err != nil {
		return storage.CheckOutWritten{}, postgres.Interpret(err, t)
	}
	return storage.CheckOutWritten{}, errs.Errorf(errs.KindConflict, schemas.CodeVersionConflict,
		"Cannot check out item %s because it has been changed: stored _version is %d, request has %d; nothing was written",
		itemID, stored2, w.ItemVersion).With("_version", fmt.Sprint(stored2))
}

// releasedByWrite tells the patron's waiters on this instance, at once,
// of a lock a check-out's write released, when the release was announced.
// The history has nothing to learn of it: the fence lets only the lock's
// owner write under it, so the release is always the owner's own.
func (s *Loans) releasedByWrite(t storage.Tenant, r *checkOutResult) {
	if r.Notified && s.released != nil {
		s.released(t, *r.Released)
	}
}

// tooLate is a check-out's write that reached the database past its
// caller's deadline: nothing was written.
func tooLate() *errs.Error {
	return errs.Errorf(errs.KindUnavailable, schemas.CodeTimeout,
		"The request took too long: the check-out's write reached the database past its deadline; nothing was written")
}
