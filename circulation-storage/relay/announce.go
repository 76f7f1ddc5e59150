package relay

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"
)

// Announcer wakes the leading relay after this instance committed a
// tenant's events: at once when it leads in this process, through the
// database when it runs elsewhere (one notification statement on its way
// at a time, naming the tenants written meanwhile). A relay that hears
// nothing still looks at every tenant every second or so.
type Announcer struct {
	local  *Relay
	notify func(ctx context.Context, tenants []string) error
	logger *slog.Logger

	mu      sync.Mutex
	tenants map[string]struct{}
	ready   chan struct{}
}

// NewAnnouncer returns an announcer for the relay in this process (nil
// when none runs here) that wakes the others with notify.
func NewAnnouncer(local *Relay, notify func(ctx context.Context, tenants []string) error, logger *slog.Logger) *Announcer {
	return &Announcer{local: local, notify: notify, logger: logger, tenants: map[string]struct{}{}, ready: make(chan struct{}, 1)}
}

// Written says that the tenant's events were committed. It never blocks.
func (a *Announcer) Written(tenant string) {
	if a.local != nil && a.local.Leading() {
		a.local.Wake(tenant)
		return
	}
	a.mu.Lock()
	if len(a.tenants) < maxWoken {
		a.tenants[tenant] = struct{}{}
	}
	a.mu.Unlock()
	select {
	case a.ready <- struct{}{}:
	default:
	}
}

// Run sends the notifications until ctx is done.
func (a *Announcer) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.ready:
			a.mu.Lock()
			tenants := slices.Sorted(maps.Keys(a.tenants))
			clear(a.tenants)
			a.mu.Unlock()
			nctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			if err := a.notify(nctx, tenants); err != nil && ctx.Err() == nil {
				// The relay finds the events when it next looks.
				a.logger.Debug("outbox: cannot wake the relay", slog.Any("error", err))
			}
			cancel()
		}
	}
}
