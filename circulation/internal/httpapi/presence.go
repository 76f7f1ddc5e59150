package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
)

// Presence keeps the times SIP2 doors saw self-check machines on line, in
// storage: each call's machine is its sign-in's account and the kiosk its
// door names (circulation.Okapi), which storage is told.
type Presence interface {
	SeeKioskOnLine(ctx context.Context, id string) error
	KioskOnLine(ctx context.Context, from, to time.Time) (json.RawMessage, error)
}

// seeKioskOnLine is PUT /circulation/kiosks/presence/{id}: a SIP2 door
// saw the calling machine on line now, in span id. 204.
func (s *Server) seeKioskOnLine(c echo.Context) error {
	id, err := s.pathID(c, "span")
	if err != nil {
		return err
	}
	if err := s.svc.Presence.SeeKioskOnLine(c.Request().Context(), id); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// kioskOnLine is GET /circulation/kiosks/presence?from=&to=: the calling
// machine's spans on line overlapping from..to (kiosk-presence.json).
func (s *Server) kioskOnLine(c echo.Context) error {
	var at [2]time.Time
	for i, name := range []string{"from", "to"} {
		v := c.QueryParam(name)
		t, err := schemas.ParseDateTime(v)
		if err != nil {
			return invalidParam(name, v, "must be a date and time such as 2026-11-27T10:14:00Z")
		}
		at[i] = t
	}
	if at[1].Before(at[0]) {
		return errs.Errorf(errs.KindBadRequest, schemas.CodeInvalidParameter, "from must be no later than to")
	}
	spans, err := s.svc.Presence.KioskOnLine(c.Request().Context(), at[0], at[1])
	if err != nil {
		return err
	}
	return c.JSONBlob(http.StatusOK, spans)
}
