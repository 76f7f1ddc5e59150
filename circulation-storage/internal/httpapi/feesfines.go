package httpapi

import (
	"encoding/json"
	"log/slog"
	"net/http"

	"github.com/labstack/echo/v4"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/serverkit"
)

// feeFineAct is POST /fee-fine-storage/actions: an action on fees/fines
// (pay, waive, transfer, refund, cancel) judged and written as one
// write, with its own id when the caller names one; 201 with what it did
// (fee-fine-action-response.json). Sent again with the id of a write
// that landed, it answers that write's answer and moves no money.
func (s *Server) feeFineAct(c echo.Context) error {
	var w storage.FeeFineActionWrite
	if err := s.bind(c, &w); err != nil {
		return err
	}
	answer, err := s.svc.FeeFines.Act(c.Request().Context(), tenantOf(c), w)
	if err != nil {
		return err
	}
	serverkit.Log(c, slog.String("fee_fine_action", string(w.Action)), slog.Int("accounts", len(w.AccountIDs)))
	if s.cfg.EventsWritten != nil {
		s.cfg.EventsWritten()
	}
	return c.JSONBlob(http.StatusCreated, answer)
}

// feeFineActReplayed answers an action sent again whose write landed.
func feeFineActReplayed(c echo.Context, answer json.RawMessage) error {
	return c.JSONBlob(http.StatusCreated, answer)
}

// feeFineCheck is POST /fee-fine-storage/checks: whether the action would
// be allowed now, judged by the write's own rule; 200 with allowed and
// what would remain, or why not (fee-fine-check-response.json).
func (s *Server) feeFineCheck(c echo.Context) error {
	var q storage.FeeFineCheck
	if err := s.bind(c, &q); err != nil {
		return err
	}
	out, err := s.svc.FeeFines.Check(c.Request().Context(), tenantOf(c), q)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}
