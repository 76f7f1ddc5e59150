package httpapi

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/checkoutlock/circulation"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
	"github.com/labstack/echo/v4"
)

// allowedServicePoints is GET /circulation/requests/allowed-service-points
// (FOLIO's AllowedServicePointsResource): 200 with, for each request type
// the requester may place for the item, the pickup service points a
// request of it may name. The query is one of FOLIO's combinations:
// operation=create with requesterId and itemId, operation=replace with
// requestId alone, operation=move with requestId and itemId. Anything
// else is 400 with FOLIO's words, every fault at once: each id that is no
// UUID ("Item ID is not a valid UUID: x."), then "Invalid combination of
// query parameters".
func (s *Server) allowedServicePoints(c echo.Context) error {
	q, err := queryParams(c, "operation", "requesterId", "itemId", "requestId")
	if err != nil {
		return err
	}
	var faults []string
	op := strings.ToLower(q.Get("operation"))
	if q.Has("operation") && op != circulation.OperationCreate && op != circulation.OperationReplace && op != circulation.OperationMove {
		faults = append(faults, fmt.Sprintf("Operation is not create, replace or move: %s.", truncate(q.Get("operation"))))
	}
	for _, p := range []struct{ name, words string }{{"requesterId", "Requester ID"}, {"itemId", "Item ID"}, {"requestId", "Request ID"}} {
		if q.Has(p.name) && !s.Schemas().ValidUUID(q.Get(p.name)) {
			faults = append(faults, fmt.Sprintf("%s is not a valid UUID: %s.", p.words, truncate(q.Get(p.name))))
		}
	}
	requester, item, request := q.Has("requesterId"), q.Has("itemId"), q.Has("requestId")
	switch {
	case op == circulation.OperationCreate && requester && item && !request:
	case op == circulation.OperationReplace && !requester && !item && request:
	case op == circulation.OperationMove && !requester && item && request:
	default:
		faults = append(faults, "Invalid combination of query parameters")
	}
	if len(faults) > 0 {
		return errs.Errorf(errs.KindBadRequest, schemas.CodeInvalidParameter, "%s", strings.Join(faults, " "))
	}
	doc, err := s.svc.Circulation.AllowedServicePoints(c.Request().Context(), circulation.AllowedServicePointsQuery{Operation: op,
		RequesterID: strings.ToLower(q.Get("requesterId")), ItemID: strings.ToLower(q.Get("itemId")), RequestID: strings.ToLower(q.Get("requestId"))})
	if err != nil {
		return err
	}
	return c.JSONBlob(http.StatusOK, doc)
}
