package login

import (
	"testing"
	"time"
)

// TestDecide: an attempt counts until its key is full, the attempt that
// fills it locks it (for Lockout, or to the window's end), a full or
// locked key refuses with the time until it lets attempts in, and a
// window or a lock that has passed starts the count again.
func TestDecide(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { x := now.Add(d); return &x }
	pair := Limit{Key: "k", Max: 3, Window: 15 * time.Minute, Lockout: 15 * time.Minute}
	rate := Limit{Key: "k", Max: 3, Window: time.Minute}
	for _, tc := range []struct {
		name   string
		l      Limit
		c      Count
		want   Count
		refuse time.Duration
	}{
		{"a first attempt", pair, Count{FirstAt: now}, Count{Failures: 1, FirstAt: now}, 0},
		{"below the limit", pair, Count{Failures: 1, FirstAt: now.Add(-time.Minute)}, Count{Failures: 2, FirstAt: now.Add(-time.Minute)}, 0},
		{"the attempt that fills it locks it for the lockout", pair, Count{Failures: 2, FirstAt: now.Add(-time.Minute)},
			Count{Failures: 3, FirstAt: now.Add(-time.Minute), LockedUntil: at(15 * time.Minute)}, 0},
		{"a rate's fills it to the window's end", rate, Count{Failures: 2, FirstAt: now.Add(-20 * time.Second)},
			Count{Failures: 3, FirstAt: now.Add(-20 * time.Second), LockedUntil: at(40 * time.Second)}, 0},
		{"locked: refused until the lock ends", pair, Count{Failures: 3, FirstAt: now.Add(-time.Minute), LockedUntil: at(5 * time.Minute)},
			Count{Failures: 3, FirstAt: now.Add(-time.Minute), LockedUntil: at(5 * time.Minute)}, 5 * time.Minute},
		{"full without a lock: refused to the window's end", pair, Count{Failures: 3, FirstAt: now.Add(-time.Minute)},
			Count{Failures: 3, FirstAt: now.Add(-time.Minute)}, 14 * time.Minute},
		{"a lock that passed starts again", pair, Count{Failures: 3, FirstAt: now.Add(-20 * time.Minute), LockedUntil: at(-time.Second)},
			Count{Failures: 1, FirstAt: now}, 0},
		{"a window that passed starts again", pair, Count{Failures: 2, FirstAt: now.Add(-16 * time.Minute)}, Count{Failures: 1, FirstAt: now}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, wait := Decide(tc.l, tc.c, now)
			if wait != tc.refuse || got.Failures != tc.want.Failures || !got.FirstAt.Equal(tc.want.FirstAt) ||
				(got.LockedUntil == nil) != (tc.want.LockedUntil == nil) ||
				(got.LockedUntil != nil && !got.LockedUntil.Equal(*tc.want.LockedUntil)) {
				t.Errorf("Decide = %+v (locked until %v), wait %s; want %+v (locked until %v), wait %s",
					got, got.LockedUntil, wait, tc.want, tc.want.LockedUntil, tc.refuse)
			}
		})
	}
}
