package relay

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"
)

// announcerOf is an announcer for no relay in this process whose
// notifications are counted (and sent on notified) and whose question
// whether a relay leads is answered by leads, counted (and sent on
// asked), on a clock the test moves.
type announcerOf struct {
	*Announcer
	leads         atomic.Bool
	failing       atomic.Bool
	questions     atomic.Int32
	notifications atomic.Int32
	asked         chan struct{}
	notified      chan struct{}
	clock         atomic.Int64 // nanoseconds past start
}

func newAnnouncerOf() *announcerOf {
	f := &announcerOf{asked: make(chan struct{}, 16), notified: make(chan struct{}, 16)}
	f.Announcer = NewAnnouncer(nil, func(context.Context) error {
		f.notifications.Add(1)
		f.notified <- struct{}{}
		return nil
	}, func(context.Context) (bool, error) {
		f.questions.Add(1)
		// The answer is taken before the question is told: a test that
		// changes it once told gets it at the next question, not this one.
		failing, leads := f.failing.Load(), f.leads.Load()
		f.asked <- struct{}{}
		if failing {
			return false, errors.New("the database is away")
		}
		return leads, nil
	}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	start := time.Now()
	f.now = func() time.Time { return start.Add(time.Duration(f.clock.Load())) }
	return f
}

// TestAnAnnouncerAsksWhetherARelayLeadsOncePerLeadCheck: the answer
// stands for LeadCheck, whatever it was; a question that fails is taken
// for a relay leading (a notification too many costs little, one too few
// an event's Poll).
func TestAnAnnouncerAsksWhetherARelayLeadsOncePerLeadCheck(t *testing.T) {
	a := newAnnouncerOf()
	ctx := context.Background()
	steps := []struct {
		advance   time.Duration
		leads     bool
		failing   bool
		want      bool
		questions int32
	}{
		{0, false, false, false, 1},
		{LeadCheck - 1, true, false, false, 1}, // the answer stands
		{1, true, false, true, 2},              // LeadCheck passed: asked again
		{LeadCheck / 2, false, false, true, 2},
		{LeadCheck, false, true, true, 3}, // cannot tell: a relay leads
		{LeadCheck, false, false, false, 4},
	}
	for i, s := range steps {
		a.clock.Add(int64(s.advance))
		a.leads.Store(s.leads)
		a.failing.Store(s.failing)
		if got := a.someoneLeads(ctx); got != s.want || a.questions.Load() != s.questions {
			t.Fatalf("step %d: someoneLeads = %v after %d questions, want %v after %d", i, got, a.questions.Load(), s.want, s.questions)
		}
	}
}

// TestAnAnnouncerNotifiesOnlyWhileARelayLeads: events written while no
// relay leads anywhere are announced to nobody; once one leads (and the
// announcer has asked again), they are.
func TestAnAnnouncerNotifiesOnlyWhileARelayLeads(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := newAnnouncerOf()
	go a.Run(ctx)
	wait := func(ch chan struct{}, what string) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: not within 10 s", what)
		}
	}
	a.Written()
	wait(a.asked, "the write's question whether a relay leads")
	// The write's announcement is settled before the next write is taken:
	// the next one is announced, and is the first to be.
	a.clock.Add(int64(LeadCheck))
	a.leads.Store(true)
	a.Written()
	wait(a.asked, "the question once LeadCheck passed")
	wait(a.notified, "the notification once a relay leads")
	if n := a.notifications.Load(); n != 1 {
		t.Fatalf("%d notifications, want 1: the write while no relay led was announced", n)
	}
}

// TestAnAnnouncerWakesNothingWhileNoRelayLeads: once asked, and told that
// no relay leads, an announcer's writes wake nothing (not even its own
// goroutine) until LeadCheck has passed; while one leads, every write is
// passed on.
func TestAnAnnouncerWakesNothingWhileNoRelayLeads(t *testing.T) {
	a := newAnnouncerOf()
	ctx := context.Background()
	written := func(want int, when string) {
		t.Helper()
		a.Written()
		if got := len(a.pending); got != want {
			t.Fatalf("%s: %d announcements pending, want %d", when, got, want)
		}
		for len(a.pending) > 0 {
			<-a.pending
		}
	}
	written(1, "never asked")
	if a.someoneLeads(ctx) {
		t.Fatal("someoneLeads = true, want false")
	}
	<-a.asked
	written(0, "none leads, just asked")
	a.clock.Add(int64(LeadCheck - 1))
	written(0, "none leads, asked LeadCheck less a nanosecond ago")
	a.clock.Add(1)
	written(1, "LeadCheck since none led")
	a.leads.Store(true)
	if !a.someoneLeads(ctx) {
		t.Fatal("someoneLeads = false, want true")
	}
	<-a.asked
	written(1, "a relay leads")
}
