package locks

import (
	"context"
	"slices"
	"testing"

	"github.com/google/uuid"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/circulation-storage/cql"
	"github.com/checkoutlock/circulation-storage/internal/dbtest"
)

// TestHistoryAnswersCQL: the lock history answers a CQL query over its
// events as it answers them (type, patron, holder and who acted), counts
// every match, pages them, and sorts as asked.
func TestHistoryAnswersCQL(t *testing.T) {
	t.Parallel()
	f := dbtest.Setup(t)
	ctx := context.Background()
	service := NewLocks(f.DB)
	alice, bob, kiosk, olga := uuid.NewString(), uuid.NewString(), uuid.NewString(), uuid.NewString()
	record := func(e storage.LockEvent) {
		t.Helper()
		if err := service.Record(ctx, f.Tenant, e); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		record(storage.LockEvent{Type: storage.EventWaiterGaveUp, UserID: alice, WaitedMs: 100 * (i + 1),
			Holder: storage.Holder{AcquiredBy: kiosk, ItemBarcode: "book-1"}, By: storage.Holder{AcquiredBy: kiosk, Instance: "kiosk-3"}})
	}
	record(storage.LockEvent{Type: storage.EventReleasedByOther, UserID: bob, Holder: storage.Holder{AcquiredBy: kiosk}, By: storage.Holder{AcquiredBy: olga}})
	record(storage.LockEvent{Type: storage.EventExpired, UserID: bob, Holder: storage.Holder{AcquiredBy: kiosk, ItemBarcode: "book-2"}})

	for _, tc := range []struct {
		query  string
		offset int
		limit  int
		total  int
		want   []int // waitedMs of the events answered, in order
		types  []storage.EventType
	}{
		{query: `userId==` + alice, limit: 10, total: 5, want: []int{500, 400, 300, 200, 100}},
		{query: `userId==` + alice, offset: 1, limit: 2, total: 5, want: []int{400, 300}},
		{query: `userId==` + alice + ` sortBy waitedMs/sort.ascending`, limit: 2, total: 5, want: []int{100, 200}},
		{query: `type==released_by_other`, limit: 10, total: 1, types: []storage.EventType{storage.EventReleasedByOther}},
		{query: `by.acquiredBy==` + olga + ` or holder.itemBarcode==book-2`, limit: 10, total: 2,
			types: []storage.EventType{storage.EventExpired, storage.EventReleasedByOther}},
		{query: `holder.acquiredBy==` + kiosk + ` and type<>waiter_gave_up`, limit: 10, total: 2,
			types: []storage.EventType{storage.EventExpired, storage.EventReleasedByOther}},
		{query: `by.instance=="kiosk-3" and waitedMs>=400`, limit: 10, total: 2, want: []int{500, 400}},
		{query: `userId==` + uuid.NewString(), limit: 10, total: 0},
	} {
		q, err := cql.Parse(tc.query)
		if err != nil {
			t.Fatalf("%s: %v", tc.query, err)
		}
		events, total, err := service.History(ctx, f.Tenant, storage.HistoryFilter{Query: q, QueryText: tc.query, Offset: tc.offset, Limit: tc.limit})
		if err != nil {
			t.Fatalf("%s: %v", tc.query, err)
		}
		var waited []int
		var types []storage.EventType
		for _, e := range events {
			waited = append(waited, e.WaitedMs)
			types = append(types, e.Type)
		}
		if total != tc.total || tc.want != nil && !slices.Equal(waited, tc.want) || tc.types != nil && !slices.Equal(types, tc.types) ||
			tc.total == 0 && len(events) != 0 {
			t.Errorf("%s (offset %d, limit %d): %d events of %d, waited %v, types %v; want %d, waited %v, types %v",
				tc.query, tc.offset, tc.limit, len(events), total, waited, types, tc.total, tc.want, tc.types)
		}
	}
}
