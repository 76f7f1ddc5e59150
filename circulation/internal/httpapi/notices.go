package httpapi

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/checkoutlock/schemas"
)

// failedNotice is a patron notice every try of which failed (the dead
// letter), as the console shows it: whom it was for, what it was about,
// when it was due, its tries and the last failure.
type failedNotice struct {
	ID              string `json:"id"`
	Patron          string `json:"patron"`
	TriggeringEvent string `json:"triggeringEvent"`
	NextRunTime     string `json:"nextRunTime"`
	Attempts        int    `json:"attempts"`
	LastError       string `json:"lastError"`
	LoanID          string `json:"loanId,omitempty"`
	RequestID       string `json:"requestId,omitempty"`
}

// failedNotices is GET /circulation/notices/failed: the tenant's patron
// notices storage's sender gave up on (status Failed), the first
// consoleLimit of them by when they were due, each patron by name and
// barcode.
func (s *Server) failedNotices(c echo.Context) error {
	var page struct {
		ScheduledNotices []struct {
			failedNotice
			RecipientUserID string `json:"recipientUserId"`
		} `json:"scheduledNotices"`
		TotalRecords int `json:"totalRecords"`
	}
	ctx := c.Request().Context()
	if err := s.svc.Console.GetJSON(ctx, "/scheduled-notice-storage/scheduled-notices?status="+schemas.NoticeFailed+
		"&limit="+strconv.Itoa(consoleLimit), &page); err != nil {
		return err
	}
	patrons := s.patrons(ctx)
	out := struct {
		Notices      []failedNotice `json:"notices"`
		TotalRecords int            `json:"totalRecords"`
	}{Notices: []failedNotice{}, TotalRecords: page.TotalRecords}
	for _, n := range page.ScheduledNotices {
		f := n.failedNotice
		f.Patron = patronWords(patrons(n.RecipientUserID), n.RecipientUserID)
		out.Notices = append(out.Notices, f)
	}
	return c.JSON(http.StatusOK, out)
}
