package login

import (
	"context"
	"sync"
	"time"
)

// maxTurns bounds the attempts waiting here for a turn on one key: past
// it, an attempt is refused busy at once, and waits hold no more than
// that many goroutines per key (and no more in all than the requests
// the server lets in).
const maxTurns = 64

// turnPoll is how often the first attempt waiting on a key looks at its
// count again without being woken: a place given up at another instance
// wakes no one here. Only the first looks: the others wait to be woken,
// so that a crowd waiting does not queue at the count's row before the
// attempts that would settle there.
const turnPoll = 200 * time.Millisecond

// turns are the attempts waiting at this instance for a turn on busy keys,
// first come first woken: an attempt that settles wakes the first waiting
// on its key, which tries its count again.
type turns struct {
	max     int
	mu      sync.Mutex
	waiting map[string][]chan struct{}
}

func newTurns(max int) *turns { return &turns{max: max, waiting: map[string][]chan struct{}{}} }

// join puts an attempt in key's line, at its front when it was woken
// before (its turn came and was taken elsewhere), and returns the channel
// it is woken on and whether it is first in the line; joined is false
// when the line is full.
func (t *turns) join(key string, front bool) (turn chan struct{}, first, joined bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	line := t.waiting[key]
	if len(line) >= t.max {
		return nil, false, false
	}
	turn = make(chan struct{}, 1)
	if front {
		line = append([]chan struct{}{turn}, line...)
	} else {
		line = append(line, turn)
	}
	t.waiting[key] = line
	return turn, line[0] == turn, true
}

// leave takes turn out of key's line; stillWaiting is false when it was
// woken meanwhile (and so is no longer in it).
func (t *turns) leave(key string, turn chan struct{}) (stillWaiting bool) {
	if turn == nil {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	line := t.waiting[key]
	for i, c := range line {
		if c == turn {
			line = append(line[:i:i], line[i+1:]...)
			if len(line) == 0 {
				delete(t.waiting, key)
			} else {
				t.waiting[key] = line
			}
			return true
		}
	}
	return false
}

// queued says whether attempts wait on key.
func (t *turns) queued(key string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.waiting[key]) > 0
}

// wake wakes the first attempt waiting on key, if any.
func (t *turns) wake(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	line := t.waiting[key]
	if len(line) == 0 {
		return
	}
	line[0] <- struct{}{}
	if len(line) == 1 {
		delete(t.waiting, key)
	} else {
		t.waiting[key] = line[1:]
	}
}

// await waits for turn to be woken, for at most d: woken says whether it
// was (rather than d passing), and err is ctx's when the caller went away
// first. Either way it is out of key's line when await returns.
func (t *turns) await(ctx context.Context, key string, turn chan struct{}, d time.Duration) (woken bool, err error) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-turn:
		return true, nil
	case <-timer.C:
		return !t.leave(key, turn), nil
	case <-ctx.Done():
		if !t.leave(key, turn) {
			// Woken as the caller went: the turn goes to the next.
			t.wake(key)
		}
		return false, ctx.Err()
	}
}
