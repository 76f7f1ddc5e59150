// Package record is how one record is kept in its jsonb table, whoever
// writes it: its document as SQL writes it (its id and version, FOLIO's
// metadata, an item's status: item.go) and a field of it read; its row
// inserted, or updated at the version read under a guard; and what a
// write's constraint violation means (constraints.go). Package recordstore
// serves every resource with it, and packages requests and lending write
// their requests and loans with it.
package record

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/schemas/errs"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/schemas"
)

// tables maps a resource's path to its table.
var tables = map[string]postgres.TableName{
	storage.PatronGroups.Path:          "patron_group",
	storage.MaterialTypes.Path:         "material_type",
	storage.LoanTypes.Path:             "loan_type",
	storage.Patrons.Path:               "patron",
	storage.Items.Path:                 "item",
	storage.LoanPolicies.Path:          "loan_policy",
	storage.RequestPolicies.Path:       "request_policy",
	storage.Loans.Path:                 "loan",
	storage.ManualBlocks.Path:          "manual_block",
	storage.PatronBlockConditions.Path: "patron_block_condition",
	storage.PatronBlockLimits.Path:     "patron_block_limit",
	storage.Requests.Path:              "request",
	storage.Accounts.Path:              "account",
	storage.ServicePoints.Path:         "service_point",
	storage.Settings.Path:              "setting",
	storage.FeeFineOwners.Path:         "fee_fine_owner",
	storage.FeeFineTypes.Path:          "fee_fine_type",
	storage.PaymentMethods.Path:        "payment_method",
	storage.OverdueFinePolicies.Path:   "overdue_fine_policy",
	storage.LostItemFeePolicies.Path:   "lost_item_fee_policy",
	storage.FeeFineAccounts.Path:       "fee_fine_account",
	storage.FeeFineActions.Path:        "fee_fine_action",
	storage.Calendars.Path:             "calendar",
	storage.PatronNoticePolicies.Path:  "patron_notice_policy",
	storage.NoticeTemplates.Path:       "notice_template",
	storage.ScheduledNotices.Path:      "scheduled_notice",
}

// Table is the table resource r is stored in.
func Table(r storage.Resource) postgres.TableName {
	table, ok := tables[r.Path]
	if !ok {
		panic("postgres: no table for resource " + r.Path)
	}
	return table
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

// Insert inserts one record; with skipExisting, an existing id is left
// as it is (for loading reference data twice) and nil is returned for it.
func Insert(ctx context.Context, q postgres.Querier, t storage.Tenant, r storage.Resource, id string, doc json.RawMessage, skipExisting bool) (json.RawMessage, error) {
	sql := postgres.WithTables(`INSERT INTO %s (tenant_id, id, jsonb) VALUES (@tenant, @id, `+WithMetadata(WithID(r, "@id", "@doc", `'1'`), "@metadata_user", false)+`)`, Table(r))
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

// Update replaces a record through q (the pool, or a transaction), when
// g (if any) holds for the stored row.
func Update(ctx context.Context, q postgres.Querier, t storage.Tenant, r storage.Resource, id string, version int, doc json.RawMessage, g *Guard) error {
	sql := postgres.WithTables(`UPDATE %s AS rec SET jsonb = `+WithMetadata(WithID(r, "@id", "@doc", `to_jsonb(coalesce(version, 0) + 1)`), "@metadata_user", true)+
		` WHERE rec.tenant_id = @tenant AND rec.id = @id`, Table(r))
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
	err = q.QueryRow(ctx, postgres.WithTables(`SELECT `+cols+` FROM %s WHERE tenant_id = $2 AND id = $1`, Table(r)), id, string(t)).Scan(state...)
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

// nullableInt is n, or SQL NULL for 0.
func nullableInt(n int) any {
	if n == 0 {
		return nil
	}
	return n
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
