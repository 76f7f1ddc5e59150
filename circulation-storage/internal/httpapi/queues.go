package httpapi

import (
	"encoding/json"
	"log/slog"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/checkoutlock/serverkit"

	storage "github.com/checkoutlock/circulation-storage"
)

// reorderQueue is POST /request-storage/queues/{id}/reorder: the open
// requests of item id given the positions the body names
// (reorder-queue-request.json), judged and written in one transaction
// under the queue's lock (storage.QueueReorderer); 204.
func (s *Server) reorderQueue(c echo.Context) error {
	id, err := s.pathID(c, "item")
	if err != nil {
		return err
	}
	var req struct {
		ReorderedQueue []storage.QueuePlace `json:"reorderedQueue"`
	}
	if err := s.bind(c, &req); err != nil {
		return err
	}
	if err := s.svc.Queues.ReorderQueue(c.Request().Context(), tenantOf(c), id, req.ReorderedQueue); err != nil {
		return err
	}
	serverkit.Log(c, slog.String("item_id", id), slog.Int("requests", len(req.ReorderedQueue)))
	return c.NoContent(http.StatusNoContent)
}

// reorderReplayed answers a reorder sent again whose write landed.
func reorderReplayed(c echo.Context, _ json.RawMessage) error {
	return c.NoContent(http.StatusNoContent)
}
