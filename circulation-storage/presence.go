package storage

import (
	"context"
	"time"
)

// Presence keeps the times a SIP2 door saw each self-check machine on
// line (schemas.MaxPresenceSpans): the machine is the caller's account
// and Caller.Kiosk, the location code it gave at login.
type Presence interface {
	// SeeOnLine records that the caller's machine is on line now, in the
	// span id: a new span begins now, one recorded before lasts until
	// now. It refuses (schemas.CodePresenceRefused) an id of another
	// machine's span and a new span beyond the account's bound.
	SeeOnLine(ctx context.Context, t Tenant, caller Caller, id string) error
	// OnLine is the spans of the caller's machine that overlap from..to,
	// the oldest first, at most schemas.MaxPresenceAnswered.
	OnLine(ctx context.Context, t Tenant, caller Caller, from, to time.Time) ([]PresenceSpan, error)
}

// PresenceSpan is a time a door saw a machine on line.
type PresenceSpan struct {
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
}
