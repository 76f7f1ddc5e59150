package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/checkoutlock/schemas/errs"

	"github.com/google/uuid"
	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/circulation-storage/locksql"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/locksettings"
)

// Records implements storage.RecordService on jsonb tables.
type Records struct {
	db *DB
	// released, when set, is told of a check-out's release of a lock
	// that someone waits for, at once (see Locks.UseReleased).
	released func(t storage.Tenant, userID string)
	// checkOuts are the tenants' check-out write statements.
	checkOuts tenantStatements[checkOutStatements]
	// policy is how the check-out write applies the rules and the lock.
	policy Policy
}

// UseReleased has released told, at once, of every lock this instance's
// check-out writes release that someone waits for, as Locks.UseReleased.
func (s *Records) UseReleased(released func(t storage.Tenant, userID string)) { s.released = released }

var _ storage.RecordService = (*Records)(nil)

// NewRecords returns the record service.
func NewRecords(db *DB, policy Policy) *Records {
	return &Records{db: db, policy: policy, checkOuts: tenantStatements[checkOutStatements]{make: newCheckOutStatements}}
}

// tableSpec is how one resource is stored.
type tableSpec struct {
	table tableName
	// columns maps each filter parameter to its generated column.
	columns map[string]string
	// fields maps document fields (JSON paths, as CQL names them) to the
	// generated columns that hold them, so queries on them use the
	// column's indexes.
	fields map[string]column
	// order is the list order; it ends in id so pages are stable.
	order string
}

var (
	textColumn = func(name string) column { return column{name: name} }
	uuidColumn = func(name string) column { return column{name: name, isUUID: true} }
)

// specs maps a resource's path to its table.
var specs = map[string]tableSpec{
	storage.PatronGroups.Path: {table: "patron_group", columns: map[string]string{"group": "name"},
		fields: map[string]column{"id": uuidColumn("id"), "group": textColumn("name")}, order: "name, id"},
	storage.MaterialTypes.Path: {table: "material_type", columns: map[string]string{"name": "name"},
		fields: map[string]column{"id": uuidColumn("id"), "name": textColumn("name")}, order: "name, id"},
	storage.LoanTypes.Path: {table: "loan_type", columns: map[string]string{"name": "name"},
		fields: map[string]column{"id": uuidColumn("id"), "name": textColumn("name")}, order: "name, id"},
	storage.Patrons.Path: {table: "patron", columns: map[string]string{"barcode": "barcode", "patronGroup": "patron_group_id"},
		fields: map[string]column{"id": uuidColumn("id"), "barcode": textColumn("barcode"), "patronGroup": uuidColumn("patron_group_id")},
		order:  "barcode, id"},
	storage.Items.Path: {table: "item", columns: map[string]string{"barcode": "barcode", "status": "status_name"},
		fields: map[string]column{"id": uuidColumn("id"), "barcode": textColumn("barcode"), "status.name": textColumn("status_name"),
			"materialTypeId": uuidColumn("material_type_id"), "permanentLoanTypeId": uuidColumn("permanent_loan_type_id"),
			"temporaryLoanTypeId": uuidColumn("temporary_loan_type_id")},
		order: "barcode, id"},
	storage.LoanPolicies.Path: {table: "loan_policy", columns: map[string]string{"name": "name"},
		fields: map[string]column{"id": uuidColumn("id"), "name": textColumn("name")}, order: "name, id"},
	storage.Loans.Path: {table: "loan", columns: map[string]string{"userId": "user_id", "itemId": "item_id", "status": "status_name"},
		fields: map[string]column{"id": uuidColumn("id"), "userId": uuidColumn("user_id"), "itemId": uuidColumn("item_id"),
			"status.name": textColumn("status_name"), "loanPolicyId": uuidColumn("loan_policy_id")},
		order: "jsonb ->> 'loanDate', id"},
	storage.Settings.Path: {table: "setting", columns: map[string]string{"scope": "scope", "key": "key"},
		fields: map[string]column{"id": uuidColumn("id"), "scope": textColumn("scope"), "key": textColumn("key")},
		order:  "scope, key, id"},
}

func spec(r storage.Resource) tableSpec {
	s, ok := specs[r.Path]
	if !ok {
		panic("postgres: no table for resource " + r.Path)
	}
	return s
}

// withID sets the document's id (and, for versioned records, its version) in
// SQL, so the stored document always agrees with its columns.
func withID(r storage.Resource, version string) string {
	expr := `jsonb_set($2::jsonb, '{id}', to_jsonb($1::uuid::text))`
	if r.Versioned {
		expr = `jsonb_set(` + expr + `, '{_version}', ` + version + `)`
	}
	return expr
}

// sqlNow is the statement's time as FOLIO writes it, a jsonb string.
const sqlNow = `to_jsonb(to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))`

// withMetadata sets FOLIO's metadata block on the document expr: created
// and updated now by the user in parameter userParam (left out when NULL),
// whatever the client sent. For an update, created names the stored
// record's columns (the row being replaced), whose creation is kept.
func withMetadata(expr string, userParam int, update bool) string {
	user := fmt.Sprintf("to_jsonb($%d::text)", userParam)
	createdDate, createdBy := sqlNow, user
	if update {
		createdDate = `coalesce(jsonb #> '{metadata,createdDate}', ` + sqlNow + `)`
		createdBy = `jsonb #> '{metadata,createdByUserId}'`
	}
	return `jsonb_set(` + expr + `, '{metadata}', jsonb_strip_nulls(jsonb_build_object(` +
		`'createdDate', ` + createdDate + `, 'createdByUserId', ` + createdBy + `, ` +
		`'updatedDate', ` + sqlNow + `, 'updatedByUserId', ` + user + `)))`
}

// metadataUser is the user a request's writes are recorded as made by: a
// UUID, or NULL.
func metadataUser(ctx context.Context) any {
	id, err := uuid.Parse(storage.UserFrom(ctx))
	if err != nil {
		return nil
	}
	return id.String()
}

// Create implements storage.RecordService.
func (s *Records) Create(ctx context.Context, t storage.Tenant, r storage.Resource, id string, doc json.RawMessage) (json.RawMessage, error) {
	var stored json.RawMessage
	if r.Path == storage.Settings.Path {
		err := s.db.inTx(ctx, t, func(tx pgx.Tx) error {
			var err error
			if stored, err = insertRecord(ctx, tx, t, r, id, doc, false); err != nil {
				return err
			}
			return auditSetting(ctx, tx, t, "create", id, stored)
		})
		return stored, err
	}
	err := s.db.write(ctx, t, func(c *pgx.Conn) error {
		var err error
		stored, err = insertRecord(ctx, c, t, r, id, doc, false)
		return err
	})
	return stored, err
}

// auditSetting records a change to the settings entry id (doc, as written;
// for a delete, as it was) in the setting_change table, naming the caller:
// in the change's own transaction (q).
func auditSetting(ctx context.Context, q querier, t storage.Tenant, op, id string, doc json.RawMessage) error {
	caller := storage.CallerFrom(ctx)
	value := `$2::jsonb -> 'value'`
	if op == "delete" {
		value = `NULL`
	}
	_, err := q.Exec(ctx, fmt.Sprintf(`INSERT INTO %s (setting_id, scope, key, operation, value, changed_by, changed_by_module)
		VALUES ($1, $2::jsonb ->> 'scope', $2::jsonb ->> 'key', $3, %s, $4, $5)`, table(t, "setting_change"), value),
		id, doc, op, nullable(caller.User), nullable(caller.Module))
	return interpret(err, t)
}

// insertRecord inserts one record; with skipExisting, an existing id is left
// as it is (for loading reference data twice) and nil is returned for it.
func insertRecord(ctx context.Context, q querier, t storage.Tenant, r storage.Resource, id string, doc json.RawMessage, skipExisting bool) (json.RawMessage, error) {
	sql := fmt.Sprintf(`INSERT INTO %s (id, jsonb) VALUES ($1, %s)`, table(t, spec(r).table),
		withMetadata(withID(r, `'1'`), 3, false))
	if skipExisting {
		sql += ` ON CONFLICT (id) DO NOTHING`
	}
	sql += ` RETURNING jsonb`
	var stored json.RawMessage
	err := q.QueryRow(ctx, sql, id, doc, metadataUser(ctx)).Scan(&stored)
	if skipExisting && errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, interpretWrite(err, t, r, doc)
	}
	return stored, nil
}

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
    SELECT 1 FROM %[2]s
     WHERE id = $3::uuid AND user_id = ($2::jsonb ->> 'userId')::uuid AND expires_at > now()
       AND holder->>'acquiredBy' IS NOT DISTINCT FROM $8::text AND holder->>'acquiredByModule' IS NOT DISTINCT FROM $11::text
), required AS (
    SELECT $3::uuid IS NOT NULL OR NOT ` + lockFeatureSQL("%[7]s", "$7::boolean") + ` AS ok
), lent AS (
    SELECT material_type_id, coalesce(temporary_loan_type_id, permanent_loan_type_id) AS loan_type_id
      FROM %[3]s WHERE id = ($2::jsonb ->> 'itemId')::uuid
), matched AS (` + policyMatchSQL("%[8]s", "%[9]s",
	"(SELECT patron_group_id FROM %[10]s WHERE id = ($2::jsonb ->> 'userId')::uuid)",
	"(SELECT material_type_id FROM lent)", "(SELECT loan_type_id FROM lent)") + `
), limited AS (
    SELECT ` + itemLimitSQL("m", "lp", "$6::boolean") + ` AS n,
           CASE WHEN m.mt_match THEN (SELECT material_type_id FROM lent) END AS mt,
           CASE WHEN m.lt_match THEN (SELECT loan_type_id FROM lent) END AS lt
      FROM matched m JOIN %[11]s lp ON lp.id = m.loan_policy_id
), counted AS (
    SELECT (` + openLoanCountSQL("%[1]s", "%[3]s", "($2::jsonb ->> 'userId')::uuid", "(SELECT mt FROM limited)", "(SELECT lt FROM limited)") + `) AS n
     WHERE (SELECT n FROM limited) IS NOT NULL
), allowed AS (
    SELECT (SELECT ok FROM required)
       AND ($3::uuid IS NULL OR EXISTS (SELECT 1 FROM fence))
       AND ((SELECT n FROM limited) IS NULL OR (SELECT n FROM counted) < (SELECT n FROM limited)) AS ok
), item AS (
    UPDATE %[3]s
       SET jsonb = %[5]s
     WHERE id = ($2::jsonb ->> 'itemId')::uuid AND version = $4::integer
       AND (SELECT ok FROM allowed)
 RETURNING id
), loan AS (
    INSERT INTO %[1]s (id, jsonb)
    SELECT $1, %[4]s
     WHERE (SELECT ok FROM allowed) AND EXISTS (SELECT 1 FROM item)
    RETURNING jsonb
), released AS (
    DELETE FROM %[2]s
     WHERE $9::boolean AND id = $3::uuid AND EXISTS (SELECT 1 FROM fence) AND EXISTS (SELECT 1 FROM loan)
    RETURNING user_id
)
SELECT (SELECT jsonb FROM loan), $3::uuid IS NULL OR EXISTS (SELECT 1 FROM fence), (SELECT ok FROM required),
       (SELECT n FROM counted), (SELECT n FROM limited),
       released.user_id::text,
       ` + locksql.Announce("%[6]s", "$10") + `
  FROM (SELECT 1) AS one LEFT JOIN released ON true`

// lockFeatureSQL is whether the tenant's check-out lock feature is on, as
// storage reads it in a write: the checkoutLockFeature setting's
// checkOutLockFeatureEnabled when it is a boolean (the value an object, or
// a string holding one, as FOLIO stores it), else def (the environment's).
// A malformed value reads as not saying, as circulation reads it: it can
// never fail the write.
func lockFeatureSQL(setting, def string) string {
	return `coalesce((SELECT CASE jsonb_typeof(s.jsonb -> 'value')
        WHEN 'object' THEN CASE WHEN jsonb_typeof(s.jsonb #> '{value,checkOutLockFeatureEnabled}') = 'boolean'
                                THEN (s.jsonb #>> '{value,checkOutLockFeatureEnabled}')::boolean END
        WHEN 'string' THEN CASE WHEN s.jsonb ->> 'value' ~ '"checkOutLockFeatureEnabled"\s*:\s*true\M' THEN true
                                WHEN s.jsonb ->> 'value' ~ '"checkOutLockFeatureEnabled"\s*:\s*false\M' THEN false END END
      FROM ` + setting + ` s WHERE s.scope = '` + locksettings.Scope + `' AND s.key = '` + locksettings.Key + `'), ` + def + `)`
}

// itemWithStatus is the item row's document with the status named
// (a constant of this package, never a client's value), dated now, one
// version on: what a check-out or a check-in writes.
func itemWithStatus(name string) string {
	return `jsonb_set(jsonb_set(jsonb, '{status}', jsonb_build_object('name', '` + name + `', 'date', ` + sqlNow + `)),
                   '{_version}', to_jsonb(version + 1))`
}

// checkOutStatements are a check-out's write for one tenant's tables:
// lockRowsSQL (under a lock) or patronRowSQL (without one), and
// checkOutSQL. checkOutSQL's parameters: $1
// loan id, $2 loan, $3 lock id, $4 item version, $5 user for the metadata,
// $6 whether an unscoped item limit is enforced, $7 the lock feature's
// default, $8 and $11 the caller (user and module), $9 whether to release
// the lock, $10 the tenant.
type checkOutStatements struct{ lockRows, patronRow, write string }

func newCheckOutStatements(t storage.Tenant) checkOutStatements {
	return checkOutStatements{
		lockRows:  withTables(lockRowsSQL, t, "check_out_lock", "patron"),
		patronRow: withTables(patronRowSQL, t, "patron"),
		write: fmt.Sprintf(checkOutSQL, table(t, "loan"), table(t, "check_out_lock"), table(t, "item"),
			withMetadata(withID(storage.Loans, `'1'`), 5, false), withMetadata(itemWithStatus("Checked out"), 5, true),
			table(t, "check_out_lock_waiter"), table(t, "setting"), table(t, "circulation_rule"), table(t, "circulation_rules"),
			table(t, "patron"), table(t, "loan_policy")),
	}
}

// lockRowsSQL locks, in one statement, the row of the lock a check-out
// writes under and the borrower's row, in the write's transaction, before
// checkOutSQL takes its snapshot (a statement's snapshot is taken when it
// starts, and what it waits for later, it does not see): a takeover, a
// release or another write under the lock waits for this write, and so
// does every other check-out write for the patron (see patronRowSQL). A
// lock row that is gone locks nothing, and the write's fence then refuses
// it. Parameters: $1 lock id, $2 the patron.
const lockRowsSQL = `SELECT 1 FROM %s l, %s p WHERE l.id = $1 AND p.id = $2 FOR UPDATE OF l FOR NO KEY UPDATE OF p`

// patronRowSQL locks the borrower's row for a write without a lock, so
// that every check-out write for the patron, under a lock or not, waits
// for the one before it and counts its loan (a loan's reference to the
// patron takes a key share, which this does not block). Parameter: $1
// the patron.
const patronRowSQL = `SELECT 1 FROM %s WHERE id = $1 FOR NO KEY UPDATE`

// checkOutResult is the row checkOutSQL answers.
type checkOutResult struct {
	stored           json.RawMessage
	fenced, required bool
	open, limit      *int
	released         *string
	notified         bool
}

// checkOutBatch is a check-out's write as one batch, sent in one round trip
// and run as one transaction: lockRowsSQL under a lock, patronRowSQL
// without one, then checkOutSQL. The result is filled in when the batch's
// results are read.
func (s *Records) checkOutBatch(ctx context.Context, t storage.Tenant, w storage.CheckOutWrite) (*pgx.Batch, *checkOutResult) {
	st := s.checkOuts.get(t)
	caller := storage.CallerFrom(ctx)
	b := &pgx.Batch{}
	if w.LockID != "" {
		b.Queue(st.lockRows, w.LockID, w.UserID)
	} else {
		b.Queue(st.patronRow, w.UserID)
	}
	r := &checkOutResult{}
	b.Queue(st.write, w.LoanID, w.Loan, nullable(w.LockID), w.ItemVersion, metadataUser(ctx),
		s.policy.EnforceUnscopedItemLimit, s.policy.LockFeatureDefault, nullable(caller.User), w.ReleaseLock, string(t),
		nullable(caller.Module)).QueryRow(func(row pgx.Row) error {
		return row.Scan(&r.stored, &r.fenced, &r.required, &r.open, &r.limit, &r.released, &r.notified)
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
	case r.limit != nil && r.open != nil && *r.open >= *r.limit:
		return storage.CheckOutWritten{}, storage.ItemLimitReached(*r.limit, *r.open)
	}
	itemID := fieldValue(w.Loan, "itemId")
	var stored2 int
	err = s.db.pool.QueryRow(ctx, withTables(`SELECT version FROM %s WHERE id = $1`, t, "item"), itemID).Scan(&stored2)
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

// CheckInLoan implements storage.LoanWriter: the item becomes Available at
// the version the check-in read, and the loan is replaced, in one
// transaction.
func (s *Records) CheckInLoan(ctx context.Context, t storage.Tenant, w storage.CheckInWrite) error {
	return s.db.inTx(ctx, t, func(tx pgx.Tx) error {
		itemID := fieldValue(w.Loan, "itemId")
		var stored int
		err := tx.QueryRow(ctx, fmt.Sprintf(`
WITH updated AS (
    UPDATE %[1]s SET jsonb = %[2]s WHERE id = $1::uuid AND version = $2 RETURNING 0
)
SELECT coalesce((SELECT 0 FROM updated), (SELECT version FROM %[1]s WHERE id = $1::uuid), -1)`,
			table(t, "item"), withMetadata(itemWithStatus("Available"), 3, true)), itemID, w.ItemVersion, metadataUser(ctx)).Scan(&stored)
		switch {
		case err != nil:
			return interpretWrite(err, t, storage.Loans, w.Loan)
		case stored < 0:
			return errs.Errorf(errs.KindInvalid, schemas.CodeValidation, "itemId: item %s does not exist", itemID).With("itemId", itemID)
		case stored > 0:
			return errs.Errorf(errs.KindConflict, schemas.CodeVersionConflict,
				"Cannot check in item %s because it has been changed: stored _version is %d, request has %d; nothing was written",
				itemID, stored, w.ItemVersion).With("_version", fmt.Sprint(stored))
		}
		// The loan closed is the item's open loan, as it was: a check-in
		// closes a loan, and changes nothing else of whose and of what
		// it is.
		return update(ctx, tx, t, storage.Loans, w.LoanID, 0, w.Loan, checkInGuard)
	})
}

// Get implements storage.RecordService.
func (s *Records) Get(ctx context.Context, t storage.Tenant, r storage.Resource, id string) (json.RawMessage, error) {
	var doc json.RawMessage
	err := s.db.pool.QueryRow(ctx, withTables(`SELECT jsonb FROM %s WHERE id = $1`, t, spec(r).table), id).Scan(&doc)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, errs.NotFound(r.Name, id)
	}
	if err != nil {
		return nil, interpret(err, t)
	}
	return doc, nil
}

// List implements storage.RecordService. Filter values are parameters; only
// column names from the spec are written into the SQL.
func (s *Records) List(ctx context.Context, t storage.Tenant, r storage.Resource, f storage.RecordFilter) ([]json.RawMessage, int, error) {
	sp := spec(r)
	var conds []string
	var args []any
	for _, filter := range r.Filters {
		v, ok := f.Params[filter.Param]
		if !ok {
			continue
		}
		args = append(args, v)
		cast := "text"
		if filter.Kind == storage.FilterUUID {
			cast = "uuid"
		}
		conds = append(conds, fmt.Sprintf("%s = $%d::%s", sp.columns[filter.Param], len(args), cast))
	}
	if f.Scopes != nil {
		args = append(args, f.Scopes)
		conds = append(conds, fmt.Sprintf("scope = ANY($%d::text[])", len(args)))
	}
	order := sp.order
	var sortArgs []any
	if f.Query != nil {
		tr, err := translateCQL(f.Query, f.QueryText, sp, len(args))
		if err != nil {
			return nil, 0, err
		}
		conds = append(conds, tr.where)
		args = append(args, tr.whereArgs...)
		sortArgs = tr.sortArgs
		if len(tr.orderBy) > 0 {
			order = strings.Join(tr.orderBy, ", ") + ", id"
		}
	}
	where := "true"
	if len(conds) > 0 {
		where = strings.Join(conds, " AND ")
	}
	countArgs := len(args)
	args = append(args, sortArgs...)
	n := len(args)
	tbl := table(t, sp.table)
	docs := []json.RawMessage{}
	size := 0
	total, err := page(ctx, s.db.pool, t,
		fmt.Sprintf(`SELECT jsonb, count(*) OVER () FROM %s WHERE %s ORDER BY %s OFFSET $%d LIMIT $%d`, tbl, where, order, n+1, n+2),
		fmt.Sprintf(`SELECT count(*) FROM %s WHERE %s`, tbl, where),
		args, countArgs, f.Offset, f.Limit,
		func(rows pgx.Rows) (int, error) {
			var doc json.RawMessage
			var total int
			if err := rows.Scan(&doc, &total); err != nil {
				return 0, err
			}
			if size += len(doc); f.MaxBytes > 0 && size > f.MaxBytes {
				return 0, storage.PageTooLarge(f.MaxBytes, f.Limit)
			}
			docs = append(docs, doc)
			return total, nil
		})
	if err != nil {
		return nil, 0, err
	}
	return docs, total, nil
}

// Update implements storage.RecordService. A loan or an item is held to
// what only a check-out or a check-in may change (updateGuards).
func (s *Records) Update(ctx context.Context, t storage.Tenant, r storage.Resource, id string, version int, doc json.RawMessage) error {
	if r.Path == storage.Settings.Path {
		return s.db.inTx(ctx, t, func(tx pgx.Tx) error {
			if err := update(ctx, tx, t, r, id, version, doc, nil); err != nil {
				return err
			}
			return auditSetting(ctx, tx, t, "update", id, doc)
		})
	}
	return s.db.write(ctx, t, func(c *pgx.Conn) error { return update(ctx, c, t, r, id, version, doc, updateGuards[r.Path]) })
}

// guard is what a write of a record requires of the stored row, whoever
// calls, in the write's own statement: cond, SQL over the row (rec; $2 is
// the new document, {loan} the loan table), and, when the
// row is there but cond is false, why, from the row as it is (stored, its
// version, and the state columns of the resource) and the new document.
type guard struct {
	cond string
	// state reads the row's columns why needs.
	state string
	why   func(id string, state []any, doc json.RawMessage) error
}

// newStatus is the status a loan or item document names.
const newStatus = `($2::jsonb #>> '{status,name}')`

// updateGuards hold plain updates to what only the check-out and the
// check-in writes may do. A loan keeps its status (an open loan is closed
// only by a check-in, a closed one never reopened) and, while open, its
// borrower and item. An item becomes Checked out only with its loan, by a
// check-out, and leaves Checked out only while it has no open loan (the
// check-in of an item with none).
var updateGuards = map[string]*guard{
	storage.Loans.Path: {
		cond: `status_name = ` + newStatus + ` AND (status_name <> 'Open'
                 OR (user_id = ($2::jsonb ->> 'userId')::uuid AND item_id = ($2::jsonb ->> 'itemId')::uuid))`,
		state: `status_name`,
		why: func(id string, state []any, doc json.RawMessage) error {
			stored := *state[0].(*string)
			switch status := fieldAt(doc, "status", "name"); {
			case stored == "Open" && status != "Open":
				return errs.Errorf(errs.KindInvalid, schemas.CodeCheckInRequired,
					"Loan %s is open: it is closed only by a check-in (%s), which makes its item Available with it", id,
					schemas.HeaderCheckInItemVersion).With("status", status)
			case stored != "Open" && status == "Open":
				return errs.Errorf(errs.KindInvalid, schemas.CodeCheckOutRequired,
					"Loan %s is closed and stays closed: a loan is opened only by a check-out", id).With("status", status)
			}
			return errs.Errorf(errs.KindInvalid, schemas.CodeCheckInRequired,
				"Loan %s is open: its userId and itemId do not change; check the item in, and out to the other patron", id)
		},
	},
	storage.Items.Path: {
		cond: `NOT (` + newStatus + ` = 'Checked out' AND status_name <> 'Checked out')
           AND NOT (` + newStatus + ` <> 'Checked out' AND status_name = 'Checked out' AND EXISTS (
                 SELECT 1 FROM {loan} l WHERE l.item_id = rec.id AND l.status_name = 'Open'))`,
		state: `status_name`,
		why: func(id string, state []any, doc json.RawMessage) error {
			if fieldAt(doc, "status", "name") == "Checked out" {
				return errs.Errorf(errs.KindInvalid, schemas.CodeItemStatusByCirculation,
					"Item %s becomes Checked out only with its loan, by a check-out", id).With("status", "Checked out")
			}
			return errs.Errorf(errs.KindInvalid, schemas.CodeItemStatusByCirculation,
				"Item %s has an open loan: it leaves Checked out only by the check-in that closes the loan", id).
				With("status", fieldAt(doc, "status", "name"))
		},
	},
}

// checkInGuard holds a check-in's loan: the item's open loan, closed, of
// the same borrower and item.
var checkInGuard = &guard{
	cond: `status_name = 'Open' AND ` + newStatus + ` = 'Closed'
           AND user_id = ($2::jsonb ->> 'userId')::uuid AND item_id = ($2::jsonb ->> 'itemId')::uuid`,
	state: `status_name`,
	why: func(id string, state []any, doc json.RawMessage) error {
		if *state[0].(*string) != "Open" {
			return errs.Errorf(errs.KindInvalid, schemas.CodeNoOpenLoan, "Loan %s is not open: there is nothing to check in", id).
				With("loanId", id)
		}
		return errs.Errorf(errs.KindInvalid, schemas.CodeCheckInRequired,
			"A check-in closes the loan (status Closed) and changes neither its userId nor its itemId")
	},
}

// update replaces a record through q (the pool, or a transaction), when
// g (if any) holds for the stored row.
func update(ctx context.Context, q querier, t storage.Tenant, r storage.Resource, id string, version int, doc json.RawMessage, g *guard) error {
	tbl := table(t, spec(r).table)
	sql := fmt.Sprintf(`UPDATE %s AS rec SET jsonb = %s WHERE rec.id = $1`, tbl,
		withMetadata(withID(r, `to_jsonb(coalesce(version, 0) + 1)`), 3, true))
	args := []any{id, doc, metadataUser(ctx)}
	if r.Versioned {
		// Version 0 is "any version" for a resource whose version is
		// optional on update.
		sql += ` AND ($4::integer IS NULL OR rec.version = $4::integer)`
		args = append(args, nullableInt(version))
	}
	if g != nil {
		sql += ` AND ` + strings.ReplaceAll(g.cond, "{loan}", table(t, "loan"))
	}
	tag, err := q.Exec(ctx, sql, args...)
	if err != nil {
		return interpretWrite(err, t, r, doc)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	if !r.Versioned && g == nil {
		return errs.NotFound(r.Name, id)
	}
	// Absent, present at another version, or refused by the guard: tell
	// which.
	var stored *int
	cols, state := "NULL::integer", []any{&stored}
	if r.Versioned {
		cols = "version"
	}
	if g != nil {
		var s string
		cols, state = cols+", "+g.state, append(state, &s)
	}
	err = q.QueryRow(ctx, fmt.Sprintf(`SELECT %s FROM %s WHERE id = $1`, cols, tbl), id).Scan(state...)
	if errors.Is(err, pgx.ErrNoRows) {
		return errs.NotFound(r.Name, id)
	}
	if err != nil {
		return interpret(err, t)
	}
	if r.Versioned && version != 0 && stored != nil && *stored != version {
		return errs.Errorf(errs.KindConflict, schemas.CodeVersionConflict,
			"Cannot update record %s because it has been changed: stored _version is %d, request has %d", id, *stored, version).
			With("_version", fmt.Sprint(*stored))
	}
	return g.why(id, state[1:], doc)
}

// Delete implements storage.RecordService. An open loan is removed only
// by being checked in first.
func (s *Records) Delete(ctx context.Context, t storage.Tenant, r storage.Resource, id string) error {
	sql := withTables(`DELETE FROM %s WHERE id = $1`, t, spec(r).table)
	if r.Path == storage.Loans.Path {
		sql += ` AND status_name <> 'Open'`
	}
	// A settings entry's removal is audited in its own transaction.
	deleted := false
	err := s.db.inTx(ctx, t, func(tx pgx.Tx) error {
		var old json.RawMessage
		err := tx.QueryRow(ctx, sql+` RETURNING jsonb`, id).Scan(&old)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		deleted = true
		if r.Path == storage.Settings.Path {
			return auditSetting(ctx, tx, t, "delete", id, old)
		}
		return nil
	})
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == pgerrcode.ForeignKeyViolation {
			c := constraints[pgErr.ConstraintName]
			e := errs.Errorf(errs.KindConflict, schemas.CodeInUse, "Cannot delete %s %s: %s refer to it",
				strings.ToLower(r.Name), id, c.source).With("id", id)
			e.Err = err
			return e
		}
		return interpret(err, t)
	}
	if !deleted && r.Path == storage.Loans.Path {
		if _, err := s.Get(ctx, t, r, id); err == nil {
			return errs.Errorf(errs.KindInvalid, schemas.CodeCheckInRequired,
				"Loan %s is open: check its item in before removing it", id).With("id", id)
		}
	}
	if !deleted {
		return errs.NotFound(r.Name, id)
	}
	return nil
}

// constraint describes a named constraint for error messages: the JSON
// field it guards, what it refers to, and which records hold the reference.
type constraint struct {
	field  string // JSON field of the record being written
	target string // what a foreign key refers to
	source string // records holding the reference, for refused deletes
}

// constraints lists every uniqueness rule and reference of migration 000003
// by name, so violations are reported by SQLSTATE and constraint name.
var constraints = map[string]constraint{
	"patron_group_name_key":               {field: "group"},
	"material_type_name_key":              {field: "name"},
	"loan_type_name_key":                  {field: "name"},
	"patron_barcode_key":                  {field: "barcode"},
	"item_barcode_key":                    {field: "barcode"},
	"loan_policy_name_key":                {field: "name"},
	"setting_scope_key_key":               {field: "key"},
	"loan_one_open_loan_per_item":         {field: "itemId"},
	"patron_patron_group_fkey":            {field: "patronGroup", target: "patron group", source: "users"},
	"item_material_type_fkey":             {field: "materialTypeId", target: "material type", source: "items"},
	"item_permanent_loan_type_fkey":       {field: "permanentLoanTypeId", target: "loan type", source: "items"},
	"item_temporary_loan_type_fkey":       {field: "temporaryLoanTypeId", target: "loan type", source: "items"},
	"loan_user_fkey":                      {field: "userId", target: "user", source: "loans"},
	"loan_item_fkey":                      {field: "itemId", target: "item", source: "loans"},
	"loan_loan_policy_fkey":               {field: "loanPolicyId", target: "loan policy", source: "loans"},
	"circulation_rules_fallback_fkey":     {field: "fallbackLoanPolicyId", target: "loan policy", source: "circulation rules"},
	"circulation_rule_patron_group_fkey":  {field: "patronGroupId", target: "patron group", source: "circulation rules"},
	"circulation_rule_material_type_fkey": {field: "materialTypeId", target: "material type", source: "circulation rules"},
	"circulation_rule_loan_type_fkey":     {field: "loanTypeId", target: "loan type", source: "circulation rules"},
	"circulation_rule_loan_policy_fkey":   {field: "loanPolicyId", target: "loan policy", source: "circulation rules"},
}

// interpretWrite is interpret for a write of doc, naming the offending field
// and value of a uniqueness or reference violation.
func interpretWrite(err error, t storage.Tenant, r storage.Resource, doc json.RawMessage) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return interpret(err, t)
	}
	c, known := constraints[pgErr.ConstraintName]
	switch {
	case pgErr.Code == pgerrcode.UniqueViolation && pgErr.ConstraintName == string(spec(r).table)+"_pkey":
		id := fieldValue(doc, "id")
		e := errs.Errorf(errs.KindConflict, schemas.CodeConflict, "%s %s already exists", r.Name, id).With("id", id)
		e.Err = err
		return e
	case known && pgErr.Code == pgerrcode.UniqueViolation && pgErr.ConstraintName == "loan_one_open_loan_per_item":
		e := errs.Errorf(errs.KindInvalid, schemas.CodeItemHasOpenLoan, "Cannot have more than one open loan for the same item").
			With("itemId", fieldValue(doc, c.field))
		e.Err = err
		return e
	case known && pgErr.Code == pgerrcode.UniqueViolation:
		v := fieldValue(doc, c.field)
		if pgErr.ConstraintName == "setting_scope_key_key" {
			v = fieldValue(doc, "scope") + "/" + v
		}
		e := errs.Errorf(errs.KindInvalid, schemas.CodeAlreadyExists, "%s with %s %q already exists", r.Name, c.field, v).
			With(c.field, v)
		e.Err = err
		return e
	case known && pgErr.Code == pgerrcode.ForeignKeyViolation:
		v := fieldValue(doc, c.field)
		e := errs.Errorf(errs.KindInvalid, schemas.CodeValidation, "%s: %s %s does not exist", c.field, c.target, v).
			With(c.field, v)
		e.Err = err
		return e
	}
	return interpret(err, t)
}

// nullableInt is n, or SQL NULL for 0.
func nullableInt(n int) any {
	if n == 0 {
		return nil
	}
	return n
}

// fieldAt reads the string at a path of a JSON document ("" when absent).
func fieldAt(doc json.RawMessage, path ...string) string {
	var v any
	if json.Unmarshal(doc, &v) != nil {
		return ""
	}
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return ""
		}
		v = m[p]
	}
	s, _ := v.(string)
	return s
}

// fieldValue reads a top-level string field of a JSON document, for messages.
func fieldValue(doc json.RawMessage, field string) string {
	var m map[string]any
	if json.Unmarshal(doc, &m) != nil {
		return ""
	}
	if s, ok := m[field].(string); ok {
		return s
	}
	return ""
}
