package httpapi

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/checkoutlock/circulation"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
	"github.com/checkoutlock/serverkit"
)

// placeRequest is POST /circulation/requests (FOLIO's): 201 with the
// request as stored, judged by FOLIO's rules in storage's write.
func (s *Server) placeRequest(c echo.Context) error {
	body, _, err := s.Body(c)
	if err != nil {
		return err
	}
	body = withoutSummaries(body, requestSummaries)
	var h struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(body, &h)
	id := strings.ToLower(h.ID)
	if id == "" {
		id = uuid.NewString()
	}
	serverkit.Log(c, slog.String("request_id", id))
	stored, err := s.svc.Circulation.PlaceRequest(c.Request().Context(), id, body)
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderLocation, "/circulation/requests/"+id)
	return c.JSONBlob(http.StatusCreated, stored)
}

// requestID is the path's request id (pathID).
func (s *Server) requestID(c echo.Context) (string, error) { return s.pathID(c, "request") }

// getRequest is GET /circulation/requests/{id}: the request with FOLIO's
// summaries.
func (s *Server) getRequest(c echo.Context) error {
	id, err := s.requestID(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	doc, err := s.svc.Storage.Request(ctx, id)
	if err != nil {
		return err
	}
	out, err := s.summarizedOne(ctx, doc, s.summarizeRequests)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// listRequests is GET /circulation/requests (FOLIO's): storage's
// requests, by a CQL query as FOLIO's Requests app sends it (query, with
// its sortBy) and the filters itemId, requesterId and status, a page,
// each with FOLIO's summaries.
func (s *Server) listRequests(c echo.Context) error {
	q, err := queryParams(c, "query", "itemId", "requesterId", "status", "offset", "limit")
	if err != nil {
		return err
	}
	for _, name := range []string{"itemId", "requesterId"} {
		if v := q.Get(name); v != "" && !s.Schemas().ValidUUID(v) {
			return invalidParam(name, v, "must be a UUID")
		}
	}
	f := circulation.RequestFilter{ItemID: strings.ToLower(q.Get("itemId")), RequesterID: strings.ToLower(q.Get("requesterId")),
		Status: q.Get("status"), Query: q.Get("query")}
	if f.Offset, err = intParam(c, "offset", 0, 0, 1<<31-1); err != nil {
		return err
	}
	if f.Limit, err = intParam(c, "limit", schemas.DefaultPageSize, 0, schemas.MaxRecordsLimit); err != nil {
		return err
	}
	return s.answerRequests(c, f)
}

// answerRequests answers the page of requests f names, each with FOLIO's
// summaries (circulation-requests.json).
func (s *Server) answerRequests(c echo.Context, f circulation.RequestFilter) error {
	ctx := c.Request().Context()
	page, err := s.svc.Storage.Requests(ctx, f)
	if err != nil {
		return err
	}
	out, err := s.summarizedPage(ctx, page, "requests", s.summarizeRequests)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// replaceRequest is PUT /circulation/requests/{id} (FOLIO's): 204; a
// status "Closed - Cancelled" cancels the request. A body naming its
// "_version" replaces the request at that version; one naming none, as
// FOLIO's clients send it, is the change they make, applied to the
// request as stored (circulation.Service.ReplaceRequest).
func (s *Server) replaceRequest(c echo.Context) error {
	id, err := s.requestID(c)
	if err != nil {
		return err
	}
	body, _, err := s.Body(c)
	if err != nil {
		return err
	}
	// FOLIO's Requests app sends back the request it read, summaries and
	// all: they are not stored.
	body = withoutSummaries(body, requestSummaries)
	var h struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(body, &h)
	if h.ID != "" && !strings.EqualFold(h.ID, id) {
		return errs.Errorf(errs.KindInvalid, schemas.CodeValidation, "id: %s in the body does not match %s in the path", h.ID, id).
			With("id", h.ID)
	}
	serverkit.Log(c, slog.String("request_id", id))
	if err := s.svc.Circulation.ReplaceRequest(c.Request().Context(), id, body); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// moveRequest is POST /circulation/requests/{id}/move (FOLIO's): 200 with
// the request as stored, at the end of its new item's queue.
func (s *Server) moveRequest(c echo.Context) error {
	id, err := s.requestID(c)
	if err != nil {
		return err
	}
	var req struct {
		Destination string `json:"destinationItemId"`
		RequestType string `json:"requestType"`
	}
	if err := s.bind(c, &req); err != nil {
		return err
	}
	serverkit.Log(c, slog.String("request_id", id))
	stored, err := s.svc.Circulation.MoveRequest(c.Request().Context(), id, req.Destination, req.RequestType)
	if err != nil {
		return err
	}
	return c.JSONBlob(http.StatusOK, stored)
}

// queue is GET /circulation/requests/queue/item/{id} (FOLIO's): the
// item's open requests in their queue's order, each with FOLIO's
// summaries (circulation-requests.json); none for an item without any.
func (s *Server) queue(c echo.Context) error {
	id, err := s.pathID(c, "item")
	if err != nil {
		return err
	}
	return s.answerQueue(c, id)
}

// answerQueue answers item's queue as queue does.
func (s *Server) answerQueue(c echo.Context, item string) error {
	return s.answerRequests(c, circulation.RequestFilter{Query: circulation.QueueQuery(item), Limit: schemas.MaxRecordsLimit})
}

// reorderQueue is POST /circulation/requests/queue/item/{id}/reorder
// (FOLIO's): the item's open requests given the positions the body names
// (circulation.Service.ReorderQueue), answered with the queue as it is
// then.
func (s *Server) reorderQueue(c echo.Context) error {
	id, err := s.pathID(c, "item")
	if err != nil {
		return err
	}
	var req struct {
		ReorderedQueue []circulation.QueuePlace `json:"reorderedQueue"`
	}
	if err := s.bind(c, &req); err != nil {
		return err
	}
	serverkit.Log(c, slog.String("item_id", id), slog.Int("requests", len(req.ReorderedQueue)))
	if err := s.svc.Circulation.ReorderQueue(c.Request().Context(), id, req.ReorderedQueue); err != nil {
		return err
	}
	return s.answerQueue(c, id)
}
