package circulation

import (
	"context"
	"encoding/json"
	"maps"
	"strconv"
	"strings"

	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
)

// Requests through circulation (FOLIO's /circulation/requests): a
// librarian places, changes, cancels and moves them; storage judges each
// by FOLIO's request rules in its own write (its package requests, judge.go) and
// keeps the item's queue, its status and the recalled loan with it. This
// service sets what FOLIO's circulation sets and reads nothing to judge.

// PlaceRequest places the request doc (circulation-request.json): open,
// "Open - Not yet filled", at the end of its item's queue. It returns the
// request as stored.
func (s *Service) PlaceRequest(ctx context.Context, id string, doc json.RawMessage) (json.RawMessage, error) {
	fields, err := requestFields(doc)
	if err != nil {
		return nil, err
	}
	delete(fields, "position")
	fields["id"], _ = json.Marshal(id)
	fields["status"], _ = json.Marshal(schemas.RequestNotYetFilled)
	if _, ok := fields["requestLevel"]; !ok {
		fields["requestLevel"] = json.RawMessage(`"Item"`)
	}
	body, _ := json.Marshal(fields)
	ctx = identified(ctx)
	var stored json.RawMessage
	err = s.writeOnce(ctx, id, func(ctx context.Context) error {
		var err error
		stored, err = s.storage.PlaceRequest(ctx, id, body)
		return err
	})
	if l, ok, err := s.landed(ctx, schemas.WriteRequestCreate, err); ok {
		return l.Request, nil
	} else if err != nil {
		return nil, err
	}
	return stored, nil
}

// writeOnce is send, a write of request id, made with the call's write id
// on a context the request cannot cancel: one whose answer was lost is
// sent again with it (Service.once); one never answered is 503, its
// outcome not known.
func (s *Service) writeOnce(request context.Context, id string, send func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(request), WriteTimeout)
	defer cancel()
	err := s.once(request, ctx, send)
	if ambiguous(err) {
		return unanswered(ctx, err, "request", "requestId", id)
	}
	return err
}

// ReplaceRequest replaces request id with doc (request.json), as FOLIO's
// PUT /circulation/requests/{id}: a request's pickup point or dates
// changed, its position in its queue moved, or the request cancelled
// ("Closed - Cancelled", its place in the queue given up and an item on
// its hold shelf handed on). A closed request is not changed.
//
// A doc naming a "_version" is written whole at that version: when another
// write came first (a check-out that filled the request, a check-in that
// put its item on the hold shelf), storage refuses it 409
// VERSION_CONFLICT, nothing written, and the caller reads it again. A doc
// naming none is taken as FOLIO takes it, whose request storage keeps no
// version for its clients to name: it is the change FOLIO's clients make
// through this route (requestChange), applied to the request as stored
// now and written at the version read there; when another write came
// first, the change is applied again to the request as it is then, which
// is judged again (a request filled or cancelled meanwhile is closed, and
// not changed). So a doc read before storage's writes (a check-out
// filling the request, a check-in, its queue moving, a move) never undoes
// them; the members it changes are as it sends them, over another
// client's change of them meanwhile, as FOLIO writes them (a client that
// must not overwrite one names the _version it read).
func (s *Service) ReplaceRequest(ctx context.Context, id string, doc json.RawMessage) error {
	write := func(json.RawMessage) (json.RawMessage, error) { return doc, nil }
	if string(versionOf(doc)) == "null" {
		change, err := changeOf(doc)
		if err != nil {
			return err
		}
		write = change.onto
	}
	ctx = identified(ctx)
	err := s.writeRequest(ctx, id, write)
	_, ok, err := s.landed(ctx, schemas.WriteRequestUpdate, err)
	if ok {
		return nil
	}
	return err
}

// The members of a request a document without "_version" changes
// (requestChange): those FOLIO's clients change through PUT
// /circulation/requests/{id}, its Requests app's edit (the pickup point,
// the expiration dates, the fulfilment preference with its delivery
// address), or, when it cancels the request, FOLIO's cancellation's
// (request.json of FOLIO's mod-circulation). The document's other members
// are the request as its client read it, kept as stored: its item and
// type (a request is moved by its move), requester, date and comments,
// which FOLIO's clients do not change, and its status and position, which
// storage's writes move (a check-out filling the request, a check-in
// putting its item on the hold shelf, the queue moving up around it): a
// copy read before one of those would undo it. A place in the queue is
// changed with the "_version" read, against the queue as read.
var (
	changedMembers      = []string{"pickupServicePointId", "requestExpirationDate", "holdShelfExpirationDate", "fulfillmentPreference", "deliveryAddressTypeId"}
	cancellationMembers = []string{"status", "cancellationReasonId", "cancelledByUserId", "cancelledDate", "cancellationAdditionalInformation"}
)

// requestChange is what a request document without "_version" changes:
// its members changedMembers names, or, when it cancels the request,
// those cancellationMembers names; each as sent, a member left out
// keeping its stored value.
type requestChange struct {
	members map[string]json.RawMessage
}

// changeOf is the change doc, a request document without "_version",
// makes. Its status is the request's as read (an open status: the stored
// one stays, since only storage's writes move a request between them),
// or "Closed - Cancelled": another closed status is refused, as FOLIO's
// clients close a request through this route only by cancelling it.
func changeOf(doc json.RawMessage) (requestChange, error) {
	fields, err := requestFields(doc)
	if err != nil {
		return requestChange{}, err
	}
	var status string
	_ = json.Unmarshal(fields["status"], &status)
	taken := changedMembers
	switch {
	case status == schemas.RequestCancelled:
		taken = cancellationMembers
	case status != "" && !schemas.RequestIsOpen(status):
		return requestChange{}, refusal(errs.Errorf(errs.KindInvalid, schemas.CodeValidation,
			"status: a request is closed through this route only by cancelling it (%q); send its _version to write %q", schemas.RequestCancelled, status).
			With("status", status))
	}
	c := requestChange{members: map[string]json.RawMessage{}}
	for _, name := range taken {
		if v, ok := fields[name]; ok {
			c.members[name] = v
		}
	}
	return c, nil
}

// onto is the request stored with the change made, written at the stored
// "_version" (its metadata storage's).
func (c requestChange) onto(stored json.RawMessage) (json.RawMessage, error) {
	fields, err := requestFields(stored)
	if err != nil {
		return nil, err
	}
	delete(fields, "metadata")
	maps.Copy(fields, c.members)
	return json.Marshal(fields)
}

// MoveRequest moves open request id to the end of destination item's
// queue, as the type requestType when not "" (FOLIO's move): judged as a
// request placed there. It returns the request as stored.
func (s *Service) MoveRequest(ctx context.Context, id, destination, requestType string) (json.RawMessage, error) {
	ctx = identified(ctx)
	err := s.writeRequest(ctx, id, func(stored json.RawMessage) (json.RawMessage, error) {
		fields, err := requestFields(stored)
		if err != nil {
			return nil, err
		}
		delete(fields, "position")
		delete(fields, "metadata")
		fields["itemId"], _ = json.Marshal(strings.ToLower(destination))
		if requestType != "" {
			fields["requestType"], _ = json.Marshal(requestType)
		}
		return json.Marshal(fields)
	})
	if _, _, err := s.landed(ctx, schemas.WriteRequestUpdate, err); err != nil {
		return nil, err
	}
	return s.storage.Request(ctx, id)
}

// The operations a request's allowed service points are asked for
// (FOLIO's Request.Operation): a request to be created, replaced or
// moved.
const (
	OperationCreate  = "create"
	OperationReplace = "replace"
	OperationMove    = "move"
)

// AllowedServicePointsQuery is what FOLIO's allowed service points are
// asked of: an operation, and the requester and item of a request to be
// created, the request to be replaced, or the request to be moved and the
// item it is to move to (ids in lowercase).
type AllowedServicePointsQuery struct {
	Operation                      string
	RequesterID, ItemID, RequestID string
}

// AllowedServicePoints is FOLIO's allowed service points
// (schemas/allowed-service-points-response.json): for each request type
// the requester may place for the item, the pickup service points a
// request of it may name. Storage answers the very set it judges a
// request placed by (Storage.AllowedServicePoints); this service only
// says whose and which item's: a request created is asked of q's
// requester and item; one replaced of its own requester and item, all
// three types whatever the item's status (FOLIO's); one moved of its own
// requester and q's item. A request, a requester or an item that does
// not exist is refused 422 in FOLIO's words.
func (s *Service) AllowedServicePoints(ctx context.Context, q AllowedServicePointsQuery) (json.RawMessage, error) {
	requester, item := q.RequesterID, q.ItemID
	if q.Operation != OperationCreate {
		stored, err := s.storage.Request(ctx, q.RequestID)
		if errs.IsKind(err, errs.KindNotFound) {
			return nil, refusal(errs.Errorf(errs.KindInvalid, schemas.CodeValidation, "Request with ID %s was not found", q.RequestID).
				With("requestId", q.RequestID))
		}
		if err != nil {
			return nil, err
		}
		var r struct {
			RequesterID string `json:"requesterId"`
			ItemID      string `json:"itemId"`
		}
		if err := json.Unmarshal(stored, &r); err != nil {
			return nil, err
		}
		requester = strings.ToLower(r.RequesterID)
		if q.Operation == OperationReplace {
			item = strings.ToLower(r.ItemID)
		}
	}
	return s.storage.AllowedServicePoints(ctx, requester, item, q.Operation == OperationReplace)
}

// requestWrites bounds how often a write of a request is judged again
// because another write of it came first.
const requestWrites = 3

// writeRequest reads request id, refuses it closed, and replaces it with
// what write makes of it as read. A write made at the version read
// (MoveRequest's, and ReplaceRequest's of a change) and refused because
// another came first in between is judged again from the request as it
// is then, up to requestWrites times, in the call's one write id (storage
// keeps the id only with a write that landed); one at a version its
// caller read is the caller's to judge again.
func (s *Service) writeRequest(ctx context.Context, id string, write func(stored json.RawMessage) (json.RawMessage, error)) error {
	for attempt := 1; ; attempt++ {
		stored, err := s.storage.Request(ctx, id)
		if err != nil {
			return err
		}
		if err := openRequest(id, stored); err != nil {
			return err
		}
		body, err := write(stored)
		if err != nil {
			return err
		}
		err = s.writeOnce(ctx, id, func(ctx context.Context) error { return s.storage.ReplaceRequest(ctx, id, body) })
		if attempt == requestWrites || !errs.IsCode(err, schemas.CodeVersionConflict) || string(versionOf(body)) != string(versionOf(stored)) {
			return err
		}
	}
}

// versionOf is a record document's "_version" as sent (null when none).
func versionOf(doc json.RawMessage) json.RawMessage {
	var v struct {
		Version json.RawMessage `json:"_version"`
	}
	if json.Unmarshal(doc, &v) != nil || len(v.Version) == 0 {
		return json.RawMessage("null")
	}
	return v.Version
}

// openRequest refuses a write of request id (stored) that is closed.
func openRequest(id string, stored json.RawMessage) error {
	var r struct {
		Status string `json:"status"`
	}
	if err := json.Unmarshal(stored, &r); err != nil {
		return err
	}
	if !schemas.RequestIsOpen(r.Status) {
		return refusal(errs.Errorf(errs.KindInvalid, schemas.CodeValidation, "Request %s is closed (%s): a closed request is not changed", id, r.Status).
			With("status", r.Status))
	}
	return nil
}

// requestFields is a request document's fields, as sent.
func requestFields(doc json.RawMessage) (map[string]json.RawMessage, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(doc, &fields); err != nil {
		return nil, errs.Errorf(errs.KindInvalid, schemas.CodeValidation, "A request must be a JSON object")
	}
	return fields, nil
}

// QueueQuery is the CQL query of item's queue: its open requests, in
// their positions' order.
func QueueQuery(item string) string {
	statuses := make([]string, len(schemas.OpenRequestStatuses))
	for i, status := range schemas.OpenRequestStatuses {
		statuses[i] = strconv.Quote(status)
	}
	return "itemId==" + item + " and status==(" + strings.Join(statuses, " or ") + ") sortby position"
}

// ReorderQueue gives item's open requests the positions order names, as
// FOLIO's reorder of a request queue: storage judges it under the queue's
// lock, as mod-circulation's RequestQueueValidation (the positions 1 to
// n, exactly the queue's requests, a page and a request being fulfilled
// kept first), and writes it in one transaction, with the call's write
// id: one sent again with its Idempotency-Key, whose write landed, is
// done.
func (s *Service) ReorderQueue(ctx context.Context, item string, order []QueuePlace) error {
	ctx = identified(ctx)
	err := s.settled(ctx, func(ctx context.Context) error { return s.storage.ReorderQueue(ctx, item, order) })
	if ambiguous(err) {
		err = unanswered(ctx, err, "queue reorder", "itemId", item)
	}
	_, ok, err := s.landed(ctx, schemas.WriteQueueReorder, err)
	if ok {
		return nil
	}
	return err
}
