package requests

import (
	"testing"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
)

// TestAReorderIsJudgedAsFOLIOJudgesIt: a queue's reorder is refused in
// mod-circulation's words and order (RequestQueueValidation): no queue is
// not found; positions not 1 to n (a gap, a zero, one twice, one past the
// end) are not sequential; a request left out, one not in the queue or
// one named twice is an inconsistency; a page, or a request being
// fulfilled, moved from first is refused; the rest is allowed, ids in any
// case.
func TestAReorderIsJudgedAsFOLIOJudgesIt(t *testing.T) {
	t.Parallel()
	const (
		a = "0a000000-0000-4000-8000-00000000000a"
		b = "0b000000-0000-4000-8000-00000000000b"
		c = "0c000000-0000-4000-8000-00000000000c"
	)
	holds := []queued{{a, schemas.RequestNotYetFilled, schemas.RequestTypeHold, 1}, {b, schemas.RequestNotYetFilled, schemas.RequestTypeHold, 2},
		{c, schemas.RequestNotYetFilled, schemas.RequestTypeRecall, 3}}
	paged := []queued{{a, schemas.RequestNotYetFilled, schemas.RequestTypePage, 1}, holds[1], holds[2]}
	shelved := []queued{{a, schemas.RequestAwaitingPickup, schemas.RequestTypeHold, 1}, holds[1], holds[2]}
	inTransit := []queued{{a, schemas.RequestInTransit, schemas.RequestTypeRecall, 1}, holds[1], holds[2]}
	order := func(pairs ...any) []storage.QueuePlace {
		var out []storage.QueuePlace
		for i := 0; i < len(pairs); i += 2 {
			out = append(out, storage.QueuePlace{ID: pairs[i].(string), NewPosition: pairs[i+1].(int)})
		}
		return out
	}
	const (
		sequential   = "Positions must have sequential order."
		inconsistent = "There is inconsistency between provided reordered queue and existing queue."
		page         = "Page requests can not be displaced from position 1."
		fulfilled    = "Requests can not be displaced from position 1 when fulfillment begun."
	)
	for _, tc := range []struct {
		name  string
		queue []queued
		order []storage.QueuePlace
		want  string
	}{
		{"reversed", holds, order(a, 3, b, 2, c, 1), ""},
		{"in upper case", holds, order("0A000000-0000-4000-8000-00000000000A", 2, b, 1, c, 3), ""},
		{"a gap", holds, order(a, 1, b, 2, c, 4), sequential},
		{"a zero", holds, order(a, 0, b, 1, c, 2), sequential},
		{"a position twice", holds, order(a, 1, b, 1, c, 2), sequential},
		{"one past the end", holds, order(a, 1, b, 2, c, 3, "0d000000-0000-4000-8000-00000000000d", 4), inconsistent},
		{"one left out", holds, order(a, 1, b, 2), inconsistent},
		{"one not in the queue", holds, order(a, 1, b, 2, "0d000000-0000-4000-8000-00000000000d", 3), inconsistent},
		{"one twice", holds, order(a, 1, a, 2, b, 3), inconsistent},
		{"one twice beside every other", holds, order(a, 1, b, 2, c, 3, a, 4), inconsistent},
		{"a page kept first", paged, order(a, 1, c, 2, b, 3), ""},
		{"a page moved", paged, order(b, 1, a, 2, c, 3), page},
		{"on the hold shelf, kept first", shelved, order(a, 1, c, 2, b, 3), ""},
		{"on the hold shelf, moved", shelved, order(a, 2, b, 1, c, 3), fulfilled},
		{"in transit, moved", inTransit, order(a, 3, b, 1, c, 2), fulfilled},
	} {
		err := reorderRefused("0e000000-0000-4000-8000-00000000000e", tc.queue, tc.order)
		var got string
		if r, ok := err.(*errs.Refusal); ok && len(r.Errors) == 1 && r.Errors[0].Code == schemas.CodeValidation {
			got = r.Errors[0].Message
		} else if err != nil {
			got = "not one refusal: " + err.Error()
		}
		if got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	if err := reorderRefused("0e000000-0000-4000-8000-00000000000e", nil, order(a, 1)); !errs.IsKind(err, errs.KindNotFound) {
		t.Errorf("no queue: %v, want not found", err)
	}
}
