package httpapi

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/checkoutlock/schemas"
)

// summaryLoanJSON is an open loan in schemas/circulation-patron-summary.json.
type summaryLoanJSON struct {
	ItemBarcode string `json:"itemBarcode"`
	Title       string `json:"title,omitempty"`
	DueDate     string `json:"dueDate,omitempty"`
}

// reasonJSON is a reason a patron may not borrow.
type reasonJSON struct {
	Code          string `json:"code"`
	Message       string `json:"message"`
	PatronMessage string `json:"patronMessage,omitempty"`
}

// patronSummary is GET /circulation/patron-summary?userBarcode=: what a
// self-check machine shows a patron.
func (s *Server) patronSummary(c echo.Context) error {
	barcode, err := requiredParam(c, "userBarcode")
	if err != nil {
		return err
	}
	sum, err := s.svc.Circulation.PatronSummary(c.Request().Context(), barcode)
	if err != nil {
		return err
	}
	type patronJSON struct {
		ID        string `json:"id"`
		Barcode   string `json:"barcode"`
		Active    bool   `json:"active"`
		FirstName string `json:"firstName,omitempty"`
		LastName  string `json:"lastName,omitempty"`
	}
	p := sum.Patron
	out := struct {
		Patron        patronJSON        `json:"patron"`
		CanBorrow     bool              `json:"canBorrow"`
		Reasons       []reasonJSON      `json:"reasons"`
		OpenLoanCount int               `json:"openLoanCount"`
		OverdueCount  int               `json:"overdueCount"`
		ItemLimit     int               `json:"itemLimit,omitempty"`
		OpenLoans     []summaryLoanJSON `json:"openLoans,omitempty"`
	}{Patron: patronJSON{ID: p.ID, Barcode: p.Barcode, Active: p.ActiveAt(time.Now()), FirstName: p.FirstName, LastName: p.LastName},
		CanBorrow: sum.CanBorrow, Reasons: []reasonJSON{}, OpenLoanCount: sum.OpenLoanCount, OverdueCount: sum.OverdueCount,
		ItemLimit: sum.ItemLimit}
	for _, r := range sum.Reasons {
		j := reasonJSON{Code: r.Code, Message: r.Message}
		for _, param := range r.Parameters {
			if param.Key == "patronMessage" {
				j.PatronMessage = param.Value
			}
		}
		out.Reasons = append(out.Reasons, j)
	}
	for _, l := range sum.OpenLoans {
		j := summaryLoanJSON{ItemBarcode: l.ItemBarcode, Title: l.Title}
		if !l.DueDate.IsZero() {
			j.DueDate = l.DueDate.UTC().Format(schemas.TimeFormat)
		}
		out.OpenLoans = append(out.OpenLoans, j)
	}
	return c.JSON(http.StatusOK, out)
}

// itemSummary is GET /circulation/item-summary?itemBarcode=: what a
// self-check machine shows of an item.
func (s *Server) itemSummary(c echo.Context) error {
	barcode, err := requiredParam(c, "itemBarcode")
	if err != nil {
		return err
	}
	sum, err := s.svc.Circulation.ItemSummary(c.Request().Context(), barcode)
	if err != nil {
		return err
	}
	out := struct {
		ID      string `json:"id"`
		Barcode string `json:"barcode"`
		Title   string `json:"title,omitempty"`
		Status  string `json:"status"`
		DueDate string `json:"dueDate,omitempty"`
	}{ID: sum.Item.ID, Barcode: sum.Item.Barcode, Title: sum.Item.Title, Status: sum.Item.Status}
	if !sum.DueDate.IsZero() {
		out.DueDate = sum.DueDate.UTC().Format(schemas.TimeFormat)
	}
	return c.JSON(http.StatusOK, out)
}

// requiredParam is the one query parameter a call takes, required.
func requiredParam(c echo.Context, name string) (string, error) {
	q, err := queryParams(c, name)
	if err != nil {
		return "", err
	}
	v := q.Get(name)
	if v == "" {
		return "", invalidParam(name, v, "is required")
	}
	return v, nil
}

// verifyPatronPin is POST /circulation/patron-pin/verify: 204 when the PIN
// matches; 422 PIN_INVALID, 429 PIN_LOCKED.
func (s *Server) verifyPatronPin(c echo.Context) error {
	var req struct {
		UserBarcode string `json:"userBarcode"`
		Pin         string `json:"pin"`
	}
	if err := s.bind(c, "circulation-patron-pin.json", &req); err != nil {
		return err
	}
	if err := s.svc.Circulation.VerifyPatronPin(c.Request().Context(), req.UserBarcode, req.Pin); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
