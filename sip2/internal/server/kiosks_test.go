package server

import (
	"fmt"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestTheKiosksDayIsBounded: however many sessions end, the door keeps
// the last EndedSessionsKept of them, the latest listed first, each
// tenant's alone for that tenant.
func TestTheKiosksDayIsBounded(t *testing.T) {
	t.Parallel()
	s := New(Options{}, nil, slog.New(slog.DiscardHandler), NewMetrics(prometheus.NewRegistry()))
	const sessions = EndedSessionsKept + 250
	for i := range sessions {
		c := &conn{s: s, admitted: true, peer: fmt.Sprintf("10.0.%d.%d", i/256, i%256), cfg: Listener{Tenant: []string{"a", "b"}[i%2]}}
		s.mu.Lock()
		s.conns[c] = struct{}{}
		s.perAddr[c.peer]++
		s.serving.Add(1)
		s.mu.Unlock()
		s.release(c)
	}
	all := s.Kiosks("")
	if len(all) != EndedSessionsKept {
		t.Fatalf("%d sessions kept of %d ended, want %d", len(all), sessions, EndedSessionsKept)
	}
	last := fmt.Sprintf("10.0.%d.%d", (sessions-1)/256, (sessions-1)%256)
	if all[0].Address != last || all[0].Ended == nil {
		t.Errorf("the first listed is %+v, want the last ended (%s)", all[0], last)
	}
	first := fmt.Sprintf("10.0.%d.%d", (sessions-EndedSessionsKept)/256, (sessions-EndedSessionsKept)%256)
	if all[len(all)-1].Address != first {
		t.Errorf("the last listed is %s, want %s: the oldest leave first", all[len(all)-1].Address, first)
	}
	for _, k := range s.Kiosks("a") {
		if k.Tenant != "a" {
			t.Fatalf("tenant a's day lists %+v", k)
		}
	}
	if n := len(s.Kiosks("b")); n != EndedSessionsKept/2 {
		t.Errorf("tenant b's day lists %d, want %d", n, EndedSessionsKept/2)
	}
}
