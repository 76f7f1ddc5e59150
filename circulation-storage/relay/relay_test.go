package relay

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"
)

func TestNumberedFrom(t *testing.T) {
	seqs := func(s ...int64) []Event {
		es := make([]Event, len(s))
		for i, n := range s {
			es[i].Seq = n
		}
		return es
	}
	for _, c := range []struct {
		events      []Event
		first, last int64
		want        bool
	}{
		{seqs(4, 5, 6), 4, 6, true},
		{seqs(4), 4, 4, true},
		{seqs(), 4, 6, false},
		{seqs(4, 6), 4, 6, false},
		{seqs(5, 6), 4, 6, false},
		{seqs(4, 6, 5), 4, 6, false},
		{seqs(4, 5, 6, 7), 4, 6, false},
	} {
		if got := numberedFrom(c.events, c.first, c.last); got != c.want {
			t.Errorf("numberedFrom(%v, %d, %d) = %v, want %v", c.events, c.first, c.last, got, c.want)
		}
	}
}

func TestMessageIsJSON(t *testing.T) {
	at := time.UnixMilli(1772460311485)
	for _, e := range []Event{
		{ID: "0b7e4f52-3f0a-4a8e-9d55-6c1f2b7a9e10", Type: "CREATED", Tenant: "diku", At: at, New: json.RawMessage(`{"id":"x"}`)},
		{ID: `a"b`, Type: `c\d`, Tenant: "t\n", At: at, Old: json.RawMessage(`{"a":1}`), New: json.RawMessage(`null`)},
		{ID: "\u00e9", Type: "\x7f", Tenant: "\x01", At: at},
	} {
		var got struct {
			ID, Type, Tenant string
			Timestamp        int64
			Data             struct{ New, Old json.RawMessage }
		}
		if err := json.Unmarshal(e.Message(), &got); err != nil {
			t.Fatalf("%s: %v", e.Message(), err)
		}
		state := func(s json.RawMessage) string {
			if s == nil {
				return "null"
			}
			return string(s)
		}
		if got.ID != e.ID || got.Type != e.Type || got.Tenant != e.Tenant || got.Timestamp != at.UnixMilli() ||
			string(got.Data.New) != state(e.New) || string(got.Data.Old) != state(e.Old) {
			t.Errorf("%s read back as %+v", e.Message(), got)
		}
	}
}

// TestARoundAfterAQuietSpellStartsWhenWoken: the linger spaces the rounds
// of a stream of events; the first event after the relay waited for one
// goes out as soon as the relay is woken, not a linger after its last
// look (here an hour: a relay that lingered would publish nothing). Having
// published it, the relay waits to be woken again, without a round that
// finds nothing: each round costs the database a flush and several
// statements.
func TestARoundAfterAQuietSpellStartsWhenWoken(t *testing.T) {
	t.Parallel()
	leader := &quietLeader{waiting: make(chan int, 1)}
	pub := &chanPublisher{got: make(chan Event, 10)}
	r := New(&oneLeader{l: leader}, pub, nopObserver{}, Config{Batch: 10, Poll: time.Hour, Linger: time.Hour}, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	select {
	case <-leader.waiting:
	case <-time.After(10 * time.Second):
		t.Fatal("the relay never waited for events")
	}
	leader.commit(Commit{Pos: 1, Tenant: "diku", Events: 1})
	r.Wake()
	select {
	case e := <-pub.got:
		if e.Tenant != "diku" || e.Seq != 1 {
			t.Errorf("published %+v, want diku's event 1", e)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("woken after a quiet spell, the relay did not publish the event committed")
	}
	select {
	case reads := <-leader.waiting:
		if reads != 2 {
			t.Errorf("the relay read the commits to number %d times before it waited again, want 2 (the first look, the round woken)", reads)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the relay never waited again")
	}
}

// oneLeader is a store whose every try to lead succeeds, with l.
type oneLeader struct{ l Leader }

func (s *oneLeader) Lead(context.Context) (Leader, bool, error) { return s.l, true, nil }
func (s *oneLeader) Behind(context.Context) (int64, time.Time, error) {
	return 0, time.Time{}, nil
}

// quietLeader hands out the commits given it (commit) and says when the
// relay waits for more.
type quietLeader struct {
	mu      sync.Mutex
	pending []Commit
	reads   int
	// waiting is sent the reads so far each time the relay waits.
	waiting chan int
}

func (l *quietLeader) commit(c Commit) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pending = append(l.pending, c)
}

func (l *quietLeader) Progress(context.Context) (map[string]Progress, error) {
	return map[string]Progress{}, nil
}

func (l *quietLeader) Unnumbered(context.Context, int, map[string]int64) ([]Commit, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.pending
	l.pending = nil
	l.reads++
	return c, nil
}

func (l *quietLeader) Number(_ context.Context, commits []Commit, _ map[string]int64, _ bool) ([]Event, error) {
	var events []Event
	for _, c := range commits {
		for k := range c.Events {
			events = append(events, Event{Tenant: c.Tenant, Seq: c.Seq + k, ID: fmt.Sprint(c.Pos, k)})
		}
	}
	return events, nil
}

func (l *quietLeader) Events(context.Context, string, int64, int) ([]Event, error) { return nil, nil }
func (l *quietLeader) Published(context.Context, map[string]int64) error           { return nil }
func (l *quietLeader) Oldest(context.Context, string, int64) (time.Time, error) {
	return time.Time{}, nil
}
func (l *quietLeader) Waiting(context.Context) (int64, time.Time, error) { return 0, time.Time{}, nil }
func (l *quietLeader) Trim(context.Context, string, int64, time.Time) (int64, error) {
	return 0, nil
}
func (l *quietLeader) Alive(context.Context) error { return nil }
func (l *quietLeader) Close()                      {}

// Wait says that the relay waits, and returns when it is woken (ctx
// ends) or after d.
func (l *quietLeader) Wait(ctx context.Context, d time.Duration) error {
	l.mu.Lock()
	reads := l.reads
	l.mu.Unlock()
	select {
	case l.waiting <- reads:
	default:
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
	return nil
}

// chanPublisher takes every event, and hands each to got.
type chanPublisher struct{ got chan Event }

func (p *chanPublisher) Publish(_ context.Context, events []Event) (int, error) {
	for _, e := range events {
		p.got <- e
	}
	return len(events), nil
}

type nopObserver struct{}

func (nopObserver) Leading(bool)                 {}
func (nopObserver) Backlog(int64, time.Duration) {}
func (nopObserver) Published(int)                {}
func (nopObserver) Retried()                     {}
func (nopObserver) Failed()                      {}
