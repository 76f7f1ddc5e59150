package circulation

import (
	"context"
	"encoding/json"
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
// its hold shelf handed on). A closed request is not replaced. doc is
// written at the version its caller read (its "_version"): when another
// write came first (a check-out that filled the request, a check-in that
// put its item on the hold shelf), or doc names none, storage refuses it
// 409 VERSION_CONFLICT, nothing written, and the caller reads it again.
func (s *Service) ReplaceRequest(ctx context.Context, id string, doc json.RawMessage) error {
	ctx = identified(ctx)
	err := s.writeRequest(ctx, id, func(json.RawMessage) (json.RawMessage, error) { return doc, nil })
	_, ok, err := s.landed(ctx, schemas.WriteRequestUpdate, err)
	if ok {
		return nil
	}
	return err
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
// (MoveRequest's) and refused because another came first in between is
// judged again from the request as it is then, up to requestWrites times;
// one at a version its caller read is the caller's to judge again.
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
