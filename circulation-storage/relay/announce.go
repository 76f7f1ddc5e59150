package relay

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"
)

// LeadCheck is how often at most an Announcer asks the database whether a
// relay leads anywhere.
const LeadCheck = time.Second

// Announcer wakes the leading relay after this instance committed
// events: at once when it leads in this process, through the database
// when one leads elsewhere (one notification on its way at a time;
// commits made meanwhile are folded into the next), and not at all while
// none leads anywhere, which it asks the database at most once every
// LeadCheck (a notification nobody hears costs the database a commit of
// its own and a wake-up of every listening session). A relay that hears
// nothing still looks every Poll, and one that takes the lead looks at
// once: an instance that learns of a new leader only at its next check
// delays no event past the leader's next Poll. While the last answer was
// that none leads, a write wakes nothing in this process either: what
// it would ask has been answered.
type Announcer struct {
	local  *Relay
	notify func(context.Context) error
	led    func(context.Context) (bool, error)
	now    func() time.Time
	// checked is when led was last asked, leading what it answered.
	checked time.Time
	leading bool
	// quietUntil is, while the last answer was that no relay leads, when
	// it stops standing (a.now's Unix nanoseconds); 0 otherwise.
	quietUntil atomic.Int64
	pending    chan struct{}
	logger     *slog.Logger
}

// NewAnnouncer returns an announcer for the relay in this process (nil
// when none runs here) that wakes the others with notify, while led (nil:
// always) says a relay leads somewhere.
func NewAnnouncer(local *Relay, notify func(context.Context) error, led func(context.Context) (bool, error), logger *slog.Logger) *Announcer {
	return &Announcer{local: local, notify: notify, led: led, now: time.Now, pending: make(chan struct{}, 1), logger: logger}
}

// Written says that events were committed. It never blocks.
func (a *Announcer) Written() {
	if a.local != nil && a.local.Leading() {
		a.local.Wake()
		return
	}
	if a.now().UnixNano() < a.quietUntil.Load() {
		return // none leads, as asked less than LeadCheck ago
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
			if a.someoneLeads(nctx) {
				if err := a.notify(nctx); err != nil && ctx.Err() == nil {
					// The relay finds the events when it next looks.
					a.logger.Debug("outbox: cannot wake the relay", slog.Any("error", err))
				}
			}
			cancel()
		}
	}
}

// someoneLeads is whether a relay leads anywhere, as led said it at most
// LeadCheck ago; when it cannot say, one is taken to.
func (a *Announcer) someoneLeads(ctx context.Context) bool {
	if a.led == nil {
		return true
	}
	if now := a.now(); a.checked.IsZero() || now.Sub(a.checked) >= LeadCheck {
		leading, err := a.led(ctx)
		if err != nil {
			a.logger.Debug("outbox: cannot tell whether a relay leads", slog.Any("error", err))
			leading = true
		}
		a.checked, a.leading = now, leading
		quiet := int64(0)
		if !leading {
			quiet = now.Add(LeadCheck).UnixNano()
		}
		a.quietUntil.Store(quiet)
	}
	return a.leading
}
