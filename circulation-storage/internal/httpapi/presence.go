package httpapi

import (
	"net/http"

	"github.com/labstack/echo/v4"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
)

// seeOnLine is PUT /kiosk-presence-storage/spans/{id}: the calling
// machine (its account, and the location code circulation names,
// schemas.HeaderKiosk) is on line now, in span id.
func (s *Server) seeOnLine(c echo.Context) error {
	id, err := s.pathID(c, "span")
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	if err := s.svc.Presence.SeeOnLine(ctx, tenantOf(c), storage.CallerFrom(ctx), id); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// onLine is GET /kiosk-presence-storage/spans?from=&to=: the calling
// machine's spans overlapping from..to (kiosk-presence.json).
func (s *Server) onLine(c echo.Context) error {
	from, hasFrom, err := dateParam(c, "from")
	if err != nil {
		return err
	}
	to, hasTo, err := dateParam(c, "to")
	if err != nil {
		return err
	}
	if !hasFrom || !hasTo || to.Before(from) {
		return errs.Errorf(errs.KindBadRequest, schemas.CodeInvalidParameter, "from and to are required, from no later than to")
	}
	ctx := c.Request().Context()
	spans, err := s.svc.Presence.OnLine(ctx, tenantOf(c), storage.CallerFrom(ctx), from, to)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, struct {
		Spans []storage.PresenceSpan `json:"spans"`
	}{spans})
}
