package relay

import (
	"context"
	"log/slog"
	"time"
)

// Announcer wakes the leading relay after this instance committed
// events: at once when it leads in this process, through the database
// when it runs elsewhere (one notification on its way at a time; commits
// made meanwhile are folded into the next). A relay that hears nothing
// still looks every Poll.
type Announcer struct {
	local   *Relay
	notify  func(context.Context) error
	pending chan struct{}
	logger  *slog.Logger
}

// NewAnnouncer returns an announcer for the relay in this process (nil
// when none runs here) that wakes the others with notify.
func NewAnnouncer(local *Relay, notify func(context.Context) error, logger *slog.Logger) *Announcer {
	return &Announcer{local: local, notify: notify, pending: make(chan struct{}, 1), logger: logger}
}

// Written says that events were committed. It never blocks.
func (a *Announcer) Written() {
	if a.local != nil && a.local.Leading() {
		a.local.Wake()
		return
	}
	select {
	case a.pending <- struct{}{}:
	default:
	}
}

// Run sends the notifications until ctx is done.
func (a *Announcer) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.pending:
			nctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			if err := a.notify(nctx); err != nil && ctx.Err() == nil {
				// The relay finds the events when it next looks.
				a.logger.Debug("outbox: cannot wake the relay", slog.Any("error", err))
			}
			cancel()
		}
	}
}
