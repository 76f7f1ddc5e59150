package relay

import (
	"encoding/json"
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
