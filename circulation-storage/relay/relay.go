// Package relay delivers the outbox's events to a message broker: one
// relay among all storage instances (the database elects it) publishes
// each tenant's events in the order of their numbers, which is the order
// of their commits, each under its event id as the message id, so that the
// broker drops what a relay publishes again after a crash between
// publishing and marking; published events are trimmed after a retention.
// While the broker is down, check-outs go on and the events wait in the
// outbox.
package relay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Event is an outbox row: FOLIO's domain event of one change, with its
// number in the tenant's commit order.
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
// {id, type, tenant, timestamp, data}, data as the database wrote it.
func (e Event) Message() []byte {
	b := make([]byte, 0, len(e.Data)+len(e.ID)+len(e.Type)+len(e.Tenant)+64)
	b = append(b, `{"id":`...)
	b = appendString(b, e.ID)
	b = append(b, `,"type":`...)
	b = appendString(b, e.Type)
	b = append(b, `,"tenant":`...)
	b = appendString(b, e.Tenant)
	b = append(b, `,"timestamp":`...)
	b = strconv.AppendInt(b, e.At.UnixMilli(), 10)
	b = append(b, `,"data":`...)
	b = append(b, e.Data...)
	return append(b, '}')
}

// appendString appends s as a JSON string.
func appendString(b []byte, s string) []byte {
	q, _ := json.Marshal(s)
	return append(b, q...)
}

// Store is the outbox as the relay sees it.
type Store interface {
	// Lead tries to become the relay; leading is false while another
	// instance leads.
	Lead(ctx context.Context) (l Leader, leading bool, err error)
}

// Leader is the store while leading. Every tenant's events are numbered
// from 1 in commit order; a published mark is the last number published.
type Leader interface {
	// Marks are the tenants' published marks as stored.
	Marks(ctx context.Context) (map[string]int64, error)
	// Numbered are the tenants' last numbers given.
	Numbered(ctx context.Context) (map[string]int64, error)
	// Events are up to limit of the tenant's events numbered after
	// after, in number order.
	Events(ctx context.Context, tenant string, after int64, limit int) ([]Event, error)
	// Published stores the tenant's published mark.
	Published(ctx context.Context, tenant string, upTo int64) error
	// Oldest is when the tenant's first event numbered after after was
	// committed.
	Oldest(ctx context.Context, tenant string, after int64) (time.Time, error)
	// Trim deletes the tenant's events numbered up to upTo and committed
	// before before.
	Trim(ctx context.Context, tenant string, upTo int64, before time.Time) (int64, error)
	// Wait returns the tenants an instance announced events of, when one
	// does, after d, or when ctx ends.
	Wait(ctx context.Context, d time.Duration) ([]string, error)
	// Close gives up the lead.
	Close()
}

// Publisher is the broker.
type Publisher interface {
	// Publish sends a tenant's events in order and returns how many of
	// them, from the first, the broker has stored, and why not the rest.
	// No event is stored before an earlier one of those it is given.
	Publish(ctx context.Context, events []Event) (int, error)
}

// Observer is told what the relay does (metrics).
type Observer interface {
	Leading(bool)
	Backlog(n int64, oldest time.Duration)
	Published(n int)
	Retried()
	Failed()
}

// Config is the relay's.
type Config struct {
	// Batch is the most events of a tenant read and published at once.
	Batch int
	// Poll is the longest wait for new events without a notification.
	Poll time.Duration
	// Linger is the least time between two rounds of reading and
	// publishing, unless the relay is behind: a busy tenant's events go
	// out in batches, not one write's at a time.
	Linger time.Duration
	// Retention is how long published events stay in the outbox.
	Retention time.Duration
	// Retry is the longest pause after the broker failed.
	Retry time.Duration
	// ExitAfterPublish ends the process with status 3 after publishing a
	// batch and before marking it published: a fault for the tests that
	// prove the broker drops what is published again (OUTBOX_FAULT).
	ExitAfterPublish bool
}

// maxWoken bounds the tenants a relay remembers being woken for; past
// it, it looks at every tenant.
const maxWoken = 10000

// Relay publishes the outbox.
type Relay struct {
	store   Store
	pub     Publisher
	obs     Observer
	cfg     Config
	logger  *slog.Logger
	leading atomic.Bool

	mu sync.Mutex
	// woken are the tenants this instance wrote events of since the
	// relay last looked; all, when there were too many to name.
	woken map[string]struct{}
	all   bool
	// wake holds a wake-up for a relay waiting for events.
	wake chan struct{}
}

// New returns a relay.
func New(store Store, pub Publisher, obs Observer, cfg Config, logger *slog.Logger) *Relay {
	return &Relay{store: store, pub: pub, obs: obs, cfg: cfg, logger: logger,
		woken: map[string]struct{}{}, wake: make(chan struct{}, 1)}
}

// Leading reports whether this relay leads.
func (r *Relay) Leading() bool { return r.leading.Load() }

// Wake tells the relay that the tenant's events were committed: a leading
// relay waiting for events looks at once. It never blocks.
func (r *Relay) Wake(tenant string) {
	r.mu.Lock()
	if len(r.woken) < maxWoken {
		r.woken[tenant] = struct{}{}
	} else {
		r.all = true
	}
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// takeWoken returns the tenants woken for since the last call, and
// whether there were more than it names.
func (r *Relay) takeWoken() ([]string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	tenants := slices.Collect(maps.Keys(r.woken))
	all := r.all
	clear(r.woken)
	r.all = false
	return tenants, all
}

// Run relays until ctx is done: it tries to lead every Poll, and while
// leading publishes what is committed.
func (r *Relay) Run(ctx context.Context) {
	for ctx.Err() == nil {
		l, leading, err := r.store.Lead(ctx)
		if err != nil && ctx.Err() == nil {
			r.logger.Warn("outbox relay: cannot reach the database to lead", slog.Any("error", err))
		}
		if leading {
			r.logger.Info("outbox relay: leading")
			r.obs.Leading(true)
			r.leading.Store(true)
			err := r.lead(ctx, l)
			l.Close()
			r.leading.Store(false)
			r.obs.Leading(false)
			if ctx.Err() == nil {
				r.logger.Warn("outbox relay: lead lost", slog.Any("error", err))
			}
		}
		sleep(ctx, r.cfg.Poll)
	}
}

// lead publishes while the session holding the lead works. It keeps the
// published marks (it alone writes them); it looks at the tenants it is
// woken for, and at every tenant once a second, for events numbered
// after their marks.
func (r *Relay) lead(ctx context.Context, l Leader) error {
	marks, err := l.Marks(ctx)
	if err != nil {
		return fmt.Errorf("read the published marks: %w", err)
	}
	due := map[string]struct{}{}
	var lastLook, lastTrim, lastRound time.Time
	var pause time.Duration
	behind := false
	for {
		if time.Since(lastLook) >= time.Second {
			if err := r.look(ctx, l, marks, due); err != nil {
				return err
			}
			lastLook = time.Now()
		}
		if time.Since(lastTrim) >= time.Minute {
			if err := r.trim(ctx, l, marks); err != nil {
				return err
			}
			lastTrim = time.Now()
		}
		woken, all := r.takeWoken()
		for _, t := range woken {
			due[t] = struct{}{}
		}
		if all {
			lastLook = time.Time{}
			continue
		}
		if len(due) == 0 {
			announced, err := r.wait(ctx, l)
			if err != nil {
				return fmt.Errorf("wait: %w", err)
			}
			for _, t := range announced {
				if len(due) < maxWoken {
					due[t] = struct{}{}
				}
			}
			continue
		}
		// Events gather for Linger between two rounds, unless the last
		// one left some behind.
		if !behind {
			sleep(ctx, r.cfg.Linger-time.Since(lastRound))
		}
		lastRound, behind = time.Now(), false
		failed := false
		for _, t := range slices.Sorted(maps.Keys(due)) {
			events, err := l.Events(ctx, t, marks[t], r.cfg.Batch)
			if err != nil {
				return fmt.Errorf("read the events of %s: %w", t, err)
			}
			if len(events) < r.cfg.Batch {
				delete(due, t)
			} else {
				behind = true
			}
			n, err := r.publish(ctx, l, t, events)
			if n > 0 {
				marks[t] = events[n-1].Seq
				pause = 0
			}
			if err != nil {
				if errors.Is(err, errStore) {
					return err
				}
				// The broker refused or is away: the tenant's events wait,
				// in order, and are read again.
				due[t] = struct{}{}
				failed = true
				r.obs.Retried()
				pause = min(max(2*pause, 100*time.Millisecond), r.cfg.Retry)
				r.logger.Warn("outbox relay: the broker did not take an event; trying again", slog.Any("error", err),
					slog.Duration("pause", pause))
				break
			}
		}
		if failed {
			sleep(ctx, pause)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// look reads every tenant's last number: a tenant numbered past its mark
// is due, and the backlog (and its oldest event's age, over the first
// tenants behind) goes to the metrics. A tenant numbered below its mark
// was purged and enabled again: its mark starts over.
func (r *Relay) look(ctx context.Context, l Leader, marks map[string]int64, due map[string]struct{}) error {
	numbered, err := l.Numbered(ctx)
	if err != nil {
		return fmt.Errorf("read the numbers given: %w", err)
	}
	var backlog int64
	var behind []string
	for t, n := range numbered {
		if n < marks[t] {
			marks[t] = 0
		}
		if n > marks[t] {
			backlog += n - marks[t]
			behind = append(behind, t)
			if len(due) < maxWoken {
				due[t] = struct{}{}
			}
		}
	}
	for t := range marks {
		if _, ok := numbered[t]; !ok {
			delete(marks, t) // purged
		}
	}
	var age time.Duration
	slices.Sort(behind)
	for _, t := range behind[:min(len(behind), 100)] {
		at, err := l.Oldest(ctx, t, marks[t])
		if err != nil {
			return fmt.Errorf("read the oldest event of %s: %w", t, err)
		}
		if !at.IsZero() {
			age = max(age, time.Since(at))
		}
	}
	r.obs.Backlog(backlog, age)
	return nil
}

// trim deletes the events published and older than the retention.
func (r *Relay) trim(ctx context.Context, l Leader, marks map[string]int64) error {
	before := time.Now().Add(-r.cfg.Retention)
	var total int64
	for _, t := range slices.Sorted(maps.Keys(marks)) {
		n, err := l.Trim(ctx, t, marks[t], before)
		if err != nil {
			return fmt.Errorf("trim the events of %s: %w", t, err)
		}
		total += n
	}
	if total > 0 {
		r.logger.Info("outbox relay: trimmed published events", slog.Int64("events", total))
	}
	return nil
}

// wait waits for events: until an instance announces some, this one wakes
// the relay (Wake), or Poll passes.
func (r *Relay) wait(ctx context.Context, l Leader) ([]string, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-r.wake:
			cancel()
		case <-done:
		}
	}()
	tenants, err := l.Wait(wctx, r.cfg.Poll)
	if err != nil && ctx.Err() == nil {
		return nil, err
	}
	return tenants, ctx.Err()
}

// errStore marks a failure of the store, which ends the lead.
var errStore = errors.New("outbox store")

// publish sends a tenant's events in order and marks what the broker
// took; none goes before an earlier one. It returns how many were
// published.
func (r *Relay) publish(ctx context.Context, l Leader, tenant string, events []Event) (int, error) {
	if len(events) == 0 {
		return 0, nil
	}
	n, failed := r.pub.Publish(ctx, events)
	if failed != nil {
		r.obs.Failed()
	}
	if n == 0 {
		return 0, failed
	}
	if r.cfg.ExitAfterPublish {
		r.logger.Error("outbox relay: OUTBOX_FAULT=exit-after-publish: exiting before marking published", slog.Int64("seq", events[n-1].Seq))
		os.Exit(3)
	}
	if err := l.Published(ctx, tenant, events[n-1].Seq); err != nil {
		return n, fmt.Errorf("%w: mark published: %v", errStore, err)
	}
	r.obs.Published(n)
	return n, failed
}

func sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
