// Package relay delivers the outbox's events to a message broker: one
// relay among all storage instances (the database elects it), publishing
// each tenant's events in commit order, each under its event id as the
// message id, so that the broker drops what a relay publishes again after
// a crash between publishing and marking; published events are trimmed
// after a retention. While the broker is down, check-outs go on and the
// events wait in the outbox.
package relay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"
)

// Event is an outbox row: FOLIO's domain event of one change, with the
// tenant's sequence number (commit order).
type Event struct {
	Tenant string
	Seq    int64
	ID     string
	// Kind is loan, item, request, check-out or check-in; Type FOLIO's
	// CREATED, UPDATED, DELETED, or CHECKED_OUT, CHECKED_IN.
	Kind, Type string
	At         time.Time
	// Data is {"old": …, "new": …}.
	Data json.RawMessage
}

// Message is the event as published (schemas/domain-event.json): FOLIO's
// {id, type, tenant, timestamp, data}.
func (e Event) Message() ([]byte, error) {
	return json.Marshal(struct {
		ID        string          `json:"id"`
		Type      string          `json:"type"`
		Tenant    string          `json:"tenant"`
		Timestamp int64           `json:"timestamp"`
		Data      json.RawMessage `json:"data"`
	}{e.ID, e.Type, e.Tenant, e.At.UnixMilli(), e.Data})
}

// Store is the outbox as the relay sees it.
type Store interface {
	// Lead tries to become the relay; leading is false while another
	// instance leads.
	Lead(ctx context.Context) (l Leader, leading bool, err error)
}

// Leader is the store while leading.
type Leader interface {
	// Pending are up to limit unpublished events, by tenant and seq.
	Pending(ctx context.Context, limit int) ([]Event, error)
	// Published marks the tenant's events up to seq as published.
	Published(ctx context.Context, tenant string, upTo int64) error
	// Backlog is how many events wait and when the oldest was recorded.
	Backlog(ctx context.Context) (int, time.Time, error)
	// Trim deletes the events published before before.
	Trim(ctx context.Context, before time.Time) (int64, error)
	// Wait returns when a commit announces events, or after d.
	Wait(ctx context.Context, d time.Duration) error
	// Close gives up the lead.
	Close()
}

// Publisher is the broker.
type Publisher interface {
	// Publish sends one event and returns once the broker has it stored.
	Publish(ctx context.Context, e Event) error
}

// Observer is told what the relay does (metrics).
type Observer interface {
	Leading(bool)
	Backlog(n int, oldest time.Duration)
	Published(n int)
	Retried()
	Failed()
}

// Config is the relay's.
type Config struct {
	// Batch is how many events are read at once.
	Batch int
	// Poll is the longest wait for new events without a notification.
	Poll time.Duration
	// Retention is how long published events stay in the outbox.
	Retention time.Duration
	// Retry is the longest pause after the broker failed.
	Retry time.Duration
	// ExitAfterPublish ends the process with status 3 after publishing a
	// batch and before marking it published: a fault for the tests that
	// prove the broker drops what is published again (OUTBOX_FAULT).
	ExitAfterPublish bool
}

// Relay publishes the outbox.
type Relay struct {
	store  Store
	pub    Publisher
	obs    Observer
	cfg    Config
	logger *slog.Logger
}

// New returns a relay.
func New(store Store, pub Publisher, obs Observer, cfg Config, logger *slog.Logger) *Relay {
	return &Relay{store: store, pub: pub, obs: obs, cfg: cfg, logger: logger}
}

// Run relays until ctx is done: it tries to lead every Poll, and while
// leading publishes what is pending.
func (r *Relay) Run(ctx context.Context) {
	for ctx.Err() == nil {
		l, leading, err := r.store.Lead(ctx)
		if err != nil && ctx.Err() == nil {
			r.logger.Warn("outbox relay: cannot reach the database to lead", slog.Any("error", err))
		}
		if leading {
			r.logger.Info("outbox relay: leading")
			r.obs.Leading(true)
			err := r.lead(ctx, l)
			l.Close()
			r.obs.Leading(false)
			if ctx.Err() == nil {
				r.logger.Warn("outbox relay: lead lost", slog.Any("error", err))
			}
		}
		sleep(ctx, r.cfg.Poll)
	}
}

// lead publishes while the session holding the lead works.
func (r *Relay) lead(ctx context.Context, l Leader) error {
	var pause time.Duration
	lastTrim := time.Time{}
	for {
		if time.Since(lastTrim) > time.Minute {
			if n, err := l.Trim(ctx, time.Now().Add(-r.cfg.Retention)); err != nil {
				return fmt.Errorf("trim: %w", err)
			} else if n > 0 {
				r.logger.Info("outbox relay: trimmed published events", slog.Int64("events", n))
			}
			lastTrim = time.Now()
		}
		n, oldest, err := l.Backlog(ctx)
		if err != nil {
			return fmt.Errorf("backlog: %w", err)
		}
		var age time.Duration
		if n > 0 {
			age = time.Since(oldest)
		}
		r.obs.Backlog(n, age)
		if n == 0 {
			if err := l.Wait(ctx, r.cfg.Poll); err != nil {
				return fmt.Errorf("wait: %w", err)
			}
			continue
		}
		events, err := l.Pending(ctx, r.cfg.Batch)
		if err != nil {
			return fmt.Errorf("read: %w", err)
		}
		published, failed := r.publish(ctx, l, events)
		if published > 0 {
			pause = 0
		}
		if failed != nil {
			if errors.Is(failed, errStore) {
				return failed
			}
			// The broker refused or is away: the events wait, in order.
			r.obs.Retried()
			pause = min(max(2*pause, 100*time.Millisecond), r.cfg.Retry)
			r.logger.Warn("outbox relay: the broker did not take an event; trying again", slog.Any("error", failed),
				slog.Duration("pause", pause))
			sleep(ctx, pause)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// errStore marks a failure of the store, which ends the lead.
var errStore = errors.New("outbox store")

// publish sends events, tenant by tenant in seq order, and marks what the
// broker took; a tenant whose event is refused stops there, so none of
// its later events goes first.
func (r *Relay) publish(ctx context.Context, l Leader, events []Event) (int, error) {
	total := 0
	var failed error
	for i := 0; i < len(events); {
		j := i
		for j < len(events) && events[j].Tenant == events[i].Tenant {
			j++
		}
		group := events[i:j]
		i = j
		var upTo int64 = -1
		for _, e := range group {
			if err := r.pub.Publish(ctx, e); err != nil {
				r.obs.Failed()
				failed = err
				break
			}
			upTo = e.Seq
			total++
		}
		if upTo < 0 {
			continue
		}
		if r.cfg.ExitAfterPublish {
			r.logger.Error("outbox relay: OUTBOX_FAULT=exit-after-publish: exiting before marking published", slog.Int64("seq", upTo))
			os.Exit(3)
		}
		if err := l.Published(ctx, group[0].Tenant, upTo); err != nil {
			return total, fmt.Errorf("%w: mark published: %v", errStore, err)
		}
	}
	r.obs.Published(total)
	return total, failed
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
