// Package recordstore keeps circulation-storage's records on PostgreSQL, the
// generic record store: creating, reading, listing (with CQL queries,
// cql.go, and pages), updating and deleting every resource, under the
// guards that keep loans and items as circulation leaves them
// (updateGuards). Each record's row is written as package record writes
// it; a request's writes are package requests' (its Writer), which keeps
// its queue and judges it. The loan writes that circulation makes
// (check-out, check-in, renewal, loan action) are package lending's.
package recordstore

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/circulation-storage/internal/record"
	"github.com/checkoutlock/circulation-storage/internal/requests"
	"github.com/checkoutlock/schemas/errs"
	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/schemas"
)

// Records implements storage.RecordService on jsonb tables.
type Records struct {
	db *postgres.DB
	// requests writes the requests, each in its turn, keeping its queue
	// and judging it.
	requests *requests.Writer
}

var (
	_ storage.RecordService  = (*Records)(nil)
	_ storage.QueueReorderer = (*Records)(nil)
)

// ReorderQueue implements storage.QueueReorderer with the writer of
// requests, in its turn among their writes.
func (s *Records) ReorderQueue(ctx context.Context, t storage.Tenant, item string, order []storage.QueuePlace) error {
	return s.requests.ReorderQueue(ctx, t, item, order)
}

// NewRecords returns the record service.
func NewRecords(db *postgres.DB) *Records {
	return &Records{db: db, requests: requests.New(db)}
}

// tableSpec is how one resource is listed, in its table (record.Table).
type tableSpec struct {
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

// specs maps a resource's path to how it is listed.
var specs = map[string]tableSpec{
	storage.PatronGroups.Path: {columns: map[string]string{"group": "name"},
		fields: map[string]column{"id": uuidColumn("id"), "group": textColumn("name")}, order: "name, id"},
	storage.MaterialTypes.Path: {columns: map[string]string{"name": "name"},
		fields: map[string]column{"id": uuidColumn("id"), "name": textColumn("name")}, order: "name, id"},
	storage.LoanTypes.Path: {columns: map[string]string{"name": "name"},
		fields: map[string]column{"id": uuidColumn("id"), "name": textColumn("name")}, order: "name, id"},
	storage.Patrons.Path: {columns: map[string]string{"barcode": "barcode", "patronGroup": "patron_group_id"},
		fields: map[string]column{"id": uuidColumn("id"), "barcode": textColumn("barcode"), "patronGroup": uuidColumn("patron_group_id")},
		order:  "barcode, id"},
	storage.Items.Path: {columns: map[string]string{"barcode": "barcode", "status": "status_name"},
		fields: map[string]column{"id": uuidColumn("id"), "barcode": textColumn("barcode"), "status.name": textColumn("status_name"),
			"materialTypeId": uuidColumn("material_type_id"), "permanentLoanTypeId": uuidColumn("permanent_loan_type_id"),
			"temporaryLoanTypeId": uuidColumn("temporary_loan_type_id")},
		order: "barcode, id"},
	storage.LoanPolicies.Path: {columns: map[string]string{"name": "name"},
		fields: map[string]column{"id": uuidColumn("id"), "name": textColumn("name")}, order: "name, id"},
	storage.RequestPolicies.Path: {columns: map[string]string{"name": "name"},
		fields: map[string]column{"id": uuidColumn("id"), "name": textColumn("name")}, order: "name, id"},
	storage.Loans.Path: {columns: map[string]string{"userId": "user_id", "itemId": "item_id", "status": "status_name"},
		fields: map[string]column{"id": uuidColumn("id"), "userId": uuidColumn("user_id"), "itemId": uuidColumn("item_id"),
			"status.name": textColumn("status_name"), "loanPolicyId": uuidColumn("loan_policy_id")},
		order: "jsonb ->> 'loanDate', id"},
	storage.ManualBlocks.Path: {columns: map[string]string{"userId": "user_id"},
		fields: map[string]column{"id": uuidColumn("id"), "userId": uuidColumn("user_id")},
		order:  "user_id, id"},
	storage.PatronBlockConditions.Path: {columns: map[string]string{},
		fields: map[string]column{"id": uuidColumn("id")}, order: "id"},
	storage.PatronBlockLimits.Path: {columns: map[string]string{"patronGroupId": "patron_group_id", "conditionId": "condition_id"},
		fields: map[string]column{"id": uuidColumn("id"), "patronGroupId": uuidColumn("patron_group_id"),
			"conditionId": uuidColumn("condition_id")},
		order: "patron_group_id, condition_id, id"},
	storage.Requests.Path: {columns: map[string]string{"itemId": "item_id", "requesterId": "requester_id", "status": "status"},
		fields: map[string]column{"id": uuidColumn("id"), "itemId": uuidColumn("item_id"), "requesterId": uuidColumn("requester_id"),
			"status": textColumn("status")},
		order: "item_id, position, jsonb ->> 'requestDate', id"},
	storage.Accounts.Path: {columns: map[string]string{"username": "username"},
		fields: map[string]column{"id": uuidColumn("id"), "username": textColumn("username")}, order: "username, id"},
	storage.ServicePoints.Path: {columns: map[string]string{"name": "name"},
		fields: map[string]column{"id": uuidColumn("id"), "name": textColumn("name")}, order: "name, id"},
	storage.FeeFineOwners.Path: {columns: map[string]string{"owner": "owner"},
		fields: map[string]column{"id": uuidColumn("id"), "owner": textColumn("owner")}, order: "owner, id"},
	storage.FeeFineTypes.Path: {columns: map[string]string{"ownerId": "owner_id", "feeFineType": "fee_fine_type"},
		fields: map[string]column{"id": uuidColumn("id"), "ownerId": uuidColumn("owner_id"), "feeFineType": textColumn("fee_fine_type")},
		order:  "fee_fine_type, id"},
	storage.PaymentMethods.Path: {columns: map[string]string{"ownerId": "owner_id", "nameMethod": "name_method"},
		fields: map[string]column{"id": uuidColumn("id"), "ownerId": uuidColumn("owner_id"), "nameMethod": textColumn("name_method")},
		order:  "name_method, id"},
	storage.OverdueFinePolicies.Path: {columns: map[string]string{"name": "name"},
		fields: map[string]column{"id": uuidColumn("id"), "name": textColumn("name")}, order: "name, id"},
	storage.LostItemFeePolicies.Path: {columns: map[string]string{"name": "name"},
		fields: map[string]column{"id": uuidColumn("id"), "name": textColumn("name")}, order: "name, id"},
	storage.FeeFineAccounts.Path: {columns: map[string]string{"userId": "user_id", "loanId": "loan_id", "status": "status"},
		fields: map[string]column{"id": uuidColumn("id"), "userId": uuidColumn("user_id"), "loanId": uuidColumn("loan_id"),
			"status.name": textColumn("status"), "feeFineId": uuidColumn("fee_fine_id"), "ownerId": uuidColumn("owner_id")},
		order: "jsonb #>> '{metadata,createdDate}', id"},
	storage.FeeFineActions.Path: {columns: map[string]string{"accountId": "account_id", "userId": "user_id"},
		fields: map[string]column{"id": uuidColumn("id"), "accountId": uuidColumn("account_id"), "userId": uuidColumn("user_id"),
			"typeAction": textColumn("type_action")},
		order: "jsonb ->> 'dateAction', id"},
	storage.Calendars.Path: {columns: map[string]string{"name": "name"},
		fields: map[string]column{"id": uuidColumn("id"), "name": textColumn("name")}, order: "name, id"},
	storage.PatronNoticePolicies.Path: {columns: map[string]string{"name": "name"},
		fields: map[string]column{"id": uuidColumn("id"), "name": textColumn("name")}, order: "name, id"},
	storage.NoticeTemplates.Path: {columns: map[string]string{"name": "name"},
		fields: map[string]column{"id": uuidColumn("id"), "name": textColumn("name")}, order: "name, id"},
	storage.ScheduledNotices.Path: {columns: map[string]string{"loanId": "loan_id", "requestId": "request_id", "feeFineId": "fee_fine_id",
		"recipientUserId": "recipient_id", "status": "status"},
		fields: map[string]column{"id": uuidColumn("id"), "loanId": uuidColumn("loan_id"), "requestId": uuidColumn("request_id"),
			"feeFineId":       uuidColumn("fee_fine_id"),
			"recipientUserId": uuidColumn("recipient_id"), "status": textColumn("status")},
		order: "next_run_at, seq"},
	storage.Settings.Path: {columns: map[string]string{"scope": "scope", "key": "key"},
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

// Create implements storage.RecordService.
func (s *Records) Create(ctx context.Context, t storage.Tenant, r storage.Resource, id string, doc json.RawMessage) (json.RawMessage, error) {
	if err := kept(r, id); err != nil {
		return nil, err
	}
	var stored json.RawMessage
	if r.Path == storage.Settings.Path {
		err := s.db.InTx(ctx, t, func(tx pgx.Tx) error {
			var err error
			if stored, err = record.Insert(ctx, tx, t, r, id, doc, false); err != nil {
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
		return s.requests.Create(ctx, t, id, doc)
	}
	if _, identified := storage.WriteFrom(ctx); identified {
		// A write with an id of its own (a loan's, an item's): stored
		// with it, once.
		return s.db.InTxOnce(ctx, t, schemas.WriteRecordCreate, func(tx pgx.Tx) (json.RawMessage, error) {
			if err := lockBlocked(ctx, tx, t, r, doc); err != nil {
				return nil, err
			}
			return record.Insert(ctx, tx, t, r, id, doc, false)
		})
	}
	if blocking[r.Path] {
		err := s.db.InTx(ctx, t, func(tx pgx.Tx) error {
			if err := lockBlocked(ctx, tx, t, r, doc); err != nil {
				return err
			}
			var err error
			stored, err = record.Insert(ctx, tx, t, r, id, doc, false)
			return err
		})
		return stored, err
	}
	err := s.db.Write(ctx, t, func(c *pgx.Conn) error {
		var err error
		stored, err = record.Insert(ctx, c, t, r, id, doc, false)
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

// Get implements storage.RecordService.
func (s *Records) Get(ctx context.Context, t storage.Tenant, r storage.Resource, id string) (json.RawMessage, error) {
	var doc json.RawMessage
	err := s.db.Pool.QueryRow(ctx, postgres.WithTables(`SELECT jsonb FROM %s WHERE tenant_id = $2 AND id = $1`, record.Table(r)), id, string(t)).Scan(&doc)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, errs.NotFound(r.Name, id)
	}
	if err != nil {
		return nil, postgres.Interpret(err, t)
	}
	return doc, nil
}

// minRecordBytes is the least a stored record takes: {"id":"<uuid>"}.
const minRecordBytes = len(`{"id":"00000000-0000-0000-0000-000000000000"}`)

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
	// A page over f.MaxBytes ends its query at once: the rows PostgreSQL
	// still has for it are not read (pgx would read every one as the
	// rows close), and no more rows are asked for than could fit.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	limit := f.Limit
	if f.MaxBytes > 0 {
		limit = min(limit, f.MaxBytes/minRecordBytes+1)
	}
	total, err := postgres.Page(ctx, s.db.Pool, t,
		postgres.WithTables(`SELECT jsonb, count(*) OVER () FROM %s WHERE `+where+` ORDER BY `+order+` OFFSET @offset LIMIT @limit`, record.Table(r)),
		postgres.WithTables(`SELECT count(*) FROM %s WHERE `+where, record.Table(r)),
		args, sortArgs, f.Offset, limit,
		func(rows pgx.Rows) (int, error) {
			var doc json.RawMessage
			var total int
			if err := rows.Scan(&doc, &total); err != nil {
				return 0, err
			}
			if size += len(doc); f.MaxBytes > 0 && size > f.MaxBytes {
				cancel()
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
	if err := kept(r, id); err != nil {
		return err
	}
	if r.Path == storage.Settings.Path {
		return s.db.InTx(ctx, t, func(tx pgx.Tx) error {
			if err := record.Update(ctx, tx, t, r, id, version, doc, nil); err != nil {
				return err
			}
			if err := keepLockFeature(ctx, tx, t, id, doc); err != nil {
				return err
			}
			return auditSetting(ctx, tx, t, "update", id, doc)
		})
	}
	if r.Path == storage.Requests.Path {
		return s.requests.Update(ctx, t, id, version, doc)
	}
	if _, identified := storage.WriteFrom(ctx); identified {
		_, err := s.db.InTxOnce(ctx, t, schemas.WriteRecordUpdate, func(tx pgx.Tx) (json.RawMessage, error) {
			if err := lockBlocked(ctx, tx, t, r, doc); err != nil {
				return nil, err
			}
			return nil, record.Update(ctx, tx, t, r, id, version, doc, updateGuards[r.Path])
		})
		return err
	}
	if blocking[r.Path] {
		return s.db.InTx(ctx, t, func(tx pgx.Tx) error {
			if err := lockBlocked(ctx, tx, t, r, doc); err != nil {
				return err
			}
			return record.Update(ctx, tx, t, r, id, version, doc, updateGuards[r.Path])
		})
	}
	return s.db.Write(ctx, t, func(c *pgx.Conn) error { return record.Update(ctx, c, t, r, id, version, doc, updateGuards[r.Path]) })
}

// blocking are the records whose writes can newly block the patron they
// name (userId): a manual block, and a fee/fine (its balance, which an
// automated block counts).
var blocking = map[string]bool{storage.ManualBlocks.Path: true, storage.FeeFineAccounts.Path: true}

// lockBlocked locks, in tx, the row of the patron a blocking record (doc)
// names, before it is written (postgres.LockPatron): a check-out, a
// renewal or a request of the patron's comes wholly before the write, or
// judges the patron with it.
func lockBlocked(ctx context.Context, tx pgx.Tx, t storage.Tenant, r storage.Resource, doc json.RawMessage) error {
	if !blocking[r.Path] {
		return nil
	}
	return postgres.LockPatron(ctx, tx, t, record.FieldValue(doc, "userId"))
}

// kept refuses a write of a record the service keeps (Resource.Kept).
func kept(r storage.Resource, id string) error {
	if slices.Contains(r.Kept, id) {
		return errs.Errorf(errs.KindInvalid, schemas.CodeValidation, "%s", r.KeptWhy).With("id", id)
	}
	return nil
}

// updateGuards hold plain updates to what only the check-out and the
// check-in writes may do. A loan keeps its status (an open loan is closed
// only by a check-in, a closed one never reopened) and, while open, its
// borrower and item. An item becomes Checked out only with its loan, by a
// check-out, and leaves Checked out only while it has no open loan (the
// check-in of an item with none).
var updateGuards = map[string]*record.Guard{
	// A fee/fine's money and whose it is change only by the actions on
	// it (package feesfines), never by a replacement.
	storage.FeeFineAccounts.Path: {
		Cond: `amount = (@doc::jsonb ->> 'amount')::numeric AND remaining = (@doc::jsonb ->> 'remaining')::numeric
           AND status = (@doc::jsonb #>> '{status,name}') AND jsonb #>> '{paymentStatus,name}' = (@doc::jsonb #>> '{paymentStatus,name}')
           AND user_id = (@doc::jsonb ->> 'userId')::uuid AND fee_fine_id = (@doc::jsonb ->> 'feeFineId')::uuid
           AND owner_id = (@doc::jsonb ->> 'ownerId')::uuid AND loan_id IS NOT DISTINCT FROM (@doc::jsonb ->> 'loanId')::uuid`,
		State: `remaining::text`,
		Why: func(id string, state []any, doc json.RawMessage) error {
			return errs.Errorf(errs.KindInvalid, schemas.CodeValidation,
				"Fee/fine %s: its amount, remaining, status, paymentStatus, userId, feeFineId, ownerId and loanId change only by "+
					"the actions on it (/accounts/%s/pay, waive, transfer, refund, cancel)", id, id)
		},
	},
	storage.Loans.Path: {
		Cond: `status_name = ` + record.NewStatus + ` AND (status_name <> ` + postgres.Lit(schemas.LoanOpen) + `
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
		Cond: `NOT (` + record.NewStatus + ` = ` + postgres.Lit(schemas.ItemCheckedOut) + ` AND status_name <> ` + postgres.Lit(schemas.ItemCheckedOut) + `)
           AND NOT (` + record.NewStatus + ` <> ` + postgres.Lit(schemas.ItemCheckedOut) + ` AND status_name = ` + postgres.Lit(schemas.ItemCheckedOut) + ` AND EXISTS (
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

// Delete implements storage.RecordService. An open loan is removed only
// by being checked in first.
func (s *Records) Delete(ctx context.Context, t storage.Tenant, r storage.Resource, id string) error {
	if err := kept(r, id); err != nil {
		return err
	}
	sql := postgres.WithTables(`DELETE FROM %s WHERE tenant_id = $2 AND id = $1`, record.Table(r))
	if r.Path == storage.Loans.Path {
		sql += ` AND status_name <> ` + postgres.Lit(schemas.LoanOpen)
	}
	if r.Path == storage.Requests.Path {
		release, err := s.requests.Turn(ctx, t)
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
			return requests.Delete(ctx, tx, t, id, del)
		}
		_, err := del()
		return err
	})
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == pgerrcode.ForeignKeyViolation {
			c := record.Constraints[pgErr.ConstraintName]
			e := errs.Errorf(errs.KindConflict, schemas.CodeInUse, "Cannot delete %s %s: %s refer to it",
				strings.ToLower(r.Name), id, c.Source).With("id", id)
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
