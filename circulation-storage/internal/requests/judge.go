package requests

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/circulation-storage/internal/record"
	"github.com/checkoutlock/circulation-storage/internal/rules"
	"github.com/jackc/pgx/v5"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
)

// A request placed (or moved to another item) through circulation is
// judged by FOLIO's rules in its own write's transaction, after the write,
// with its requester's row locked first (lockRequester: every write that
// can newly block the requester waits for it) and its item's queue locked
// (the item's row: every write of the item waits for it), so nothing it
// judges can change before it commits:
//
//	the item's status allows the request's type    REQUESTING_DISALLOWED            (schemas.RequestTypesByItemStatus)
//	the requester is active and not expired          USER_IS_INACTIVE
//	no other open request of the requester's         ITEM_ALREADY_REQUESTED_BY_SAME_USER
//	no automated block of the requester's requests   USER_IS_BLOCKED_AUTOMATICALLY, one a block
//	  (rules.AutomatedBlocksSQL: a limit of their
//	  patron group's whose condition blocks requests)
//	the requester does not have the item on loan     ITEM_ALREADY_LOANED_TO_SAME_USER
//	no manual block of the requester's requests      USER_IS_BLOCKED_MANUALLY
//	a hold shelf request's pickup point is one       INVALID_PICKUP_SERVICE_POINT
//	the request policy allows the type               REQUESTING_DISALLOWED_BY_POLICY
//	  and, for a hold shelf request, its pickup      REQUEST_PICKUP_SERVICE_POINT_IS_NOT_ALLOWED
//	  location (allowedServicePoints, pickup.go)
//
// Every reason is reported, in that order (FOLIO's CreateRequestService),
// and a refused request writes nothing. The request policy's two rules
// are one check in FOLIO (refuseWhenRequestCannotBeFulfilled): a type the
// policy does not allow is not asked where it may be picked up. A pickup
// point that is no pickup location is refused as such, and not asked of
// the policy either: the set the policy allows is of pickup locations.
//
// A request that holds makes, in the same transaction, the writes its
// type calls for: a page moves its
// available item to Paged; a recall marks the item's open loan, once per
// loan (dueDateChangedByRecall, the action "recallrequested", its
// actionComment and reminders gone: FOLIO's UpdateLoan and
// LoanPolicy.recall), and moves its due date to the loan policy's recall
// due date when that is the earlier: the recall return interval from now,
// never before its minimum guaranteed loan period. A recall due date
// later than the loan's keeps the loan's, and marks it all the same.
// The triggers of migration 9 announce each change.

// requestVerdictSQL reads what judging request @id of @tenant needs: its
// requester, its item and their request policy as requestPartiesSQL
// chooses them, and whether its pickup point is among those the policy
// allows for its type.
var requestVerdictSQL = `
WITH q AS (SELECT item_id, requester_id, jsonb ->> 'requestType' AS type, jsonb ->> 'fulfillmentPreference' AS fulfillment,
                  (jsonb ->> 'pickupServicePointId')::uuid AS pickup FROM ` + postgres.Table(postgres.TableRequest) + `
            WHERE tenant_id = @tenant AND id = @id::uuid),
     ` + requestPartiesSQL("(SELECT requester_id FROM q)", "(SELECT item_id FROM q)") + `
SELECT (SELECT type FROM q) AS type, (SELECT status_name FROM i) AS item_status,
       (SELECT fulfillment FROM q) AS fulfillment, (SELECT pickup::text FROM q) AS pickup,
       (SELECT coalesce(sp.jsonb ->> 'pickupLocation' = 'true', false) FROM ` + postgres.Table(postgres.TableServicePoint) + ` sp
         WHERE sp.tenant_id = @tenant AND sp.id = (SELECT pickup FROM q)) AS pickup_location,
       coalesce((SELECT ` + rules.PatronActiveSQL("u") + ` FROM u), false) AS active,
       (SELECT r.id::text FROM ` + postgres.Table(postgres.TableRequest) + ` r, q
         WHERE r.tenant_id = @tenant AND r.item_id = q.item_id AND r.requester_id = q.requester_id
           AND ` + Open("r.status") + ` AND r.id <> @id::uuid ORDER BY r.position LIMIT 1) AS other_request,
       EXISTS (SELECT 1 FROM ` + postgres.Table(postgres.TableLoan) + ` l, q
                WHERE l.tenant_id = @tenant AND l.item_id = q.item_id AND l.user_id = q.requester_id AND l.status_name = ` + postgres.Lit(schemas.LoanOpen) + `) AS on_loan,
       (SELECT jsonb_agg(jsonb_build_object('condition', b ->> 'patronBlockConditionId', 'message', b ->> 'message')
                         ORDER BY b ->> 'patronBlockConditionId')
          FROM jsonb_array_elements(coalesce(` + rules.AutomatedBlocksSQL("@tenant", "(SELECT id FROM u)", "(SELECT patron_group_id FROM u)") + `, '[]'::jsonb)) b
         WHERE (b ->> 'blockRequests')::boolean) AS automated,
       ` + rules.ManuallyBlockedSQL("(SELECT id FROM u)", "requests") + ` AS blocked,
       (SELECT id::text FROM p) AS policy_id, (SELECT jsonb -> 'requestTypes' FROM p) AS policy_types,
       EXISTS (SELECT 1 FROM a, q WHERE a.request_type = q.type AND a.id = q.pickup) AS pickup_allowed`

// requestVerdict is requestVerdictSQL's row.
type requestVerdict struct {
	Type        string  `db:"type"`
	ItemStatus  *string `db:"item_status"`
	Fulfillment *string `db:"fulfillment"`
	Pickup      *string `db:"pickup"`
	// PickupLocation is whether the pickup service point is one (nil:
	// there is no such service point).
	PickupLocation *bool   `db:"pickup_location"`
	Active         bool    `db:"active"`
	OtherRequest   *string `db:"other_request"`
	OnLoan         bool    `db:"on_loan"`
	// Automated is the requester's automated blocks of requests
	// (rules.AutomatedBlocksSQL's with blockRequests), each its condition
	// and message, by condition; NULL when none.
	Automated json.RawMessage `db:"automated"`
	Blocked   bool            `db:"blocked"`
	// PolicyID and PolicyTypes are the request policy's id and
	// requestTypes (nil: no policy applies).
	PolicyID    *string         `db:"policy_id"`
	PolicyTypes json.RawMessage `db:"policy_types"`
	// PickupAllowed is whether the pickup service point is one the policy
	// allows for the request's type.
	PickupAllowed bool `db:"pickup_allowed"`
}

// refusals are the rules v breaks, in FOLIO's order, for request id of
// requester for item.
func (v requestVerdict) refusals(id, requester, item string) []*errs.Error {
	var out []*errs.Error
	notAllowed := func(code string) *errs.Error {
		return errs.Errorf(errs.KindInvalid, code, "%s requests are not allowed for this patron and item combination", v.Type).
			With("requestType", v.Type)
	}
	status := ""
	if v.ItemStatus != nil {
		status = *v.ItemStatus
	}
	if !slices.Contains(schemas.RequestTypesByItemStatus[status], v.Type) {
		out = append(out, notAllowed(schemas.CodeRequestingDisallowed).With("itemStatus", status))
	}
	if !v.Active {
		out = append(out, errs.Errorf(errs.KindInvalid, schemas.CodeUserInactive, "Inactive users cannot make requests").
			With("requesterId", requester))
	}
	if v.OtherRequest != nil {
		out = append(out, errs.Errorf(errs.KindInvalid, schemas.CodeItemAlreadyRequested, "This requester already has an open request for this item").
			With("requesterId", requester).With("itemId", item).With("requestId", *v.OtherRequest))
	}
	var automated []struct{ Condition, Message string }
	if json.Unmarshal(v.Automated, &automated) == nil {
		for _, b := range automated {
			// FOLIO's AutomatedPatronBlocksValidator: the condition's
			// message, one error a block.
			out = append(out, errs.Errorf(errs.KindInvalid, schemas.CodeUserBlockedAutomatically, "%s", b.Message).
				With("patronBlockConditionId", b.Condition))
		}
	}
	if v.OnLoan {
		out = append(out, errs.Errorf(errs.KindInvalid, schemas.CodeItemAlreadyLoaned, "This requester currently has this item on loan.").
			With("itemId", item).With("userId", requester))
	}
	if v.Blocked {
		out = append(out, errs.Errorf(errs.KindInvalid, schemas.CodeUserBlockedManually, "Patron blocked from requesting").
			With("requesterId", requester))
	}
	holdShelf := v.Fulfillment != nil && *v.Fulfillment == "Hold Shelf"
	switch {
	case v.Pickup == nil && holdShelf:
		out = append(out, errs.Errorf(errs.KindInvalid, schemas.CodeInvalidPickupServicePoint,
			"Hold Shelf Fulfillment Requests require a Pickup Service Point").With("requestId", id))
	case v.Pickup != nil && v.PickupLocation == nil:
		out = append(out, errs.Errorf(errs.KindInvalid, schemas.CodeInvalidPickupServicePoint,
			"Pickup service point does not exist").With("pickupServicePointId", *v.Pickup))
	case v.Pickup != nil && !*v.PickupLocation:
		out = append(out, errs.Errorf(errs.KindInvalid, schemas.CodeInvalidPickupServicePoint,
			"Service point is not a pickup location").With("pickupServicePointId", *v.Pickup))
	}
	switch {
	case !policyAllows(v.PolicyTypes, v.Type):
		out = append(out, notAllowed(schemas.CodeRequestingDisallowedByPolicy))
	case holdShelf && v.PickupLocation != nil && *v.PickupLocation && !v.PickupAllowed:
		out = append(out, errs.Errorf(errs.KindInvalid, schemas.CodeRequestPickupServicePointNotAllowed,
			"One or more Pickup locations are no longer available").
			With("pickupServicePointId", *v.Pickup).With("requestType", v.Type).With("requestPolicyId", postgres.Deref(v.PolicyID)))
	}
	return out
}

// pageItemSQL moves the item of page request @id to Paged while it is on
// the shelf (Available or Restricted).
var pageItemSQL = `
UPDATE ` + postgres.Table(postgres.TableItem) + ` SET jsonb = ` + record.WithMetadata(record.ItemWithStatus(schemas.ItemPaged), "@metadata_user", true) + `
 WHERE tenant_id = @tenant AND id = (SELECT item_id FROM ` + postgres.Table(postgres.TableRequest) + ` WHERE tenant_id = @tenant AND id = @id::uuid)
   AND status_name IN (` + postgres.Lits(schemas.ItemAvailable, schemas.ItemRestricted) + `)`

// recallLoanSQL marks the open loan of recall @id's item, once
// (dueDateChangedByRecall, the action recallrequested, no actionComment
// nor reminders), and makes it due at now and the policy's
// recallReturnInterval, but not before its loan date and the
// minimumGuaranteedLoanPeriod, when that is earlier than its due date: a
// later one, or a due date that cannot be read, is kept.
var recallLoanSQL = `
WITH l AS (SELECT l.id, l.jsonb ->> 'dueDate' AS due_before,
                  greatest(now() + ` + periodInterval(`lp.jsonb #> '{requestManagement,recalls,recallReturnInterval}'`) + `,
                           ` + postgres.StoredTime("l.jsonb ->> 'loanDate'", "loan loanDate") + ` + ` +
	periodInterval(`lp.jsonb #> '{requestManagement,recalls,minimumGuaranteedLoanPeriod}'`) + `) AS due
             FROM ` + postgres.Table(postgres.TableLoan) + ` l
             LEFT JOIN ` + postgres.Table(postgres.TableLoanPolicy) + ` lp ON lp.tenant_id = l.tenant_id AND lp.id = l.loan_policy_id
            WHERE l.tenant_id = @tenant AND l.status_name = ` + postgres.Lit(schemas.LoanOpen) + `
              AND l.item_id = (SELECT item_id FROM ` + postgres.Table(postgres.TableRequest) + ` WHERE tenant_id = @tenant AND id = @id::uuid)
              AND NOT coalesce((l.jsonb ->> 'dueDateChangedByRecall')::boolean, false))
UPDATE ` + postgres.Table(postgres.TableLoan) + ` t SET jsonb = ` + record.WithMetadata(`(t.jsonb - 'actionComment' - 'reminders')
         || jsonb_build_object('dueDateChangedByRecall', true, 'action', 'recallrequested')
         || CASE WHEN l.due < `+postgres.StoredTime("l.due_before", "loan dueDate")+`
                 THEN jsonb_build_object('dueDate', to_char(l.due AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))
                 ELSE '{}'::jsonb END`, "@metadata_user", true) + `
  FROM l
 WHERE t.tenant_id = @tenant AND t.id = l.id`

// periodInterval is SQL for the interval a FOLIO period (p, a jsonb
// {duration, intervalId} or NULL, an SQL expression) lasts; zero for none.
func periodInterval(p string) string {
	unit := func(id string) string {
		return `CASE (` + p + `) ->> 'intervalId' WHEN '` + id + `' THEN coalesce(((` + p + `) ->> 'duration')::int, 0) ELSE 0 END`
	}
	return `make_interval(mins => ` + unit("Minutes") + `, hours => ` + unit("Hours") + `, days => ` + unit("Days") +
		`, weeks => ` + unit("Weeks") + `, months => ` + unit("Months") + `)`
}

// lockRequester locks the row of doc's requester in tx
// (postgres.LockPatron), as the first statement of a write of a request
// sent through circulation (storage.RequestRulesFrom: judged when it is
// placed anew), after the write's id: the writes that can newly block the
// requester lock the same row first, so a request is judged with such a
// write that committed before it, or comes wholly before it, never
// judged from a snapshot taken before that write committed.
func lockRequester(ctx context.Context, tx pgx.Tx, t storage.Tenant, doc json.RawMessage) error {
	if !storage.RequestRulesFrom(ctx) {
		return nil
	}
	return postgres.LockPatron(ctx, tx, t, record.FieldValue(doc, "requesterId"))
}

// judge judges request id, just written in tx with its queue locked
// (judgeRequest), by FOLIO's rules (a *errs.Refusal naming every rule it
// breaks, the transaction then rolled back), and makes the writes its
// type calls for.
func judge(ctx context.Context, tx pgx.Tx, t storage.Tenant, id, requester, item string) error {
	rows, err := tx.Query(ctx, requestVerdictSQL, pgx.StrictNamedArgs{"tenant": string(t), "id": id})
	if err != nil {
		return postgres.Interpret(err, t)
	}
	v, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[requestVerdict])
	if err != nil {
		return postgres.Interpret(err, t)
	}
	if refused := v.refusals(id, requester, item); len(refused) > 0 {
		return &errs.Refusal{Errors: refused}
	}
	args := pgx.StrictNamedArgs{"tenant": string(t), "id": id, "metadata_user": record.MetadataUser(ctx)}
	switch v.Type {
	case schemas.RequestTypePage:
		_, err = tx.Exec(ctx, pageItemSQL, args)
	case schemas.RequestTypeRecall:
		_, err = tx.Exec(ctx, recallLoanSQL, args)
	}
	return postgres.Interpret(err, t)
}

// unpageSQL puts Paged item @item back on the shelf (Available) while no
// open page waits for it.
var unpageSQL = `
UPDATE ` + postgres.Table(postgres.TableItem) + ` SET jsonb = ` + record.WithMetadata(record.ItemWithStatus(schemas.ItemAvailable), "@metadata_user", true) + `
 WHERE tenant_id = @tenant AND id = @item::uuid AND status_name = '` + schemas.ItemPaged + `'
   AND NOT EXISTS (SELECT 1 FROM ` + postgres.Table(postgres.TableRequest) + ` r
                    WHERE r.tenant_id = @tenant AND r.item_id = @item::uuid AND ` + Open("r.status") + `
                      AND r.jsonb ->> 'requestType' = '` + schemas.RequestTypePage + `')`

// unpage is told (leftPage) that a page of itemID was cancelled, closed,
// moved or deleted in tx; the item, still Paged, goes back to the shelf
// when no other page waits for it (FOLIO's: a cancelled page's item is
// Available again).
func unpage(ctx context.Context, tx pgx.Tx, t storage.Tenant, itemID string) error {
	_, err := tx.Exec(ctx, unpageSQL, pgx.StrictNamedArgs{"tenant": string(t), "item": itemID, "metadata_user": record.MetadataUser(ctx)})
	return postgres.Interpret(err, t)
}
