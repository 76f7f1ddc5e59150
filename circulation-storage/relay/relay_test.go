package relay

import "testing"

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
