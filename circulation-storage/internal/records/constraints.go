package records

import (
	"encoding/json"
	"errors"

	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
)

// constraint describes a named constraint for error messages: the JSON
// field it guards, what it refers to, and which records hold the reference.
type constraint struct {
	field  string // JSON field of the record being written
	target string // what a foreign key refers to
	source string // records holding the reference, for refused deletes
}

// constraints lists every uniqueness rule and reference of the migrations
// by name, so violations are reported by SQLSTATE and constraint name.
var constraints = map[string]constraint{
	"patron_group_name_key":                          {field: "group"},
	"material_type_name_key":                         {field: "name"},
	"loan_type_name_key":                             {field: "name"},
	"patron_barcode_key":                             {field: "barcode"},
	"item_barcode_key":                               {field: "barcode"},
	"loan_policy_name_key":                           {field: "name"},
	"setting_scope_key_key":                          {field: "key"},
	"loan_one_open_loan_per_item":                    {field: "itemId"},
	"patron_patron_group_fkey":                       {field: "patronGroup", target: "patron group", source: "users"},
	"item_material_type_fkey":                        {field: "materialTypeId", target: "material type", source: "items"},
	"item_permanent_loan_type_fkey":                  {field: "permanentLoanTypeId", target: "loan type", source: "items"},
	"item_temporary_loan_type_fkey":                  {field: "temporaryLoanTypeId", target: "loan type", source: "items"},
	"loan_user_fkey":                                 {field: "userId", target: "user", source: "loans"},
	"loan_item_fkey":                                 {field: "itemId", target: "item", source: "loans"},
	"loan_loan_policy_fkey":                          {field: "loanPolicyId", target: "loan policy", source: "loans"},
	"loan_checkoutServicePointId_fkey":               {field: "checkoutServicePointId", target: "service point", source: "loans"},
	"loan_checkinServicePointId_fkey":                {field: "checkinServicePointId", target: "service point", source: "loans"},
	"circulation_rules_fallback_fkey":                {field: "fallbackLoanPolicyId", target: "loan policy", source: "circulation rules"},
	"circulation_rule_patron_group_fkey":             {field: "patronGroupId", target: "patron group", source: "circulation rules"},
	"circulation_rule_material_type_fkey":            {field: "materialTypeId", target: "material type", source: "circulation rules"},
	"circulation_rule_loan_type_fkey":                {field: "loanTypeId", target: "loan type", source: "circulation rules"},
	"circulation_rule_loan_policy_fkey":              {field: "loanPolicyId", target: "loan policy", source: "circulation rules"},
	"circulation_rules_fallback_request_policy_fkey": {field: "fallbackRequestPolicyId", target: "request policy", source: "circulation rules"},
	"circulation_rule_request_policy_fkey":           {field: "requestPolicyId", target: "request policy", source: "circulation rules"},
	"request_policy_name_key":                        {field: "name"},
	"account_username_key":                           {field: "username"},
	"service_point_name_key":                         {field: "name"},
	"request_item_fkey":                              {field: "itemId", target: "item", source: "requests"},
	"request_requester_fkey":                         {field: "requesterId", target: "user", source: "requests"},
	"request_queue_position_key":                     {field: "position"},
	"manual_block_user_fkey":                         {field: "userId", target: "user", source: "manual blocks"},
	"patron_block_limit_group_condition_key":         {field: "conditionId"},
	"patron_block_limit_patron_group_fkey":           {field: "patronGroupId", target: "patron group", source: "patron block limits"},
	"patron_block_limit_condition_fkey":              {field: "conditionId", target: "patron block condition", source: "patron block limits"},
}

// InterpretWrite is interpret for a write of doc, naming the offending field
// and value of a uniqueness or reference violation. It reads the violation
// by SQLSTATE and constraint name (pgconn.PgError's fields), and the values
// it names from doc, never from the message or detail text, whose wording
// is the server's (and its locale's) to change.
func InterpretWrite(err error, t storage.Tenant, r storage.Resource, doc json.RawMessage) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return postgres.Interpret(err, t)
	}
	c, known := constraints[pgErr.ConstraintName]
	switch {
	case pgErr.Code == pgerrcode.UniqueViolation && pgErr.ConstraintName == string(spec(r).table)+"_pkey":
		id := FieldValue(doc, "id")
		e := errs.Errorf(errs.KindConflict, schemas.CodeConflict, "%s %s already exists", r.Name, id).With("id", id)
		e.Err = err
		return e
	case known && pgErr.Code == pgerrcode.UniqueViolation && pgErr.ConstraintName == "loan_one_open_loan_per_item":
		e := errs.Errorf(errs.KindInvalid, schemas.CodeItemHasOpenLoan, "Cannot have more than one open loan for the same item").
			With("itemId", FieldValue(doc, c.field))
		e.Err = err
		return e
	case known && pgErr.Code == pgerrcode.UniqueViolation && pgErr.ConstraintName == "request_queue_position_key":
		// The key is (item_id, tenant_id, position): the request written
		// names the item and the position; a loan written (a check-out's
		// write filling a request) names the item only.
		item, position := queuePlaceOf(doc)
		if position == "" {
			e := errs.Errorf(errs.KindInvalid, schemas.CodeAlreadyExists,
				"Two open requests would share a position in the queue of item %s", item).With("itemId", item)
			e.Err = err
			return e
		}
		e := errs.Errorf(errs.KindInvalid, schemas.CodeAlreadyExists, "Request with position %s already exists in the queue of item %s",
			position, item).With("position", position)
		e.Err = err
		return e
	case known && pgErr.Code == pgerrcode.UniqueViolation:
		v := FieldValue(doc, c.field)
		if pgErr.ConstraintName == "setting_scope_key_key" {
			v = FieldValue(doc, "scope") + "/" + v
		}
		e := errs.Errorf(errs.KindInvalid, schemas.CodeAlreadyExists, "%s with %s %q already exists", r.Name, c.field, v).
			With(c.field, v)
		e.Err = err
		return e
	case known && pgErr.Code == pgerrcode.ForeignKeyViolation:
		v := FieldValue(doc, c.field)
		e := errs.Errorf(errs.KindInvalid, schemas.CodeValidation, "%s: %s %s does not exist", c.field, c.target, v).
			With(c.field, v)
		e.Err = err
		return e
	}
	return postgres.Interpret(err, t)
}

// queuePlaceOf is the item and the queue position (empty when it has none)
// that doc, a request or a loan, names.
func queuePlaceOf(doc json.RawMessage) (item, position string) {
	var d struct {
		ItemID   string      `json:"itemId"`
		Position json.Number `json:"position"`
	}
	if json.Unmarshal(doc, &d) != nil {
		return "", ""
	}
	return d.ItemID, d.Position.String()
}
