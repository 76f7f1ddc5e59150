package login

import (
	"context"
	"testing"
	"time"
)

var (
	testNow  = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	testPair = Limit{Key: "k", Max: 3, Window: 15 * time.Minute, Lockout: 15 * time.Minute}
	testRate = Limit{Key: "k", Max: 3, Window: time.Minute}
)

func at(d time.Duration) *time.Time { x := testNow.Add(d); return &x }

func sameCount(a, b Count) bool {
	return a.Failures == b.Failures && a.FirstAt.Equal(b.FirstAt) && a.Checking == b.Checking && a.CheckingAt.Equal(b.CheckingAt) &&
		(a.LockedUntil == nil) == (b.LockedUntil == nil) && (a.LockedUntil == nil || a.LockedUntil.Equal(*b.LockedUntil))
}

// TestAdmit: an attempt is let in while the key's wrong secrets and the
// attempts being checked leave room; a key they fill is busy for a
// moment, one its wrong secrets lock refuses until the lock ends; a
// lock, a window, or attempts admitted longer ago than a check can last
// that have passed hold no one back.
func TestAdmit(t *testing.T) {
	t.Parallel()
	minute, recent := testNow.Add(-time.Minute), testNow.Add(-time.Second)
	for _, tc := range []struct {
		name    string
		l       Limit
		c       Count
		want    Count
		verdict Verdict
		wait    time.Duration
	}{
		{"a first attempt", testPair, Count{FirstAt: testNow}, Count{FirstAt: testNow, Checking: 1, CheckingAt: testNow}, Admitted, 0},
		{"beside others being checked", testPair, Count{FirstAt: minute, Failures: 1, Checking: 1, CheckingAt: recent},
			Count{FirstAt: minute, Failures: 1, Checking: 2, CheckingAt: testNow}, Admitted, 0},
		{"busy while wrong ones and those being checked fill it", testPair, Count{FirstAt: minute, Failures: 1, Checking: 2, CheckingAt: recent},
			Count{FirstAt: minute, Failures: 1, Checking: 2, CheckingAt: recent}, Busy, BusyRetry},
		{"busy while those being checked fill it, none wrong", testPair, Count{FirstAt: minute, Checking: 3, CheckingAt: recent},
			Count{FirstAt: minute, Checking: 3, CheckingAt: recent}, Busy, BusyRetry},
		{"locked: refused until the lock ends", testPair, Count{Failures: 3, FirstAt: minute, LockedUntil: at(5 * time.Minute)},
			Count{Failures: 3, FirstAt: minute, LockedUntil: at(5 * time.Minute)}, Locked, 5 * time.Minute},
		{"full of wrong ones without a lock: refused to the window's end", testPair, Count{Failures: 3, FirstAt: minute},
			Count{Failures: 3, FirstAt: minute}, Locked, 14 * time.Minute},
		{"a lock that passed starts again", testPair, Count{Failures: 3, FirstAt: testNow.Add(-20 * time.Minute), LockedUntil: at(-time.Second)},
			Count{FirstAt: testNow, Checking: 1, CheckingAt: testNow}, Admitted, 0},
		{"a window that passed starts again", testPair, Count{Failures: 2, FirstAt: testNow.Add(-16 * time.Minute)},
			Count{FirstAt: testNow, Checking: 1, CheckingAt: testNow}, Admitted, 0},
		{"a rate's window passed", testRate, Count{Failures: 2, FirstAt: testNow.Add(-61 * time.Second)},
			Count{FirstAt: testNow, Checking: 1, CheckingAt: testNow}, Admitted, 0},
		{"attempts admitted longer ago than a check lasts hold no place", testPair,
			Count{FirstAt: minute, Failures: 1, Checking: 2, CheckingAt: testNow.Add(-2 * MaxCheck)},
			Count{FirstAt: minute, Failures: 1, Checking: 1, CheckingAt: testNow}, Admitted, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, verdict, wait := Admit(tc.l, tc.c, testNow)
			if verdict != tc.verdict || wait != tc.wait || !sameCount(got, tc.want) {
				t.Errorf("Admit = %+v (locked until %v), %v, wait %s; want %+v (locked until %v), %v, wait %s",
					got, got.LockedUntil, verdict, wait, tc.want, tc.want.LockedUntil, tc.verdict, tc.wait)
			}
		})
	}
}

// TestSettle: an attempt's turn ends; only a wrong secret is counted, and
// the one that reaches the limit locks the key (for Lockout, or to the
// window's end); a right one, or one never checked, leaves the count of
// wrong ones as it was.
func TestSettle(t *testing.T) {
	t.Parallel()
	minute, recent := testNow.Add(-time.Minute), testNow.Add(-time.Second)
	checking := func(n, failures int) Count {
		return Count{FirstAt: minute, Failures: failures, Checking: n, CheckingAt: recent}
	}
	for _, tc := range []struct {
		name string
		l    Limit
		c    Count
		o    Outcome
		want Count
	}{
		{"right", testPair, checking(2, 1), Right, checking(1, 1)},
		{"unchecked", testPair, checking(2, 1), Unchecked, checking(1, 1)},
		{"wrong", testPair, checking(2, 1), Wrong, checking(1, 2)},
		{"the wrong one that reaches the limit locks for the lockout", testPair, checking(1, 2), Wrong,
			Count{FirstAt: minute, Failures: 3, LockedUntil: at(15 * time.Minute), CheckingAt: recent}},
		{"a rate's locks to the window's end", testRate, Count{FirstAt: testNow.Add(-20 * time.Second), Failures: 2, Checking: 1, CheckingAt: recent}, Wrong,
			Count{FirstAt: testNow.Add(-20 * time.Second), Failures: 3, LockedUntil: at(40 * time.Second), CheckingAt: recent}},
		{"wrong after the window passed starts it again", testPair, Count{FirstAt: testNow.Add(-16 * time.Minute), Failures: 2, Checking: 1, CheckingAt: recent}, Wrong,
			Count{FirstAt: testNow, Failures: 1, CheckingAt: recent}},
		{"a place given up already (its holder counted stale) stays at none", testPair, checking(0, 1), Right, checking(0, 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Settle(tc.l, tc.c, tc.o, testNow); !sameCount(got, tc.want) {
				t.Errorf("Settle = %+v (locked until %v); want %+v (locked until %v)", got, got.LockedUntil, tc.want, tc.want.LockedUntil)
			}
		})
	}
}

// TestTurns: the first to wait is the first woken, and knows it is
// first; one woken before goes back to the front; a full line refuses; a
// turn that timed out is out of the line, and one woken as it timed out
// knows it was.
func TestTurns(t *testing.T) {
	t.Parallel()
	tr := newTurns(2)
	a, first, _ := tr.join("k", false)
	b, second, _ := tr.join("k", false)
	if !first || second {
		t.Fatalf("the first in line says first %v, the second %v", first, second)
	}
	if _, _, joined := tr.join("k", false); joined {
		t.Fatal("a full line let a third in")
	}
	tr.wake("k")
	if woken, err := tr.await(context.Background(), "k", a, time.Minute); !woken || err != nil {
		t.Fatalf("the first to wait: woken %v, %v", woken, err)
	}
	c, first, _ := tr.join("k", true)
	if !first {
		t.Error("one back at the front is not first")
	}
	tr.wake("k")
	select {
	case <-c:
	case <-b:
		t.Fatal("one woken before, back in line, was passed over")
	}
	if woken, _ := tr.await(context.Background(), "k", b, time.Millisecond); woken {
		t.Error("a wait that timed out says it was woken")
	}
	if len(tr.waiting) != 0 {
		t.Errorf("%d lines left, want none", len(tr.waiting))
	}
	d, _, _ := tr.join("k", false)
	tr.wake("k")
	if woken, _ := tr.await(context.Background(), "k", d, 0); !woken {
		t.Error("a turn woken before its wait timed out says it was not")
	}
}

// TestARightSecretIsRememberedAWrongOneAlwaysHashed: a secret that matched
// its hash matches again without argon2; any other secret, and the same
// secret against another hash, is hashed (seen here by a hash argon2
// cannot read: the remembered secret matches it, anything else fails on
// it).
func TestARightSecretIsRememberedAWrongOneAlwaysHashed(t *testing.T) {
	t.Parallel()
	s := New(nil, Config{Hashes: 1})
	ctx := context.Background()
	hash, err := s.hash(ctx, "correct horse")
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := s.matches(ctx, "correct horse", hash); !ok || err != nil {
		t.Fatalf("the right secret: %v, %v", ok, err)
	}
	if ok, err := s.matches(ctx, "correct horse ", hash); ok || err != nil {
		t.Fatalf("a wrong secret after the right one: %v, %v; want no match", ok, err)
	}
	unreadable := "$argon2id$v=19$m=19456,t=2,p=1$not base64!$"
	s.recent.remember(unreadable, "correct horse")
	if ok, err := s.matches(ctx, "correct horse", unreadable); !ok || err != nil {
		t.Errorf("the remembered secret: %v, %v; want a match without argon2", ok, err)
	}
	for _, secret := range []string{"correct horsE", "", "correct horse\x00"} {
		if ok, err := s.matches(ctx, secret, unreadable); ok || err == nil {
			t.Errorf("%q against the remembered hash: %v, %v; want it hashed (and failing on the unreadable hash)", secret, ok, err)
		}
	}
	if ok, err := s.matches(ctx, "correct horse", "$argon2id$v=19$m=19456,t=2,p=1$also not base64!$"); ok || err == nil {
		t.Errorf("the remembered secret against another hash: %v, %v; want it hashed", ok, err)
	}
}
