package httpapi

import (
	"log/slog"
	"net/http"

	"github.com/checkoutlock/serverkit"
	"github.com/labstack/echo/v4"
)

// anonymizeLoans is POST /anonymize-storage-loans (FOLIO's): the closed
// loans among loanIds forget their borrower; 200 with what was done with
// each.
func (s *Server) anonymizeLoans(c echo.Context) error {
	var req struct {
		LoanIDs []string `json:"loanIds"`
	}
	if err := s.bind(c, &req); err != nil {
		return err
	}
	out, err := s.svc.Anonymizer.AnonymizeLoans(c.Request().Context(), tenantOf(c), req.LoanIDs)
	if err != nil {
		return err
	}
	serverkit.Log(c, slog.Int("anonymized", len(out.Anonymized)))
	return c.JSON(http.StatusOK, out)
}
