package httpapi

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/schemas"
)

// calendarPoint reads the service point of a calendar route's path.
func (s *Server) calendarPoint(c echo.Context) (string, error) {
	raw := c.Param("servicePointId")
	if !s.Schemas().ValidUUID(raw) {
		return "", invalidParam("servicePointId", raw, "must be a UUID")
	}
	return strings.ToLower(raw), nil
}

// The first and the last day a calendar route takes: PostgreSQL, which
// reads the calendars, knows no year 0, and a date has four digits of
// year.
var (
	firstDay = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)
	lastDay  = time.Date(schemas.MaxYear, 12, 31, 0, 0, 0, 0, time.UTC)
)

// queryDate reads a date query parameter (YYYY-MM-DD) the route
// requires, from first to last.
func queryDate(c echo.Context, name string, first, last time.Time) (time.Time, error) {
	raw, ok, err := queryParam(c, name)
	if err != nil {
		return time.Time{}, err
	}
	day, perr := time.Parse(time.DateOnly, raw)
	if !ok || perr != nil || day.Before(first) || day.After(last) {
		return time.Time{}, invalidParam(name, raw,
			fmt.Sprintf("must be a date (YYYY-MM-DD) from %s to %s", first.Format(time.DateOnly), last.Format(time.DateOnly)))
	}
	return day, nil
}

// calendarSurrounding is GET /calendar/dates/{servicePointId}/surrounding-openings:
// mod-calendar's openings on a date and on the nearest open days before
// and after it.
func (s *Server) calendarSurrounding(c echo.Context) error {
	sp, err := s.calendarPoint(c)
	if err != nil {
		return err
	}
	// The days before and after it are answered too, as dates: none
	// lies before the first day or after the last.
	day, err := queryDate(c, "date", firstDay.AddDate(0, 0, 1), lastDay.AddDate(0, 0, -1))
	if err != nil {
		return err
	}
	out, err := s.svc.Calendars.Surrounding(c.Request().Context(), tenantOf(c), sp, day)
	if err != nil {
		return err
	}
	return c.JSONBlob(http.StatusOK, out)
}

// calendarDays is GET /calendar/dates/{servicePointId}/all-openings:
// mod-calendar's openings day by day, a page of them (limit 10 unless
// asked), over at most storage.MaxCalendarDays days.
func (s *Server) calendarDays(c echo.Context) error {
	sp, err := s.calendarPoint(c)
	if err != nil {
		return err
	}
	from, err := queryDate(c, "startDate", firstDay, lastDay)
	if err != nil {
		return err
	}
	to, err := queryDate(c, "endDate", firstDay, lastDay)
	if err != nil {
		return err
	}
	if days := int(to.Sub(from).Hours() / 24); days < 0 || days >= storage.MaxCalendarDays {
		return invalidParam("endDate", to.Format(time.DateOnly),
			fmt.Sprintf("must be on or after startDate and fewer than %d days after it", storage.MaxCalendarDays))
	}
	raw, ok, err := queryParam(c, "includeClosed")
	if err != nil {
		return err
	}
	if !ok || (raw != "true" && raw != "false") {
		return invalidParam("includeClosed", raw, "must be true or false")
	}
	offset, err := queryInt(c, "offset", 0, 0, 1<<31-1)
	if err != nil {
		return err
	}
	limit, err := queryInt(c, "limit", 10, 0, storage.MaxCalendarDays)
	if err != nil {
		return err
	}
	out, err := s.svc.Calendars.Days(c.Request().Context(), tenantOf(c), sp, from, to, raw == "true", offset, limit)
	if err != nil {
		return err
	}
	return c.JSONBlob(http.StatusOK, out)
}
