package record

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

// Constraint describes a named constraint for error messages: the JSON
// field it guards, what it refers to, and which records hold the reference.
type Constraint struct {
	Field  string // JSON field of the record being written
	Target string // what a foreign key refers to
	Source string // records holding the reference, for refused deletes
	Rule   string // what a check constraint holds, in words
}

// Constraints lists every uniqueness rule and reference of the migrations
// by name, so violations are reported by SQLSTATE and constraint name.
var Constraints = map[string]Constraint{
	"patron_group_name_key":                               {Field: "group"},
	"calendar_name":                                       {Field: "name", Rule: "a calendar is named"},
	"calendar_date_range":                                 {Field: "startDate", Rule: "startDate and endDate are dates (YYYY-MM-DD), the first on or before the second"},
	"calendar_normal_hours":                               {Field: "normalHours", Rule: "each opening names weekdays and times (HH:MM), and no two overlap"},
	"calendar_exceptions":                                 {Field: "exceptions", Rule: "each exception is named and lies within the calendar's dates, apart from the others, and each of its openings lies within it, its start before its end"},
	"calendar_assignment_overlap":                         {Field: "assignments", Rule: "a service point has one calendar in force on a day: another calendar assigned to one of these service points is in force on some of these dates"},
	"calendar_assignment_service_point_fkey":              {Field: "assignments", Target: "service point", Source: "calendars"},
	"material_type_name_key":                              {Field: "name"},
	"loan_type_name_key":                                  {Field: "name"},
	"patron_barcode_key":                                  {Field: "barcode"},
	"item_barcode_key":                                    {Field: "barcode"},
	"loan_policy_name_key":                                {Field: "name"},
	"setting_scope_key_key":                               {Field: "key"},
	"loan_one_open_loan_per_item":                         {Field: "itemId"},
	"patron_patron_group_fkey":                            {Field: "patronGroup", Target: "patron group", Source: "users"},
	"item_material_type_fkey":                             {Field: "materialTypeId", Target: "material type", Source: "items"},
	"item_permanent_loan_type_fkey":                       {Field: "permanentLoanTypeId", Target: "loan type", Source: "items"},
	"item_temporary_loan_type_fkey":                       {Field: "temporaryLoanTypeId", Target: "loan type", Source: "items"},
	"loan_user_fkey":                                      {Field: "userId", Target: "user", Source: "loans"},
	"loan_item_fkey":                                      {Field: "itemId", Target: "item", Source: "loans"},
	"loan_loan_policy_fkey":                               {Field: "loanPolicyId", Target: "loan policy", Source: "loans"},
	"loan_checkoutServicePointId_fkey":                    {Field: "checkoutServicePointId", Target: "service point", Source: "loans"},
	"loan_checkinServicePointId_fkey":                     {Field: "checkinServicePointId", Target: "service point", Source: "loans"},
	"circulation_rules_fallback_fkey":                     {Field: "fallbackLoanPolicyId", Target: "loan policy", Source: "circulation rules"},
	"circulation_rule_patron_group_fkey":                  {Field: "patronGroupId", Target: "patron group", Source: "circulation rules"},
	"circulation_rule_material_type_fkey":                 {Field: "materialTypeId", Target: "material type", Source: "circulation rules"},
	"circulation_rule_loan_type_fkey":                     {Field: "loanTypeId", Target: "loan type", Source: "circulation rules"},
	"circulation_rule_loan_policy_fkey":                   {Field: "loanPolicyId", Target: "loan policy", Source: "circulation rules"},
	"circulation_rules_fallback_request_policy_fkey":      {Field: "fallbackRequestPolicyId", Target: "request policy", Source: "circulation rules"},
	"circulation_rule_request_policy_fkey":                {Field: "requestPolicyId", Target: "request policy", Source: "circulation rules"},
	"request_policy_name_key":                             {Field: "name"},
	"account_username_key":                                {Field: "username"},
	"service_point_name_key":                              {Field: "name"},
	"request_item_fkey":                                   {Field: "itemId", Target: "item", Source: "requests"},
	"request_requester_fkey":                              {Field: "requesterId", Target: "user", Source: "requests"},
	"request_queue_position_key":                          {Field: "position"},
	"manual_block_user_fkey":                              {Field: "userId", Target: "user", Source: "manual blocks"},
	"patron_block_limit_group_condition_key":              {Field: "conditionId"},
	"patron_block_limit_patron_group_fkey":                {Field: "patronGroupId", Target: "patron group", Source: "patron block limits"},
	"patron_block_limit_condition_fkey":                   {Field: "conditionId", Target: "patron block condition", Source: "patron block limits"},
	"fee_fine_owner_owner_key":                            {Field: "owner"},
	"fee_fine_type_name_key":                              {Field: "feeFineType"},
	"fee_fine_type_owner_fkey":                            {Field: "ownerId", Target: "fee/fine owner", Source: "fee/fine types"},
	"payment_method_name_key":                             {Field: "nameMethod"},
	"payment_method_owner_fkey":                           {Field: "ownerId", Target: "fee/fine owner", Source: "payment methods"},
	"overdue_fine_policy_name_key":                        {Field: "name"},
	"lost_item_fee_policy_name_key":                       {Field: "name"},
	"circulation_rules_fallback_overdue_fine_policy_fkey": {Field: "fallbackOverdueFinePolicyId", Target: "overdue fine policy", Source: "circulation rules"},
	"circulation_rules_fallback_lost_item_policy_fkey":    {Field: "fallbackLostItemPolicyId", Target: "lost item fee policy", Source: "circulation rules"},
	"circulation_rule_overdue_fine_policy_fkey":           {Field: "overdueFinePolicyId", Target: "overdue fine policy", Source: "circulation rules"},
	"circulation_rule_lost_item_policy_fkey":              {Field: "lostItemPolicyId", Target: "lost item fee policy", Source: "circulation rules"},
	"patron_notice_policy_name_key":                       {Field: "name"},
	"circulation_rules_fallback_notice_policy_fkey":       {Field: "fallbackNoticePolicyId", Target: "patron notice policy", Source: "circulation rules"},
	"circulation_rule_notice_policy_fkey":                 {Field: "noticePolicyId", Target: "patron notice policy", Source: "circulation rules"},
	"fee_fine_account_user_fkey":                          {Field: "userId", Target: "user", Source: "fees/fines"},
	"fee_fine_account_fee_fine_fkey":                      {Field: "feeFineId", Target: "fee/fine type", Source: "fees/fines"},
	"fee_fine_account_owner_fkey":                         {Field: "ownerId", Target: "fee/fine owner", Source: "fees/fines"},
	"fee_fine_account_amount_check":                       {Field: "amount", Rule: "must be above 0, with at most two decimal places"},
	"fee_fine_account_remaining_check":                    {Field: "remaining", Rule: "must be from 0 to the amount, with at most two decimal places"},
	"fee_fine_account_status_check":                       {Field: "status", Rule: "must be Open while something remains, and Closed when nothing does"},
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
	c, known := Constraints[pgErr.ConstraintName]
	switch {
	case pgErr.Code == pgerrcode.UniqueViolation && pgErr.ConstraintName == string(Table(r))+"_pkey":
		id := FieldValue(doc, "id")
		e := errs.Errorf(errs.KindConflict, schemas.CodeConflict, "%s %s already exists", r.Name, id).With("id", id)
		e.Err = err
		return e
	case known && pgErr.Code == pgerrcode.UniqueViolation && pgErr.ConstraintName == "loan_one_open_loan_per_item":
		e := errs.Errorf(errs.KindInvalid, schemas.CodeItemHasOpenLoan, "Cannot have more than one open loan for the same item").
			With("itemId", FieldValue(doc, c.Field))
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
		v := FieldValue(doc, c.Field)
		if pgErr.ConstraintName == "setting_scope_key_key" {
			v = FieldValue(doc, "scope") + "/" + v
		}
		e := errs.Errorf(errs.KindInvalid, schemas.CodeAlreadyExists, "%s with %s %q already exists", r.Name, c.Field, v).
			With(c.Field, v)
		e.Err = err
		return e
	case known && pgErr.Code == pgerrcode.CheckViolation && c.Rule != "":
		v := FieldValue(doc, c.Field)
		e := errs.Errorf(errs.KindInvalid, schemas.CodeValidation, "%s: %s", c.Field, c.Rule).With(c.Field, v)
		e.Err = err
		return e
	case known && pgErr.Code == pgerrcode.ForeignKeyViolation:
		v := FieldValue(doc, c.Field)
		e := errs.Errorf(errs.KindInvalid, schemas.CodeValidation, "%s: %s %s does not exist", c.Field, c.Target, v).
			With(c.Field, v)
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
