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
	"slices"
	"strconv"
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
	// Old and New are the record's states before and after the change
	// (nil for none: old of CREATED, new of DELETED), FOLIO's data.
	Old, New json.RawMessage
}

// Message is the event as published (schemas/domain-event.json): FOLIO's
// {id, type, tenant, timestamp, data: {new, old}}, the states as the
// database wrote them.
func (e Event) Message() []byte {
	b := make([]byte, 0, len(e.Old)+len(e.New)+len(e.ID)+len(e.Type)+len(e.Tenant)+96)
	b = append(b, `{"id":`...)
	b = appendString(b, e.ID)
	b = append(b, `,"type":`...)
	b = appendString(b, e.Type)
	b = append(b, `,"tenant":`...)
	b = appendString(b, e.Tenant)
	b = append(b, `,"timestamp":`...)
	b = strconv.AppendInt(b, e.At.UnixMilli(), 10)
	b = append(b, `,"data":{"new":`...)
	b = appendState(b, e.New)
	b = append(b, `,"old":`...)
	b = appendState(b, e.Old)
	return append(b, "}}"...)
}

// appendState appends a record's state, null for none.
func appendState(b []byte, state json.RawMessage) []byte {
	if state == nil {
		return append(b, "null"...)
	}
	return append(b, state...)
}

// appendString appends s as a JSON string: quoted as it is when it holds
// nothing JSON would escape (ids, types and tenants do not), else as
// encoding/json writes it.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// ErrNotSetUp marks a store's error that says its tables do not exist yet
// (no tenant was initialised on the database): the relay tries again
// quietly, for a fresh install is not a fault.
var ErrNotSetUp = errors.New("outbox: no tenant initialised on this database yet")

// Store is the outbox as the relay sees it.
type Store interface {
	// Lead tries to become the relay; leading is false while another
	// instance leads. The lead lasts while the leader uses it: one
	// silent for Config.LeadTimeout loses it.
	Lead(ctx context.Context) (l Leader, leading bool, err error)
	// Behind is what the leader's Waiting and Oldest say together, read
	// by an instance that does not lead: the events not yet published
	// (as far as the marks stored say), and when the oldest of them
	// committed.
	Behind(ctx context.Context) (int64, time.Time, error)
}

// Leader is the store while leading. Every tenant's events are numbered
// from 1, by the relay, in commit order; the relay alone keeps the numbers
// given and the published marks.
type Leader interface {
	// Progress is each tenant's last number given and last published.
	Progress(ctx context.Context) (map[string]Progress, error)
	// Unnumbered stores the published marks given (as Published does),
	// then reads up to limit committed transactions whose events have no
	// numbers yet, in the order they committed (as far as one depended on
	// another).
	Unnumbered(ctx context.Context, limit int, published map[string]int64) ([]Commit, error)
	// Number gives the commits their first numbers and stores the
	// tenants' last numbers given, at once and durably; with read, it
	// returns the commits' events, numbered, each tenant's in number
	// order (what is still there of them: a purge deletes events).
	Number(ctx context.Context, commits []Commit, numbered map[string]int64, read bool) ([]Event, error)
	// Events are up to limit of the tenant's events numbered after
	// after, in number order.
	Events(ctx context.Context, tenant string, after int64, limit int) ([]Event, error)
	// Published stores the tenants' published marks.
	Published(ctx context.Context, marks map[string]int64) error
	// Oldest is when the tenant's first event numbered after after was
	// committed; zero when there is none.
	Oldest(ctx context.Context, tenant string, after int64) (time.Time, error)
	// Waiting are the events of unnumbered commits, and when the oldest
	// of those committed.
	Waiting(ctx context.Context) (int64, time.Time, error)
	// Trim deletes the tenant's events numbered up to upTo and committed
	// before before.
	Trim(ctx context.Context, tenant string, upTo int64, before time.Time) (int64, error)
	// Wait returns when an instance announces events, after d, or when
	// ctx ends.
	Wait(ctx context.Context, d time.Duration) error
	// Alive reports whether the lead is still held, and keeps it.
	Alive(ctx context.Context) error
	// Close gives up the lead.
	Close()
}

// Progress is how far a tenant's events are numbered and published.
type Progress struct {
	Numbered, Published int64
}

// Commit is a committed transaction's events of a tenant: Events of them,
// numbered from Seq once the relay numbered them.
type Commit struct {
	Pos    int64
	Tenant string
	Events int64
	Seq    int64
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
	// Batch is the most commits numbered, and events of a tenant read
	// and published, at once.
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
	// LeadTimeout is how long the leader may leave its lead unused
	// before the store ends it. The leader uses it at least every third
	// of it, and before it publishes after a third of it unused.
	LeadTimeout time.Duration
	// AfterPublish, when set, is called after a batch is published and
	// before it is marked: a fault for the tests that prove the broker
	// drops what is published again (OUTBOX_FAULT).
	AfterPublish func(seq int64)
}

// Relay publishes the outbox.
type Relay struct {
	store   Store
	pub     Publisher
	obs     Observer
	cfg     Config
	logger  *slog.Logger
	leading atomic.Bool
	// wake holds a wake-up for a relay waiting for events.
	wake chan struct{}
}

// New returns a relay.
func New(store Store, pub Publisher, obs Observer, cfg Config, logger *slog.Logger) *Relay {
	return &Relay{store: store, pub: pub, obs: obs, cfg: cfg, logger: logger, wake: make(chan struct{}, 1)}
}

// Leading reports whether this relay leads.
func (r *Relay) Leading() bool { return r.leading.Load() }

// Wake tells the relay that events were committed: a leading relay
// waiting for events looks at once. It never blocks.
func (r *Relay) Wake() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Run relays until ctx is done: it tries to lead every Poll, and while
// leading publishes what is committed.
func (r *Relay) Run(ctx context.Context) {
	if c, ok := r.store.(interface{ Close() }); ok {
		defer c.Close()
	}
	for ctx.Err() == nil {
		l, leading, err := r.store.Lead(ctx)
		if err != nil && ctx.Err() == nil {
			r.obs.Backlog(0, 0) // unknown here; see below
			r.logger.Warn("outbox relay: cannot reach the database to lead", slog.Any("error", err))
		}
		if !leading && err == nil {
			// Every instance says how far behind delivery is, from the
			// database: a leader that fell silent cannot be asked.
			if n, oldest, err := r.store.Behind(ctx); err == nil {
				r.obs.Backlog(n, ageOf(oldest))
			} else if ctx.Err() == nil {
				// Unknown is not "behind": the instances that can read
				// the database say it (the metrics take the max).
				r.obs.Backlog(0, 0)
				r.logger.Log(ctx, quietIfNotSetUp(err), "outbox relay: cannot read how far behind delivery is", slog.Any("error", err))
			}
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
				r.logger.Log(ctx, quietIfNotSetUp(err), "outbox relay: lead lost", slog.Any("error", err))
			}
		}
		// Within the lead timeout: the session kept for the next try
		// ends once idle that long.
		sleep(ctx, min(r.cfg.Poll, r.keepAlive()))
	}
}

// quietIfNotSetUp is the level of a relay's failure: debug for a database
// no tenant was initialised on yet (nothing to publish; a fresh install),
// a warning for anything else.
func quietIfNotSetUp(err error) slog.Level {
	if errors.Is(err, ErrNotSetUp) {
		return slog.LevelDebug
	}
	return slog.LevelWarn
}

// lead publishes while the session holding the lead works. Each round
// numbers the commits found since the last, then publishes every tenant's
// events numbered past its mark, then waits to be woken, unless it left
// events behind; rounds that find events are Linger apart at least, unless
// the last one left events behind. The published marks a round moves are
// stored with the next round's first read, in its round trip, or when the
// lead ends: a relay that dies before storing them publishes those events
// again, as one that dies between publishing and marking does, and the
// broker drops them.
func (r *Relay) lead(ctx context.Context, l Leader) (err error) {
	progress, err := l.Progress(ctx)
	if err != nil {
		return fmt.Errorf("read the numbers given and published: %w", err)
	}
	marks := map[string]int64{}
	defer func() {
		if len(marks) == 0 || (err != nil && !errors.Is(err, context.Canceled)) {
			return // the session failed: the next relay publishes them again
		}
		mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		if merr := l.Published(mctx, marks); merr != nil {
			r.logger.Warn("outbox relay: cannot store the published marks; their events will be published again", slog.Any("error", merr))
		}
	}()
	var lastCount, lastTrim, lastRound time.Time
	var pause time.Duration
	behind := false
	// used is when the lead was last used (each round's read uses it):
	// before publishing after a third of the lead timeout unused, the
	// leader makes sure it still leads (a leader that was frozen may have
	// lost it meanwhile).
	var used time.Time
	for {
		if time.Since(lastCount) >= time.Second {
			if err := r.count(ctx, l, progress); err != nil {
				return err
			}
			lastCount = time.Now()
		}
		if time.Since(lastTrim) >= time.Minute {
			if err := r.trim(ctx, l, progress); err != nil {
				return err
			}
			lastTrim = time.Now()
		}
		if !behind {
			sleep(ctx, r.cfg.Linger-time.Since(lastRound))
		}
		start := time.Now()
		behind = false

		commits, err := l.Unnumbered(ctx, r.cfg.Batch, marks)
		if err != nil {
			return fmt.Errorf("store the published marks and read the commits to number: %w", err)
		}
		used = time.Now()
		clear(marks)
		// fresh are the events just numbered of the tenants that were
		// published up to them: read with the numbering, published next
		// without reading again.
		fresh := map[string][]Event{}
		if len(commits) > 0 {
			behind = len(commits) == r.cfg.Batch
			numbered := map[string]int64{}
			events := int64(0)
			for i, c := range commits {
				n, ok := numbered[c.Tenant]
				if !ok {
					n = progress[c.Tenant].Numbered
				}
				commits[i].Seq = n + 1
				numbered[c.Tenant] = n + c.Events
				events += c.Events
			}
			read, err := l.Number(ctx, commits, numbered, events <= int64(r.cfg.Batch))
			if err != nil {
				return fmt.Errorf("number the events: %w", err)
			}
			for _, e := range read {
				fresh[e.Tenant] = append(fresh[e.Tenant], e)
			}
			for t, n := range numbered {
				p := progress[t]
				if p.Published != p.Numbered || !numberedFrom(fresh[t], p.Numbered+1, n) {
					delete(fresh, t) // behind, or some were purged: read in order
				}
				p.Numbered = n
				progress[t] = p
			}
		}

		var due []string
		for t, p := range progress {
			if p.Numbered > p.Published {
				due = append(due, t)
			}
		}
		slices.Sort(due)
		published, failed := 0, false
		for _, t := range due {
			p := progress[t]
			events, ok := fresh[t]
			if !ok {
				if events, err = l.Events(ctx, t, p.Published, r.cfg.Batch); err != nil {
					return fmt.Errorf("read the events of %s: %w", t, err)
				}
				used = time.Now()
			}
			if len(events) == 0 {
				// Numbered and gone: the tenant was purged.
				p.Published = p.Numbered
				marks[t] = p.Published
				progress[t] = p
				continue
			}
			if len(events) == r.cfg.Batch {
				behind = true
			}
			if time.Since(used) > r.keepAlive() {
				if err := l.Alive(ctx); err != nil {
					return fmt.Errorf("make sure of the lead before publishing: %w", err)
				}
				used = time.Now()
			}
			n, err, lost := r.publishLeading(ctx, l, events)
			if lost != nil {
				if n > 0 {
					p.Published = events[n-1].Seq
					marks[t] = p.Published
					progress[t] = p
				}
				return fmt.Errorf("the lead, while publishing: %w", lost)
			}
			if n > 0 {
				p.Published = events[n-1].Seq
				marks[t] = p.Published
				progress[t] = p
				published += n
				pause = 0
			}
			if err != nil {
				// The broker refused or is away: the tenant's events wait,
				// in order, and are read again.
				failed = true
				r.obs.Retried()
				pause = min(max(2*pause, 100*time.Millisecond), r.cfg.Retry)
				r.logger.Warn("outbox relay: the broker did not take an event; trying again", slog.Any("error", err),
					slog.Duration("pause", pause))
				break
			}
		}
		// Only a round that found something counts for the linger: the
		// first event after a quiet spell goes at once.
		if len(commits) > 0 || published > 0 {
			lastRound = start
		}
		switch {
		case failed:
			if err := r.pause(ctx, l, pause); err != nil {
				return fmt.Errorf("keep the lead while the broker is away: %w", err)
			}
		case !behind:
			// Everything found is published: the next round when an
			// instance says it committed events (what committed during
			// this round has said so since), or after a poll.
			if err := r.wait(ctx, l); err != nil {
				return fmt.Errorf("wait: %w", err)
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// pause waits d, using the lead at least every third of the lead timeout
// so that it is not lost meanwhile.
func (r *Relay) pause(ctx context.Context, l Leader, d time.Duration) error {
	end, step := time.Now().Add(d), r.keepAlive()
	for ctx.Err() == nil {
		left := time.Until(end)
		if left <= 0 {
			return nil
		}
		sleep(ctx, min(left, step))
		if err := l.Alive(ctx); err != nil {
			return err
		}
	}
	return nil
}

// keepAlive is the longest the leader leaves its lead unused: a third of
// the lead timeout (Poll when there is none).
func (r *Relay) keepAlive() time.Duration {
	if r.cfg.LeadTimeout <= 0 {
		return r.cfg.Poll
	}
	return r.cfg.LeadTimeout / 3
}

// ageOf is how long ago oldest was; 0 for none.
func ageOf(oldest time.Time) time.Duration {
	if oldest.IsZero() {
		return 0
	}
	return time.Since(oldest)
}

// numberedFrom reports whether events are numbered first to last, one
// after the other.
func numberedFrom(events []Event, first, last int64) bool {
	if int64(len(events)) != last-first+1 {
		return false
	}
	for i, e := range events {
		if e.Seq != first+int64(i) {
			return false
		}
	}
	return true
}

// count tells the metrics how many events wait, and how long the oldest
// has (over the first tenants behind).
func (r *Relay) count(ctx context.Context, l Leader, progress map[string]Progress) error {
	backlog, oldest, err := l.Waiting(ctx)
	if err != nil {
		return fmt.Errorf("count the events waiting: %w", err)
	}
	var behind []string
	for t, p := range progress {
		if p.Numbered > p.Published {
			backlog += p.Numbered - p.Published
			behind = append(behind, t)
		}
	}
	slices.Sort(behind)
	for _, t := range behind[:min(len(behind), 100)] {
		at, err := l.Oldest(ctx, t, progress[t].Published)
		if err != nil {
			return fmt.Errorf("read the oldest event of %s: %w", t, err)
		}
		if !at.IsZero() && (oldest.IsZero() || at.Before(oldest)) {
			oldest = at
		}
	}
	r.obs.Backlog(backlog, ageOf(oldest))
	return nil
}

// trim deletes the events published and older than the retention.
func (r *Relay) trim(ctx context.Context, l Leader, progress map[string]Progress) error {
	before := time.Now().Add(-r.cfg.Retention)
	var total int64
	for _, t := range slices.Sorted(maps.Keys(progress)) {
		n, err := l.Trim(ctx, t, progress[t].Published, before)
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
func (r *Relay) wait(ctx context.Context, l Leader) error {
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
	if err := l.Wait(wctx, min(r.cfg.Poll, r.keepAlive())); err != nil && ctx.Err() == nil {
		return err
	}
	return ctx.Err()
}

// publishLeading is publish while keeping the lead: the broker may take up
// to its acknowledgement wait, longer than the lead may stay unused, so the
// lead is used every keepAlive meanwhile (the broker's side does not touch
// the database). When the lead is lost, what is left of the batch is not
// sent (the publisher stops at its context's end), and lost says why.
func (r *Relay) publishLeading(ctx context.Context, l Leader, events []Event) (n int, err, lost error) {
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	kept := make(chan error, 1)
	go func() {
		tick := time.NewTicker(r.keepAlive())
		defer tick.Stop()
		for {
			select {
			case <-done:
				kept <- nil
				return
			case <-tick.C:
				if err := l.Alive(pctx); err != nil {
					cancel()
					kept <- err
					return
				}
			}
		}
	}()
	n, err = r.publish(pctx, events)
	close(done)
	return n, err, <-kept
}

// publish sends a tenant's events in order; none goes before an earlier
// one. It returns how many the broker took.
func (r *Relay) publish(ctx context.Context, events []Event) (int, error) {
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
	if r.cfg.AfterPublish != nil {
		r.cfg.AfterPublish(events[n-1].Seq)
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
