// Package waiting is how an acquisition of a held check-out lock waits
// for it: the waiters' engine (Waiters: each patron's queue, woken by the
// release, the holder's expiry or a bounded poll) and the listener of the
// database's notifications that wakes them (Listener: every instance's
// lock releases, announced by the releasing transaction, and tenants'
// purges).
package waiting

import (
	"context"
	"strconv"
	"sync"
	"time"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
)

// WakeCause says what made a waiting acquisition try again.
type WakeCause string

// The causes of a wake-up.
const (
	// WokenByRelease: the holder released the lock, on this instance or
	// another (a notification from the releasing transaction).
	WokenByRelease WakeCause = "release"
	// WokenByExpiry: the holder's lock reached its expiry, which no
	// statement announces; a timer set to it fires.
	WokenByExpiry WakeCause = "expiry"
	// WokenByPoll: the safety net, a bounded interval, shorter while the
	// notifications are not being received.
	WokenByPoll WakeCause = "poll"
)

// WaitResult is how a wait ended, for metrics.
type WaitResult string

// The ways a wait ends.
const (
	WaitAcquired WaitResult = "acquired"
	WaitTimedOut WaitResult = "timed_out"
	WaitGone     WaitResult = "gone"
	WaitFailed   WaitResult = "failed"
	// WaitShutDown: the instance shut down (Close) while the request
	// waited.
	WaitShutDown WaitResult = "shut_down"
)

// WaitResults are the ways a wait ends, for metrics to name each from the
// start.
var WaitResults = []WaitResult{WaitAcquired, WaitTimedOut, WaitGone, WaitFailed, WaitShutDown}

// WaitObserver is told what waiting acquisitions do. Implementations must
// be safe for concurrent use.
type WaitObserver interface {
	// Waiters reports a change in the number of requests waiting here.
	Waiters(delta int)
	// Woken reports a wake-up that made a waiter try again.
	Woken(cause WakeCause)
	// WaitEnded reports the end of a wait and how long it took.
	WaitEnded(result WaitResult, waited time.Duration)
	// GrantedToGone reports a lock granted to a client that had gone, and
	// released at once.
	GrantedToGone()
	// WatchFailed reports a wait that could not be registered: its
	// releases may go unannounced, and it is served by polling.
	WatchFailed(err error)
}

// WaitConfig shapes the waiting.
type WaitConfig struct {
	// Poll is the safety-net interval while notifications arrive;
	// PollUnlistened the interval while they do not (the listener is down).
	Poll, PollUnlistened time.Duration
	// MaxWaiters bounds the requests waiting on this instance; beyond it a
	// request is answered at once, as without waitMs.
	MaxWaiters int
	// StatementTimeout bounds one acquisition or release statement run on
	// behalf of a waiter, whatever its client does meanwhile.
	StatementTimeout time.Duration
}

// Waiters lets acquisitions wait for a patron's lock: a request that finds
// the lock held is answered as soon as it gets it, or once its wait is over.
//
// It never polls for the common case. A release wakes the waiters for that
// patron (Notify, called on every storage instance from the releasing
// transaction's notification); a held lock's expiry wakes them by a timer set
// to it, since no statement runs when a row expires. Correctness never
// depends on a notification: the acquisition statement is the only judge of
// who holds the lock, and every waiter also retries at a bounded interval,
// shorter while notifications are not arriving.
//
// Waiters for one patron on one instance are served in arrival order: only
// the first in line tries the lock; the others wait for their turn. Across
// instances there is no order: each instance's first in line competes, and
// the acquisition statement lets exactly one of them win.
//
// Close ends every wait, for a shutdown.
type Waiters struct {
	locks storage.LockService
	obs   WaitObserver
	cfg   WaitConfig
	now   func() time.Time
	// closed is closed by Close.
	closed    chan struct{}
	closeOnce sync.Once

	mu        sync.Mutex
	queues    map[waitKey][]*waiter
	count     int
	listening bool
}

type waitKey struct {
	tenant storage.Tenant
	user   string
}

// waiter is one waiting request. wake carries at most one pending wake-up;
// an empty cause means "your turn: try", counted as no wake-up.
type waiter struct {
	wake chan WakeCause
}

// NewWaiters returns the waiting service over locks.
func NewWaiters(locks storage.LockService, obs WaitObserver, cfg WaitConfig) *Waiters {
	return &Waiters{locks: locks, obs: obs, cfg: cfg, now: time.Now, closed: make(chan struct{}), queues: map[waitKey][]*waiter{}}
}

// ShuttingDown is the answer to an acquisition whose wait Close ended: 503,
// waitedMs the time it waited. The client tries again, on another instance
// or on this one restarted; the lock it waited for is untouched.
func ShuttingDown(userID string, waited time.Duration) *errs.Error {
	e := errs.Errorf(errs.KindUnavailable, schemas.CodeShuttingDown,
		"circulation-storage is shutting down: the wait for the patron's lock ended without it; try again").
		With("userId", userID).With("waitedMs", strconv.FormatInt(waited.Milliseconds(), 10))
	e.RetryAfter = time.Second
	return e
}

// Close ends every wait, for a shutdown: each waiting acquisition answers
// at once with ShuttingDown and leaves its line, recording nothing (a
// waiter_gave_up event would cost a statement per waiter, against a
// database that may be the reason for the shutdown). From then on an
// acquisition that finds the lock held is answered at once, as without a
// wait. A grant already made is kept and answered. Close does not wait for
// the answers (the HTTP server's Shutdown does); calling it again does
// nothing.
func (w *Waiters) Close() { w.closeOnce.Do(func() { close(w.closed) }) }

// isClosed says whether Close was called.
func (w *Waiters) isClosed() bool {
	select {
	case <-w.closed:
		return true
	default:
		return false
	}
}

// Acquire takes the patron's lock as LockService.Acquire does, waiting up to
// wait for it while someone else holds it. A zero wait is exactly
// LockService.Acquire. A lock granted to a client that has gone is released
// at once. After a wait in vain the KindLocked error names how long was
// waited (parameter waitedMs); a wait ended by Close answers ShuttingDown.
//
// A wait that ends without the lock (timed out, or the client gone) is
// recorded in the lock history as EventWaiterGaveUp, naming the holder.
func (w *Waiters) Acquire(ctx context.Context, t storage.Tenant, userID, lockID string, ttl, wait time.Duration, holder storage.Holder) (storage.Lock, storage.AcquireOutcome, error) {
	if wait <= 0 {
		return w.locks.Acquire(ctx, t, userID, lockID, ttl, holder)
	}
	start := w.now()
	lock, outcome, err := w.attempt(ctx, t, userID, lockID, ttl, holder)
	if !errs.IsKind(err, errs.KindLocked) {
		return lock, outcome, err
	}
	key := waitKey{t, userID}
	me := &waiter{wake: make(chan WakeCause, 1)}
	if !w.join(key, me) {
		return lock, outcome, err // too many waiting here, or closed: answer at once
	}
	result := WaitFailed
	// heldErr is the last answer that the lock is held, for its expiry
	// and its holder; stale says that it names a holder since replaced (a
	// turn to wait behind a fresh grant, taken without an attempt).
	heldErr := err
	stale := false
	defer func() {
		w.leave(key, me, result == WaitAcquired)
		waited := w.now().Sub(start)
		w.obs.WaitEnded(result, waited)
		if result == WaitTimedOut || result == WaitGone {
			w.gaveUp(ctx, t, userID, holder, heldErr, waited)
		}
	}()
	// Have the patron's releases announced while this request waits, then
	// look once more (below): a release either sees the registration or came
	// before that look. If the registration fails, polling still serves.
	w.watch(ctx, t, userID, wait)

	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	expiry := newStoppedTimer()
	defer expiry.Stop()
	poll := newStoppedTimer()
	defer poll.Stop()
	// A release between the first attempt and joining the line went
	// unheard: the first in line looks once more, now that a release would
	// be heard, before it waits.
	turn := w.isFirst(key, me)
	tryNow := turn
	// The gauge counts a request once it waits for a wake-up.
	waiting := false
	defer func() {
		if waiting {
			w.obs.Waiters(-1)
		}
	}()
	// try makes one attempt and says whether the wait is over: granted
	// (err nil), the client gone, or a failure (err set); a held lock
	// keeps it going.
	try := func() (over bool) {
		lock, outcome, err = w.attempt(ctx, t, userID, lockID, ttl, holder)
		switch {
		case err == nil:
			result = WaitAcquired
			return true
		case errs.IsKind(err, errs.KindLocked):
			heldErr, stale = err, false
			return false
		case ctx.Err() != nil:
			result = WaitGone
		}
		lock, outcome = storage.Lock{}, 0
		return true
	}
	shutDown := func() (storage.Lock, storage.AcquireOutcome, error) {
		result = WaitShutDown
		return storage.Lock{}, 0, ShuttingDown(userID, w.now().Sub(start))
	}
	for {
		if w.isClosed() {
			return shutDown()
		}
		if tryNow && try() {
			return lock, outcome, err
		}
		tryNow = true
		if turn {
			// The expiry of a holder since replaced is no time to look
			// again; the new holder's release wakes, and the poll backs it.
			if e, _ := errs.As(heldErr); e != nil && e.RetryAfter > 0 && !stale {
				resetTimer(expiry, e.RetryAfter+time.Millisecond)
			}
			resetTimer(poll, w.pollInterval())
		}
		if !waiting {
			w.obs.Waiters(1)
			waiting = true
		}
		select {
		case cause := <-me.wake:
			turn = true
			switch cause {
			case turnToWait:
				// First now, behind a fresh grant: arm the timers
				// (above), then wait.
				tryNow, stale = false, true
			case "":
			default:
				w.obs.Woken(cause)
			}
		case <-expiry.C:
			w.obs.Woken(WokenByExpiry)
		case <-poll.C:
			w.obs.Woken(WokenByPoll)
		case <-deadline.C:
			// The answer would name the holder before the grant this
			// request queued behind: look once more, to name the holder
			// now (or take a lock released meanwhile).
			if stale && try() {
				return lock, outcome, err
			}
			result = WaitTimedOut
			e := storage.LockHeld(userID, time.Time{}, 0, storage.Holder{})
			if held, ok := errs.As(heldErr); ok {
				e.Parameters, e.RetryAfter = append([]errs.Parameter(nil), held.Parameters...), held.RetryAfter
			}
			e.With("waitedMs", strconv.FormatInt(w.now().Sub(start).Milliseconds(), 10))
			return storage.Lock{}, 0, e
		case <-ctx.Done():
			result = WaitGone
			return storage.Lock{}, 0, ctx.Err()
		case <-w.closed:
			return shutDown()
		}
	}
}

// attempt runs one acquisition on a context the client cannot cancel
// half-way, so its outcome is always known; a lock it grants to a client
// that has gone meanwhile is released at once instead of left to expire.
func (w *Waiters) attempt(ctx context.Context, t storage.Tenant, userID, lockID string, ttl time.Duration, holder storage.Holder) (storage.Lock, storage.AcquireOutcome, error) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.cfg.StatementTimeout)
	defer cancel()
	lock, outcome, err := w.locks.Acquire(sctx, t, userID, lockID, ttl, holder)
	if err == nil && ctx.Err() != nil {
		if rerr := w.locks.Release(sctx, t, lock.ID, storage.Caller{User: holder.AcquiredBy, Module: holder.AcquiredByModule}, false); rerr == nil || errs.IsKind(rerr, errs.KindNotFound) {
			w.obs.GrantedToGone()
		}
		return storage.Lock{}, 0, ctx.Err()
	}
	return lock, outcome, err
}

// gaveUp records a wait that ended without the lock, naming the holder the
// last refusal named. The answer does not depend on the record: the lock
// service counts a failure to write it (EventObserver.EventLost).
func (w *Waiters) gaveUp(ctx context.Context, t storage.Tenant, userID string, me storage.Holder, heldErr error, waited time.Duration) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.cfg.StatementTimeout)
	defer cancel()
	e := storage.LockEvent{Type: storage.EventWaiterGaveUp, UserID: userID, By: me, WaitedMs: int(waited.Milliseconds())}
	if held, ok := errs.As(heldErr); ok {
		e.Holder = storage.HolderOf(held)
	}
	_ = w.locks.Record(sctx, t, e)
}

// watch registers the wait with the lock service, so that releases are
// announced, for the wait and a margin.
func (w *Waiters) watch(ctx context.Context, t storage.Tenant, userID string, wait time.Duration) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.cfg.StatementTimeout)
	defer cancel()
	if err := w.locks.Watch(sctx, t, userID, wait+time.Second); err != nil {
		w.obs.WatchFailed(err)
	}
}

// join queues me behind the patron's other waiters here; false when too
// many requests are waiting already, or after Close.
func (w *Waiters) join(key waitKey, me *waiter) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.count >= w.cfg.MaxWaiters || w.isClosed() {
		return false
	}
	w.queues[key] = append(w.queues[key], me)
	w.count++
	return true
}

// leave takes me out of the queue. If I was first in line, the next waiter
// becomes first. Leaving without the lock, I may have taken a wake-up
// meant for the line with me, so it tries at once. Leaving with the lock,
// it has nothing to try until my holder releases it, which wakes it: it
// only takes its turn to wait (turnToWait). A wake-up still pending for me
// is dropped: it announced the release that gave me the lock (a
// notification arriving after the same instance's own wake-up), and
// trying on it would only find the lock taken. Were it the release of my
// fresh lock itself, in the instant before I left, the next waiter's poll
// timer would catch it.
func (w *Waiters) leave(key waitKey, me *waiter, acquired bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.queues[key]
	for i, x := range q {
		if x != me {
			continue
		}
		q = append(q[:i:i], q[i+1:]...)
		if len(q) == 0 {
			delete(w.queues, key)
		} else {
			w.queues[key] = q
			if i == 0 {
				next := WakeCause("")
				if acquired {
					next = turnToWait
				}
				signal(q[0], next)
			}
		}
		w.count--
		return
	}
}

func (w *Waiters) isFirst(key waitKey, me *waiter) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.queues[key]
	return len(q) > 0 && q[0] == me
}

// Notify tells the waiters for a patron that its lock was released: the
// first in line tries at once. A notification for a patron no one waits for
// here costs a map lookup.
func (w *Waiters) Notify(t storage.Tenant, userID string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if q := w.queues[waitKey{t, userID}]; len(q) > 0 {
		signal(q[0], WokenByRelease)
	}
}

// Listening says whether release notifications are being received. When
// they start again after a gap, every first in line tries at once, since a
// release may have gone unheard.
func (w *Waiters) Listening(up bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	was := w.listening
	w.listening = up
	if up && !was {
		for _, q := range w.queues {
			signal(q[0], WokenByPoll)
		}
	}
}

func (w *Waiters) pollInterval() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.listening {
		return w.cfg.Poll
	}
	return w.cfg.PollUnlistened
}

// turnToWait is the wake-up of a waiter that has become first in line
// because the one before it took the lock: it arms its timers and waits
// for that holder's release, rather than try a lock it knows is taken.
const turnToWait WakeCause = "turn to wait"

// wakeRank orders wake-ups for signal: a turn to wait, then a bare "your
// turn" (try at once), then a wake-up with a cause.
func wakeRank(c WakeCause) int {
	switch c {
	case turnToWait:
		return 0
	case "":
		return 1
	}
	return 2
}

// signal hands x a wake-up. One pending already is kept, unless this one
// ranks higher (wakeRank) and replaces it: a cause is counted for what it
// was, and a turn to wait never hides a wake-up that asks to try. Callers
// hold w.mu.
func signal(x *waiter, cause WakeCause) {
	select {
	case x.wake <- cause:
		return
	default:
	}
	select {
	case old := <-x.wake:
		if wakeRank(old) >= wakeRank(cause) {
			cause = old
		}
	default:
	}
	select {
	case x.wake <- cause:
	default:
	}
}

func newStoppedTimer() *time.Timer {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}

// resetTimer sets t to fire after d, dropping any pending fire (Go 1.23
// timers discard a stale value on Reset).
func resetTimer(t *time.Timer, d time.Duration) { t.Reset(d) }
