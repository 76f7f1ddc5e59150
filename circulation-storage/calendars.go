package storage

import (
	"context"
	"encoding/json"
	"time"
)

// CalendarDays reads a service point's openings from its calendars
// (mod-calendar's), as the loans' and hold shelves' writes read them.
type CalendarDays interface {
	// Surrounding is the service point's openings on day and on the
	// nearest open days before and after it
	// (calendar-surrounding-openings.json).
	Surrounding(ctx context.Context, t Tenant, servicePointID string, day time.Time) (json.RawMessage, error)
	// Days is its openings from one day to another, a page of them
	// (calendar-days.json): every day, or (includeClosed false) the days
	// it is open and its exceptional closures.
	Days(ctx context.Context, t Tenant, servicePointID string, from, to time.Time, includeClosed bool, offset, limit int) (json.RawMessage, error)
}

// MaxCalendarDays bounds the days one call of CalendarDays.Days looks at.
const MaxCalendarDays = 3660
