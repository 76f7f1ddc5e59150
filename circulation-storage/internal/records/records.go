// Package records keeps circulation-storage's records on PostgreSQL:
// creating, reading, listing (with CQL queries, cql.go, and pages),
// updating and deleting every resource, under the guards that keep loans
// and items as circulation leaves them (update, Guard); a request's place
// in its item's queue (request_write.go); the circulation rules as stored
// (circulation_rules.go); the translation of a write's constraint
// violations (constraints.go); and the sample library a tenant may be
// initialised with (sampledata.go). The loan writes that circulation makes
// (check-out, check-in, renewal, loan action) are package lending's, which
// builds on this one.
package records

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"strconv"
	"strings"

	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/schemas/errs"
	"github.com/google/uuid"
	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/schemas"
)

// Records implements storage.RecordService on jsonb tables.
type Records struct {
	db *postgres.DB
	// queueWrites holds a place for each write of a request running on
	// this instance: a quarter of the pool's connections. Writes of one
	// item's queue take their turns on the item's row (request_write.go),
	// each holding a connection while it waits; twenty of them for one
	// item must not hold every connection that reads of other records
	// need. The others wait for a place here, holding none.
	queueWrites chan struct{}
	// ShelfLeft, when set, is told, in the transaction of a write of a
	// request, that the request left the hold shelf its item waits on
	// (cancelled, closed or deleted while Open - Awaiting pickup): it
	// hands the item on as a check-in at the request's pickup point
	// would (lending.HandOn: to the next request, or back to the shelf).
	ShelfLeft func(ctx context.Context, tx pgx.Tx, t storage.Tenant, itemID, servicePointID string) error
	// RequestRules, when set, judges a request written through
	// circulation (storage.RequestRulesFrom), open, and placed or moved
	// to another item or given another type, in the transaction of its
	// write, after the write and with its queue locked: it refuses what
	// FOLIO's rules refuse (the write then rolled back) and makes the
	// writes the request calls for (lending.JudgeRequest).
	RequestRules func(ctx context.Context, tx pgx.Tx, t storage.Tenant, id, requester, item string) error
	// PageLeft, when set, is told, in the transaction of a write of a
	// request, that an open page left the queue of its Paged item
	// (cancelled, closed, moved or deleted): lending.Unpage puts the item
	// back on the shelf when no page waits for it still.
	PageLeft func(ctx context.Context, tx pgx.Tx, t storage.Tenant, itemID string) error
}

var _ storage.RecordService = (*Records)(nil)

// NewRecords returns the record service.
func NewRecords(db *postgres.DB) *Records {
	return &Records{db: db,
		queueWrites: make(chan struct{}, max(1, int(db.Pool.Config().MaxConns)/4))}
}

// queueTurn waits for a place among the writes of requests (queueWrites),
// for as long as ctx allows; release gives it back.
func (s *Records) queueTurn(ctx context.Context, t storage.Tenant) (release func(), err error) {
	select {
	case s.queueWrites <- struct{}{}:
		return func() { <-s.queueWrites }, nil
	case <-ctx.Done():
		return nil, postgres.Interpret(ctx.Err(), t)
	}
}

// tableSpec is how one resource is stored.
type tableSpec struct {
	table postgres.TableName
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
	storage.RequestPolicies.Path: {table: "request_policy", columns: map[string]string{"name": "name"},
		fields: map[string]column{"id": uuidColumn("id"), "name": textColumn("name")}, order: "name, id"},
	storage.Loans.Path: {table: "loan", columns: map[string]string{"userId": "user_id", "itemId": "item_id", "status": "status_name"},
		fields: map[string]column{"id": uuidColumn("id"), "userId": uuidColumn("user_id"), "itemId": uuidColumn("item_id"),
			"status.name": textColumn("status_name"), "loanPolicyId": uuidColumn("loan_policy_id")},
		order: "jsonb ->> 'loanDate', id"},
	storage.ManualBlocks.Path: {table: "manual_block", columns: map[string]string{"userId": "user_id"},
		fields: map[string]column{"id": uuidColumn("id"), "userId": uuidColumn("user_id")},
		order:  "user_id, id"},
	storage.PatronBlockConditions.Path: {table: "patron_block_condition", columns: map[string]string{},
		fields: map[string]column{"id": uuidColumn("id")}, order: "id"},
	storage.PatronBlockLimits.Path: {table: "patron_block_limit",
		columns: map[string]string{"patronGroupId": "patron_group_id", "conditionId": "condition_id"},
		fields: map[string]column{"id": uuidColumn("id"), "patronGroupId": uuidColumn("patron_group_id"),
			"conditionId": uuidColumn("condition_id")},
		order: "patron_group_id, condition_id, id"},
	storage.Requests.Path: {table: "request",
		columns: map[string]string{"itemId": "item_id", "requesterId": "requester_id", "status": "status"},
		fields: map[string]column{"id": uuidColumn("id"), "itemId": uuidColumn("item_id"), "requesterId": uuidColumn("requester_id"),
			"status": textColumn("status")},
		order: "item_id, position, jsonb ->> 'requestDate', id"},
	storage.Accounts.Path: {table: "account", columns: map[string]string{"username": "username"},
		fields: map[string]column{"id": uuidColumn("id"), "username": textColumn("username")}, order: "username, id"},
	storage.ServicePoints.Path: {table: "service_point", columns: map[string]string{"name": "name"},
		fields: map[string]column{"id": uuidColumn("id"), "name": textColumn("name")}, order: "name, id"},
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

// WithID sets the document doc's id to id (and, for versioned records, its
// version) in SQL, so the stored document always agrees with its columns;
// id, doc and version are SQL expressions.
func WithID(r storage.Resource, id, doc, version string) string {
	expr := `jsonb_set(` + doc + `::jsonb, '{id}', to_jsonb(` + id + `::uuid::text))`
	if r.Versioned {
		expr = `jsonb_set(` + expr + `, '{_version}', ` + version + `)`
	}
	return expr
}

// SQLNow is the statement's time as FOLIO writes it, a jsonb string.
const SQLNow = `to_jsonb(to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))`

// WithMetadata sets FOLIO's metadata block on the document expr: created
// and updated now by the user userID, an SQL expression (left out when NULL),
// whatever the client sent. For an update, created names the stored
// record's columns (the row being replaced), whose creation is kept.
func WithMetadata(expr, userID string, update bool) string {
	user := "to_jsonb(" + userID + "::text)"
	createdDate, createdBy := SQLNow, user
	if update {
		createdDate = `coalesce(jsonb #> '{metadata,createdDate}', ` + SQLNow + `)`
		createdBy = `jsonb #> '{metadata,createdByUserId}'`
	}
	return `jsonb_set(` + expr + `, '{metadata}', jsonb_strip_nulls(jsonb_build_object(` +
		`'createdDate', ` + createdDate + `, 'createdByUserId', ` + createdBy + `, ` +
		`'updatedDate', ` + SQLNow + `, 'updatedByUserId', ` + user + `)))`
}

// MetadataUser is the user a request's writes are recorded as made by: a
// UUID, or NULL.
func MetadataUser(ctx context.Context) any {
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
		err := s.db.InTx(ctx, t, func(tx pgx.Tx) error {
			var err error
			if stored, err = insertRecord(ctx, tx, t, r, id, doc, false); err != nil {
				return err
			}
			if err := keepLockFeature(ctx, tx, t, id, stored); err != nil {
				return err
			}
			return auditSetting(ctx, tx, t, "create", id, stored)
		})
		return stored, err
	}
	if r.Path == storage.Requests.Path {
		release, err := s.queueTurn(ctx, t)
		if err != nil {
			return nil, err
		}
		defer release()
		err = s.db.InTx(ctx, t, func(tx pgx.Tx) error {
			var err error
			if stored, err = createRequest(ctx, tx, t, id, doc); err != nil {
				return err
			}
			return s.judgeRequest(ctx, tx, t, id, stored, kind{})
		})
		return stored, err
	}
	err := s.db.Write(ctx, t, func(c *pgx.Conn) error {
		var err error
		stored, err = insertRecord(ctx, c, t, r, id, doc, false)
		return err
	})
	return stored, err
}

// keepLockFeatureSQL keeps a settings entry's decoded lock feature beside
// it (migration 12).
var keepLockFeatureSQL = postgres.WithTables(`UPDATE %s SET lock_feature = $3 WHERE tenant_id = $1 AND id = $2`, postgres.TableSetting)

// keepLockFeature keeps, in the write's transaction (q), what the entry id
// (doc, as written) says of the lock feature, for the check-out's write to
// read (lockFeatureSQL).
func keepLockFeature(ctx context.Context, q postgres.Querier, t storage.Tenant, id string, doc json.RawMessage) error {
	f := postgres.LockFeature(doc)
	if f == "" {
		return nil
	}
	_, err := q.Exec(ctx, keepLockFeatureSQL, string(t), id, f)
	return postgres.Interpret(err, t)
}

// auditSetting records a change to the settings entry id (doc, as written;
// for a delete, as it was) in the setting_change table, naming the caller:
// in the change's own transaction (q).
func auditSetting(ctx context.Context, q postgres.Querier, t storage.Tenant, op, id string, doc json.RawMessage) error {
	caller := storage.CallerFrom(ctx)
	value := `@doc::jsonb -> 'value'`
	if op == "delete" {
		value = `NULL`
	}
	_, err := q.Exec(ctx, postgres.WithTables(`INSERT INTO %s (tenant_id, setting_id, scope, key, operation, value, changed_by, changed_by_module)
		VALUES (@tenant, @id, @doc::jsonb ->> 'scope', @doc::jsonb ->> 'key', @op, `+value+`, @user, @module)`, postgres.TableSettingChange),
		pgx.StrictNamedArgs{"tenant": string(t), "id": id, "doc": doc, "op": op, "user": postgres.Nullable(caller.User), "module": postgres.Nullable(caller.Module)})
	return postgres.Interpret(err, t)
}

// insertRecord inserts one record; with skipExisting, an existing id is left
// as it is (for loading reference data twice) and nil is returned for it.
func insertRecord(ctx context.Context, q postgres.Querier, t storage.Tenant, r storage.Resource, id string, doc json.RawMessage, skipExisting bool) (json.RawMessage, error) {
	sql := postgres.WithTables(`INSERT INTO %s (tenant_id, id, jsonb) VALUES (@tenant, @id, `+WithMetadata(WithID(r, "@id", "@doc", `'1'`), "@metadata_user", false)+`)`, spec(r).table)
	if skipExisting {
		sql += ` ON CONFLICT (tenant_id, id) DO NOTHING`
	}
	sql += ` RETURNING jsonb`
	var stored json.RawMessage
	err := q.QueryRow(ctx, sql, pgx.StrictNamedArgs{"tenant": string(t), "id": id, "doc": doc, "metadata_user": MetadataUser(ctx)}).Scan(&stored)
	if skipExisting && errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, InterpretWrite(err, t, r, doc)
	}
	return stored, nil
}

// Get implements storage.RecordService.
func (s *Records) Get(ctx context.Context, t storage.Tenant, r storage.Resource, id string) (json.RawMessage, error) {
	var doc json.RawMessage
	err := s.db.Pool.QueryRow(ctx, postgres.WithTables(`SELECT jsonb FROM %s WHERE tenant_id = $2 AND id = $1`, spec(r).table), id, string(t)).Scan(&doc)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, errs.NotFound(r.Name, id)
	}
	if err != nil {
		return nil, postgres.Interpret(err, t)
	}
	return doc, nil
}

// List implements storage.RecordService. Filter values are parameters; only
// column names from the spec are written into the SQL.
func (s *Records) List(ctx context.Context, t storage.Tenant, r storage.Resource, f storage.RecordFilter) ([]json.RawMessage, int, error) {
	sp := spec(r)
	conds := []string{"tenant_id = @tenant"}
	args := pgx.StrictNamedArgs{"tenant": string(t)}
	for i, filter := range r.Filters {
		v, ok := f.Params[filter.Param]
		if !ok {
			continue
		}
		name := "filter_" + strconv.Itoa(i)
		args[name] = v
		cast := "text"
		if filter.Kind == storage.FilterUUID {
			cast = "uuid"
		}
		conds = append(conds, sp.columns[filter.Param]+" = @"+name+"::"+cast)
	}
	if f.Scopes != nil {
		args["scopes"] = f.Scopes
		conds = append(conds, "scope = ANY(@scopes::text[])")
	}
	order := sp.order
	var sortArgs pgx.StrictNamedArgs
	if f.Query != nil {
		tr, err := translateCQL(f.Query, f.QueryText, sp)
		if err != nil {
			return nil, 0, err
		}
		conds = append(conds, tr.where)
		maps.Copy(args, tr.whereArgs)
		sortArgs = tr.sortArgs
		if len(tr.orderBy) > 0 {
			order = strings.Join(tr.orderBy, ", ") + ", id"
		}
	}
	where := strings.Join(conds, " AND ")
	docs := []json.RawMessage{}
	size := 0
	total, err := postgres.Page(ctx, s.db.Pool, t,
		postgres.WithTables(`SELECT jsonb, count(*) OVER () FROM %s WHERE `+where+` ORDER BY `+order+` OFFSET @offset LIMIT @limit`, sp.table),
		postgres.WithTables(`SELECT count(*) FROM %s WHERE `+where, sp.table),
		args, sortArgs, f.Offset, f.Limit,
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
		return s.db.InTx(ctx, t, func(tx pgx.Tx) error {
			if err := Update(ctx, tx, t, r, id, version, doc, nil); err != nil {
				return err
			}
			if err := keepLockFeature(ctx, tx, t, id, doc); err != nil {
				return err
			}
			return auditSetting(ctx, tx, t, "update", id, doc)
		})
	}
	if r.Path == storage.Requests.Path {
		release, err := s.queueTurn(ctx, t)
		if err != nil {
			return err
		}
		defer release()
		return s.db.InTx(ctx, t, func(tx pgx.Tx) error {
			shelf, err := onShelf(ctx, tx, t, id)
			if err != nil {
				return err
			}
			before, err := requestKind(ctx, tx, t, id)
			if err != nil {
				return err
			}
			paged, err := pagedItem(ctx, tx, t, id)
			if err != nil {
				return err
			}
			if err := updateRequest(ctx, tx, t, id, version, doc); err != nil {
				return err
			}
			if err := s.leftShelf(ctx, tx, t, id, shelf); err != nil {
				return err
			}
			if err := s.leftPage(ctx, tx, t, id, paged); err != nil {
				return err
			}
			return s.judgeRequest(ctx, tx, t, id, doc, before)
		})
	}
	return s.db.Write(ctx, t, func(c *pgx.Conn) error { return Update(ctx, c, t, r, id, version, doc, updateGuards[r.Path]) })
}

// Guard is what a write of a record requires of the stored row, whoever
// calls, in the write's own statement: cond, SQL over the row (rec; @doc is
// the new document, {loan} the loan table), and, when the
// row is there but cond is false, why, from the row as it is (stored, its
// version, and the state columns of the resource) and the new document.
// The row's tenant is rec.tenant_id.
type Guard struct {
	Cond string
	// State reads the row's columns why needs.
	State string
	Why   func(id string, state []any, doc json.RawMessage) error
}

// NewStatus is the status a loan or item document names.
const NewStatus = `(@doc::jsonb #>> '{status,name}')`

// updateGuards hold plain updates to what only the check-out and the
// check-in writes may do. A loan keeps its status (an open loan is closed
// only by a check-in, a closed one never reopened) and, while open, its
// borrower and item. An item becomes Checked out only with its loan, by a
// check-out, and leaves Checked out only while it has no open loan (the
// check-in of an item with none).
var updateGuards = map[string]*Guard{
	storage.Loans.Path: {
		Cond: `status_name = ` + NewStatus + ` AND (status_name <> ` + postgres.Lit(schemas.LoanOpen) + `
                 OR (user_id = (@doc::jsonb ->> 'userId')::uuid AND item_id = (@doc::jsonb ->> 'itemId')::uuid))`,
		State: `status_name`,
		Why: func(id string, state []any, doc json.RawMessage) error {
			stored := *state[0].(*string)
			switch status := fieldAt(doc, "status", "name"); {
			case stored == schemas.LoanOpen && status != schemas.LoanOpen:
				return errs.Errorf(errs.KindInvalid, schemas.CodeCheckInRequired,
					"Loan %s is open: it is closed only by a check-in (%s), which makes its item Available with it", id,
					schemas.HeaderCheckInItemVersion).With("status", status)
			case stored != schemas.LoanOpen && status == schemas.LoanOpen:
				return errs.Errorf(errs.KindInvalid, schemas.CodeCheckOutRequired,
					"Loan %s is closed and stays closed: a loan is opened only by a check-out", id).With("status", status)
			}
			return errs.Errorf(errs.KindInvalid, schemas.CodeCheckInRequired,
				"Loan %s is open: its userId and itemId do not change; check the item in, and out to the other patron", id)
		},
	},
	storage.Items.Path: {
		Cond: `NOT (` + NewStatus + ` = ` + postgres.Lit(schemas.ItemCheckedOut) + ` AND status_name <> ` + postgres.Lit(schemas.ItemCheckedOut) + `)
           AND NOT (` + NewStatus + ` <> ` + postgres.Lit(schemas.ItemCheckedOut) + ` AND status_name = ` + postgres.Lit(schemas.ItemCheckedOut) + ` AND EXISTS (
                 SELECT 1 FROM {loan} l WHERE l.tenant_id = rec.tenant_id AND l.item_id = rec.id AND l.status_name = ` + postgres.Lit(schemas.LoanOpen) + `))`,
		State: `status_name`,
		Why: func(id string, state []any, doc json.RawMessage) error {
			if fieldAt(doc, "status", "name") == schemas.ItemCheckedOut {
				return errs.Errorf(errs.KindInvalid, schemas.CodeItemStatusByCirculation,
					"Item %s becomes Checked out only with its loan, by a check-out", id).With("status", schemas.ItemCheckedOut)
			}
			return errs.Errorf(errs.KindInvalid, schemas.CodeItemStatusByCirculation,
				"Item %s has an open loan: it leaves Checked out only by the check-in that closes the loan", id).
				With("status", fieldAt(doc, "status", "name"))
		},
	},
}

// Update replaces a record through q (the pool, or a transaction), when
// g (if any) holds for the stored row.
func Update(ctx context.Context, q postgres.Querier, t storage.Tenant, r storage.Resource, id string, version int, doc json.RawMessage, g *Guard) error {
	sql := postgres.WithTables(`UPDATE %s AS rec SET jsonb = `+WithMetadata(WithID(r, "@id", "@doc", `to_jsonb(coalesce(version, 0) + 1)`), "@metadata_user", true)+
		` WHERE rec.tenant_id = @tenant AND rec.id = @id`, spec(r).table)
	args := pgx.StrictNamedArgs{"tenant": string(t), "id": id, "doc": doc, "metadata_user": MetadataUser(ctx)}
	if r.Versioned {
		// Version 0 is none named: "any version" for a resource whose
		// version is optional on update, and a version no row has for
		// any other.
		sql += ` AND (@version::integer IS NULL OR rec.version = @version::integer)`
		args["version"] = version
		if r.VersionOptional {
			args["version"] = nullableInt(version)
		}
	}
	if g != nil {
		sql += ` AND ` + strings.ReplaceAll(g.Cond, "{loan}", postgres.Table(postgres.TableLoan))
	}
	tag, err := q.Exec(ctx, sql, args)
	if err != nil {
		return InterpretWrite(err, t, r, doc)
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
		cols, state = cols+", "+g.State, append(state, &s)
	}
	err = q.QueryRow(ctx, postgres.WithTables(`SELECT `+cols+` FROM %s WHERE tenant_id = $2 AND id = $1`, spec(r).table), id, string(t)).Scan(state...)
	if errors.Is(err, pgx.ErrNoRows) {
		return errs.NotFound(r.Name, id)
	}
	if err != nil {
		return postgres.Interpret(err, t)
	}
	if r.Versioned && (version != 0 || !r.VersionOptional) && stored != nil && *stored != version {
		return StaleVersion(id, *stored, version)
	}
	return g.Why(id, state[1:], doc)
}

// StaleVersion is FOLIO's optimistic-locking error: a replace of record
// id, stored at version stored, made at version (0: none named), changes
// nothing.
func StaleVersion(id string, stored, version int) *errs.Error {
	named := "<NULL>"
	if version != 0 {
		named = strconv.Itoa(version)
	}
	return errs.Errorf(errs.KindConflict, schemas.CodeVersionConflict,
		"Cannot update record %s because it has been changed (optimistic locking): Stored _version is %d, _version of request is %s",
		id, stored, named).With("_version", strconv.Itoa(stored))
}

// Delete implements storage.RecordService. An open loan is removed only
// by being checked in first.
func (s *Records) Delete(ctx context.Context, t storage.Tenant, r storage.Resource, id string) error {
	sql := postgres.WithTables(`DELETE FROM %s WHERE tenant_id = $2 AND id = $1`, spec(r).table)
	if r.Path == storage.Loans.Path {
		sql += ` AND status_name <> ` + postgres.Lit(schemas.LoanOpen)
	}
	if r.Path == storage.Requests.Path {
		release, err := s.queueTurn(ctx, t)
		if err != nil {
			return err
		}
		defer release()
	}
	// A settings entry's removal is audited in its own transaction.
	deleted := false
	err := s.db.InTx(ctx, t, func(tx pgx.Tx) error {
		del := func() (bool, error) {
			var old json.RawMessage
			err := tx.QueryRow(ctx, sql+` RETURNING jsonb`, id, string(t)).Scan(&old)
			if errors.Is(err, pgx.ErrNoRows) {
				return false, nil
			}
			if err != nil {
				return false, err
			}
			deleted = true
			if r.Path == storage.Settings.Path {
				return true, auditSetting(ctx, tx, t, "delete", id, old)
			}
			return true, nil
		}
		if r.Path == storage.Requests.Path {
			shelf, err := onShelf(ctx, tx, t, id)
			if err != nil {
				return err
			}
			paged, err := pagedItem(ctx, tx, t, id)
			if err != nil {
				return err
			}
			if err := deleteRequest(ctx, tx, t, id, del); err != nil {
				return err
			}
			if err := s.leftShelf(ctx, tx, t, id, shelf); err != nil {
				return err
			}
			return s.leftPage(ctx, tx, t, id, paged)
		}
		_, err := del()
		return err
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
		return postgres.Interpret(err, t)
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

// FieldValue reads a top-level string field of a JSON document, for messages.
func FieldValue(doc json.RawMessage, field string) string {
	var m map[string]any
	if json.Unmarshal(doc, &m) != nil {
		return ""
	}
	if s, ok := m[field].(string); ok {
		return s
	}
	return ""
}
