package requests

import (
	"context"
	"encoding/json"
	"slices"
	"strings"

	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/circulation-storage/internal/rules"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
	"github.com/jackc/pgx/v5"

	storage "github.com/checkoutlock/circulation-storage"
)

// Where a request may be picked up (FOLIO's allowed service points) is
// written once, here: requestPartiesSQL chooses the request policy of a
// requester and an item and the pickup service points it allows for each
// request type, and both readers of it ask that one statement fragment.
// A request placed through circulation is judged by it in its write
// (requestVerdictSQL: a hold shelf request naming a pickup location
// outside the set is refused REQUEST_PICKUP_SERVICE_POINT_IS_NOT_ALLOWED),
// and the allowed service points route answers it (AllowedServicePoints,
// lending's Rules serving it), so that what a librarian is offered is
// what the write then takes.

// requestTypes are the request types, in FOLIO's order.
var requestTypes = []string{schemas.RequestTypePage, schemas.RequestTypeHold, schemas.RequestTypeRecall}

// requestPartiesSQL is the common table expressions a request by
// requester for item (SQL expressions, uuid) is judged with, in tenant
// @tenant: u the requester's row (id, patron_group_id, jsonb), i the
// item's (id, status_name, material_type_id, loan_type_id), m the rule
// the circulation rules choose for them (rules.PolicyMatchSQL, as for a loan),
// p the request policy that rule names, else the rules' fallback
// (id, jsonb; no row: every type is allowed, at every pickup location),
// and a the pickup service points p allows for each request type
// (request_type, id, name, discovery_display_name): the pickup locations
// (pickupLocation true) its allowedServicePoints lists for the type, or
// every one when it lists none for it (absent or null: FOLIO's
// RequestPolicy.allowsServicePoint). Whether p allows the type at all is
// policyAllows'.
func requestPartiesSQL(requester, item string) string {
	var types []string
	for _, t := range requestTypes {
		types = append(types, "('"+t+"')")
	}
	return `u AS (SELECT id, patron_group_id, jsonb FROM ` + postgres.Table(postgres.TablePatron) + `
            WHERE tenant_id = @tenant AND id = ` + requester + `),
     i AS (SELECT id, status_name, material_type_id, coalesce(temporary_loan_type_id, permanent_loan_type_id) AS loan_type_id
             FROM ` + postgres.Table(postgres.TableItem) + ` WHERE tenant_id = @tenant AND id = ` + item + `),
     m AS (` + rules.PolicyMatchSQL(postgres.Table(postgres.TableCirculationRule), postgres.Table(postgres.TableCirculationRules), "@tenant",
		"(SELECT patron_group_id FROM u)", "(SELECT material_type_id FROM i)", "(SELECT loan_type_id FROM i)") + `),
     p AS (SELECT rp.id, rp.jsonb FROM ` + postgres.Table(postgres.TableRequestPolicy) + ` rp
            WHERE rp.tenant_id = @tenant
              AND rp.id = coalesce((SELECT cr.request_policy_id FROM ` + postgres.Table(postgres.TableCirculationRule) + ` cr
                                     WHERE cr.tenant_id = @tenant AND cr.position = (SELECT rule_index FROM m)),
                                   (SELECT fallback_request_policy_id FROM ` + postgres.Table(postgres.TableCirculationRules) + `
                                     WHERE tenant_id = @tenant))),
     a AS (SELECT t.request_type, sp.id, sp.jsonb ->> 'name' AS name, sp.jsonb ->> 'discoveryDisplayName' AS discovery_display_name
             FROM (VALUES ` + strings.Join(types, ", ") + `) t (request_type)
             JOIN ` + postgres.Table(postgres.TableServicePoint) + ` sp ON sp.tenant_id = @tenant AND sp.jsonb ->> 'pickupLocation' = 'true'
             LEFT JOIN LATERAL (SELECT p.jsonb #> ARRAY['allowedServicePoints', t.request_type] AS listed FROM p) l ON true
            WHERE CASE WHEN jsonb_typeof(l.listed) = 'array'
                       THEN EXISTS (SELECT 1 FROM jsonb_array_elements_text(l.listed) e WHERE lower(e) = sp.id::text)
                       ELSE true END)`
}

// policyAllows says whether a request policy whose requestTypes are types
// (as stored; nil when no policy applies, which allows every type) allows
// requestType.
func policyAllows(types json.RawMessage, requestType string) bool {
	if types == nil {
		return true
	}
	var allowed []string
	return json.Unmarshal(types, &allowed) == nil && slices.Contains(allowed, requestType)
}

// allowedServicePointsSQL reads what the allowed service points of a
// request by @requester for @item of @tenant are made of: whether both
// exist, the item's status, the request policy's types, and the pickup
// service points it allows for each type, by name (the code points', as
// FOLIO sorts them).
var allowedServicePointsSQL = `
WITH ` + requestPartiesSQL("@requester::uuid", "@item::uuid") + `
SELECT EXISTS (SELECT 1 FROM u) AS requester, EXISTS (SELECT 1 FROM i) AS item, (SELECT status_name FROM i) AS item_status,
       (SELECT jsonb -> 'requestTypes' FROM p) AS policy_types,
       (SELECT jsonb_agg(jsonb_strip_nulls(jsonb_build_object('requestType', a.request_type, 'id', a.id, 'name', a.name,
                 'discoveryDisplayName', a.discovery_display_name)) ORDER BY a.name COLLATE "C", a.id) FROM a) AS pickups`

// allowedServicePointsRow is allowedServicePointsSQL's row.
type allowedServicePointsRow struct {
	Requester   bool            `db:"requester"`
	Item        bool            `db:"item"`
	ItemStatus  *string         `db:"item_status"`
	PolicyTypes json.RawMessage `db:"policy_types"`
	Pickups     json.RawMessage `db:"pickups"`
}

// AllowedServicePoints is storage.RulesService's, read from db in one
// statement: a type is answered when the item's status allows it (unless
// ignoreItemStatus), the request policy does (policyAllows) and it has a
// pickup service point to name. FOLIO's words for a requester or an item
// not found.
func AllowedServicePoints(ctx context.Context, db *postgres.DB, t storage.Tenant, requesterID, itemID string, ignoreItemStatus bool) (storage.AllowedServicePoints, error) {
	r, err := postgres.QueryOne[allowedServicePointsRow](ctx, db.Pool, allowedServicePointsSQL,
		pgx.StrictNamedArgs{"tenant": string(t), "requester": requesterID, "item": itemID})
	if err != nil {
		return nil, postgres.Interpret(err, t)
	}
	switch {
	case !r.Requester:
		return nil, errs.Errorf(errs.KindInvalid, schemas.CodeValidation, "User with ID %s was not found", requesterID).With("requesterId", requesterID)
	case !r.Item:
		return nil, errs.Errorf(errs.KindInvalid, schemas.CodeValidation, "Item with id=%s cannot be found", itemID).With("itemId", itemID)
	}
	var pickups []struct {
		RequestType string `json:"requestType"`
		storage.AllowedServicePoint
	}
	if r.Pickups != nil {
		if err := json.Unmarshal(r.Pickups, &pickups); err != nil {
			return nil, err
		}
	}
	status := postgres.Deref(r.ItemStatus)
	out := storage.AllowedServicePoints{}
	for _, p := range pickups {
		if (ignoreItemStatus || slices.Contains(schemas.RequestTypesByItemStatus[status], p.RequestType)) &&
			policyAllows(r.PolicyTypes, p.RequestType) {
			out[p.RequestType] = append(out[p.RequestType], p.AllowedServicePoint)
		}
	}
	return out, nil
}
