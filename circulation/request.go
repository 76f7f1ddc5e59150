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
// by FOLIO's request rules in its own write (lending.JudgeRequest) and
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
	return s.storage.PlaceRequest(ctx, id, body)
}

// ReplaceRequest replaces request id with doc (request.json), as FOLIO's
// PUT /circulation/requests/{id}: a request's pickup point or dates
// changed, its position in its queue moved, or the request cancelled
// ("Closed - Cancelled", its place in the queue given up and an item on
// its hold shelf handed on). A closed request is not replaced.
func (s *Service) ReplaceRequest(ctx context.Context, id string, doc json.RawMessage) error {
	stored, err := s.storage.Request(ctx, id)
	if err != nil {
		return err
	}
	if err := openRequest(id, stored); err != nil {
		return err
	}
	return s.storage.ReplaceRequest(ctx, id, doc)
}

// MoveRequest moves open request id to the end of destination item's
// queue, as the type requestType when not "" (FOLIO's move): judged as a
// request placed there. It returns the request as stored.
func (s *Service) MoveRequest(ctx context.Context, id, destination, requestType string) (json.RawMessage, error) {
	stored, err := s.storage.Request(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := openRequest(id, stored); err != nil {
		return nil, err
	}
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
	body, _ := json.Marshal(fields)
	if err := s.storage.ReplaceRequest(ctx, id, body); err != nil {
		return nil, err
	}
	return s.storage.Request(ctx, id)
}

// openRequest refuses a write of request id (stored) that is closed.
func openRequest(id string, stored json.RawMessage) error {
	var r struct {
		Status string `json:"status"`
	}
	if err := json.Unmarshal(stored, &r); err != nil {
		return err
	}
	if !strings.HasPrefix(r.Status, "Open ") {
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
