package lending

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/circulation-storage/internal/dbtest"
	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/circulation-storage/internal/sample"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
)

// TestACheckOutMadeOfflineIsRefusedWhereADoorSawItsMachineOnLine: the
// write takes a check-out as made offline only for a time no door saw its
// machine on line. Its machine (the caller's account, at the location
// its door names) was on line 09:00–11:00 at entrance-1, 12:00–14:00 at
// entrance-2 and 15:00–17:00 without a location code: one dated 10:00
// from entrance-1 is refused OFFLINE_WHILE_ON_LINE and writes nothing;
// one dated within the grace of a span's edge, or inside another
// location's span, is recorded; a call naming no machine is judged by
// every span of the account's machines, one naming a machine that gave
// no location code by that machine's; another account's spans do not
// count; a live check-out is not judged.
func TestACheckOutMadeOfflineIsRefusedWhereADoorSawItsMachineOnLine(t *testing.T) {
	t.Parallel()
	f := dbtest.SetupLibrary(t, sample.LoadData)
	policy := testPolicy
	policy.OfflineGrace = time.Minute
	lib := newLibrary(f.DB, policy)
	kiosk, other := uuid.NewString(), uuid.NewString()
	day := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, span := range []struct {
		location string
		from, to int // hours of the day
	}{{"entrance-1", 9, 11}, {"entrance-2", 12, 14}, {"", 15, 17}} {
		f.Exec(t, postgres.WithTables(`INSERT INTO %s (tenant_id, id, account_id, location, on_from, on_to)
			VALUES (@tenant, @id, @account, @location, @from, @to)`, postgres.TableKioskPresence), pgx.StrictNamedArgs{
			"tenant": string(f.Tenant), "id": uuid.NewString(), "account": kiosk, "location": span.location,
			"from": day.Add(time.Duration(span.from) * time.Hour), "to": day.Add(time.Duration(span.to) * time.Hour)})
	}
	write := func(caller storage.Caller, patron, item string, at time.Time, offline bool) (string, error) {
		doc := map[string]any{"userId": sample.ID(patron), "itemId": sample.ID(item), "loanDate": schemas.FormatTime(at),
			"action": "checkedout", "status": map[string]any{"name": "Open"}}
		if offline {
			doc["offline"] = map[string]any{"transactionDate": schemas.FormatTime(at)}
		}
		raw, _ := json.Marshal(doc)
		id := uuid.NewString()
		_, err := lib.CreateCheckOutLoan(storage.WithCaller(context.Background(), caller), f.Tenant,
			storage.CheckOutWrite{LoanID: id, UserID: sample.ID(patron), Loan: raw, ItemVersion: 1, Offline: offline})
		return id, err
	}
	at := func(h, m, s int) time.Time {
		return day.Add(time.Duration(h)*time.Hour + time.Duration(m)*time.Minute + time.Duration(s)*time.Second)
	}
	for _, tc := range []struct {
		name    string
		caller  storage.Caller
		item    string
		at      time.Time
		offline bool
		onLine  bool
	}{
		{"inside its span", storage.Caller{User: kiosk, Kiosk: "entrance-1"}, "book-001", at(10, 0, 0), true, true},
		{"a second inside the grace after the span began", storage.Caller{User: kiosk, Kiosk: "entrance-1"}, "book-001", at(9, 0, 59), true, false},
		{"a second past the grace after it began", storage.Caller{User: kiosk, Kiosk: "entrance-1"}, "book-002", at(9, 1, 1), true, true},
		{"a second past the grace before it ended", storage.Caller{User: kiosk, Kiosk: "entrance-1"}, "book-002", at(10, 58, 59), true, true},
		{"a second inside the grace before it ended", storage.Caller{User: kiosk, Kiosk: "entrance-1"}, "book-002", at(10, 59, 1), true, false},
		{"inside another location's span", storage.Caller{User: kiosk, Kiosk: "entrance-1"}, "book-003", at(13, 0, 0), true, false},
		{"no location named, inside any of the account's spans", storage.Caller{User: kiosk}, "book-004", at(13, 0, 0), true, true},
		{"no location named, outside every span", storage.Caller{User: kiosk}, "book-004", at(11, 30, 0), true, false},
		{"no location named, inside the span of a machine that gave none", storage.Caller{User: kiosk}, "book-007", at(16, 0, 0), true, true},
		{"a machine that gave no location code, inside its span", storage.Caller{User: kiosk, KioskNamed: true}, "book-007", at(16, 0, 0), true, true},
		{"a machine that gave no location code, inside another's", storage.Caller{User: kiosk, KioskNamed: true}, "book-007", at(13, 0, 0), true, false},
		{"another account", storage.Caller{User: other, Kiosk: "entrance-1"}, "book-005", at(10, 0, 0), true, false},
		{"made live", storage.Caller{User: kiosk, Kiosk: "entrance-1"}, "book-006", at(10, 0, 0), false, false},
	} {
		before := f.Count(t, "loan", "true")
		id, err := write(tc.caller, "1004", tc.item, tc.at, tc.offline)
		e, _ := errs.As(err)
		refused := e != nil && e.Kind == errs.KindInvalid && e.Code == schemas.CodeOfflineWhileOnLine &&
			slices.Equal(e.Parameters, []errs.Parameter{{Key: "transactionDate", Value: schemas.FormatTime(tc.at)}})
		switch {
		case tc.onLine && !refused:
			t.Errorf("%s: %v, want refused %s", tc.name, err, schemas.CodeOfflineWhileOnLine)
		case tc.onLine && f.Count(t, "loan", "true") != before:
			t.Errorf("%s: the refused check-out wrote a loan", tc.name)
		case tc.onLine && f.Count(t, "item", "id = $1 AND version = 1", sample.ID(tc.item)) != 1:
			t.Errorf("%s: the refused check-out changed the item", tc.name)
		case !tc.onLine && err != nil:
			t.Errorf("%s: %v, want recorded", tc.name, err)
		case !tc.onLine && f.Count(t, "loan", "id = $1", id) != 1:
			t.Errorf("%s: no loan %s written", tc.name, id)
		}
	}
}
