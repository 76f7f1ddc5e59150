package integration

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/checkoutlock/integration-tests/harness"
	"github.com/checkoutlock/schemas"
)

// hours is a calendar's normal hours: each weekday named open from start
// to end (HH:MM), once per pair.
func hours(days []string, pairs ...string) []map[string]string {
	var out []map[string]string
	for _, d := range days {
		for i := 0; i+1 < len(pairs); i += 2 {
			out = append(out, map[string]string{"startDay": d, "startTime": pairs[i], "endDay": d, "endTime": pairs[i+1]})
		}
	}
	return out
}

var (
	weekdays = []string{"MONDAY", "TUESDAY", "WEDNESDAY", "THURSDAY", "FRIDAY"}
	everyDay = []string{"MONDAY", "TUESDAY", "WEDNESDAY", "THURSDAY", "FRIDAY", "SATURDAY", "SUNDAY"}
)

// closure is a calendar's exception closing the service point from one
// date to another.
func closure(name string, from, to time.Time) map[string]any {
	return map[string]any{"name": name, "startDate": from.Format(time.DateOnly), "endDate": to.Format(time.DateOnly), "openings": []any{}}
}

// postCalendar creates a calendar at storage, assigned to the service
// points sps, and answers its id.
func postCalendar(t *testing.T, c *harness.Cluster, name string, from, to time.Time, sps []string, normal []map[string]string, exceptions ...map[string]any) string {
	t.Helper()
	if exceptions == nil {
		exceptions = []map[string]any{}
	}
	var out struct{ ID string }
	c.Do(c.Storage, "POST", "/calendar/calendars", map[string]any{"name": name, "startDate": from.Format(time.DateOnly),
		"endDate": to.Format(time.DateOnly), "assignments": sps, "normalHours": normal, "exceptions": exceptions}).
		Want(t, http.StatusCreated).Decode(t, &out)
	return out.ID
}

func day(s string) time.Time {
	d, err := time.Parse(time.DateOnly, s)
	if err != nil {
		panic(err)
	}
	return d
}

// TestDueDatesMoveOffClosedDaysAsFOLIOMovesThem: FOLIO's expectations of
// a due date on a day or an hour the checkout service point is closed
// (mod-circulation's CheckOutCalculateDueDateTests, RenewalAPITests and
// the closed library strategies' tests), replayed black-box over the
// real binaries with calendars kept at storage (mod-calendar's routes):
// each loan policy's closedLibraryDueDateManagementId moves the due date
// the check-out's and the renewal's writes store, and the answers say
// so; a service point without a calendar is open always; the end of a
// day is the tenant's time zone's. A hold shelf's expiration moves by
// its service point's holdShelfClosedLibraryDateManagement.
func TestDueDatesMoveOffClosedDaysAsFOLIOMovesThem(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, Storages: 1, FeatureOn: true})
	lib := c.SetupLibrary(20, 2, 0)
	sp := harness.ServicePoint
	// 2019: Monday to Friday 08:00-12:00 and 14:00-19:00 (FOLIO's
	// CalendarExamples' two periods), closed at weekends and on Monday
	// 11 February.
	postCalendar(t, c, "2019", day("2019-01-01"), day("2019-12-31"), []string{sp}, hours(weekdays, "08:00", "12:00", "14:00", "19:00"),
		closure("Staff day", day("2019-02-11"), day("2019-02-11")))
	// Around today: open all day every day but the day after tomorrow
	// and the day after that.
	today := time.Now().UTC().Truncate(24 * time.Hour)
	postCalendar(t, c, "Now", today.AddDate(0, 0, -10), today.AddDate(0, 0, 30), []string{sp}, hours(everyDay, "00:00", "23:59"),
		closure("Inventory", today.AddDate(0, 0, 2), today.AddDate(0, 0, 3)))
	patron := 0
	lend := func(strategy string, period map[string]any, offset map[string]any, loanDate string, more ...map[string]any) string {
		t.Helper()
		policy := map[string]any{"profileId": "Rolling", "period": period, "closedLibraryDueDateManagementId": strategy}
		if offset != nil {
			policy["openingTimeOffset"] = offset
		}
		changePolicy(t, c, lib, map[string]any{"loansPolicy": policy})
		body := map[string]any{"itemBarcode": lib.Items[patron][0], "userBarcode": lib.Patrons[patron], "servicePointId": sp}
		if loanDate != "" {
			body["loanDate"] = loanDate
		}
		for _, m := range more {
			maps.Copy(body, m)
		}
		patron++
		var loan struct{ ID, DueDate string }
		c.Do(c.Circulations[0], "POST", "/circulation/check-out-by-barcode", body).Want(t, http.StatusCreated).Decode(t, &loan)
		var stored string
		if err := c.DB.QueryRow(context.Background(), fmt.Sprintf(`SELECT jsonb ->> 'dueDate' FROM %s.loan WHERE id = $1::uuid`, c.Schema), loan.ID).
			Scan(&stored); err != nil {
			t.Fatal(err)
		}
		if stored != loan.DueDate {
			t.Errorf("%s: the answer says due %s, the loan stored %s", strategy, loan.DueDate, stored)
		}
		return loan.DueDate
	}
	week := map[string]any{"duration": 1, "intervalId": "Weeks"}
	hoursOf := func(n int) map[string]any { return map[string]any{"duration": n, "intervalId": "Hours"} }
	cases := []struct {
		name, strategy string
		period, offset map[string]any
		loanDate, want string
	}{
		// A week from Saturday 2 February is Saturday 9, closed.
		{"previous open day", "MOVE_TO_THE_END_OF_THE_PREVIOUS_OPEN_DAY", week, nil, "2019-02-02T10:00:00.000Z", "2019-02-08T23:59:59.000Z"},
		// Monday 11 is closed too: Tuesday.
		{"next open day", "MOVE_TO_THE_END_OF_THE_NEXT_OPEN_DAY", week, nil, "2019-02-02T10:00:00.000Z", "2019-02-12T23:59:59.000Z"},
		{"keep the date", "KEEP_THE_CURRENT_DUE_DATE", week, nil, "2019-02-02T10:00:00.000Z", "2019-02-09T23:59:59.000Z"},
		{"keep the date and time", "KEEP_THE_CURRENT_DUE_DATE_TIME", week, nil, "2019-02-02T10:00:00.000Z", "2019-02-09T10:00:00.000Z"},
		// Due on an open day: the end of it.
		{"open day", "MOVE_TO_THE_END_OF_THE_PREVIOUS_OPEN_DAY", week, nil, "2019-02-06T10:00:00.000Z", "2019-02-13T23:59:59.000Z"},
		// Three hours from Friday 18:00 is 21:00, closed: Monday's opening.
		{"next opening", "MOVE_TO_BEGINNING_OF_NEXT_OPEN_SERVICE_POINT_HOURS", hoursOf(3), nil, "2019-02-01T18:00:00.000Z", "2019-02-04T08:00:00.000Z"},
		{"next opening and an offset", "MOVE_TO_BEGINNING_OF_NEXT_OPEN_SERVICE_POINT_HOURS", hoursOf(3),
			map[string]any{"duration": 2, "intervalId": "Hours"}, "2019-02-01T18:00:00.000Z", "2019-02-04T10:00:00.000Z"},
		// Five hours after Monday's opening is 13:00, lunch: the end of
		// the morning.
		{"an offset past the opening", "MOVE_TO_BEGINNING_OF_NEXT_OPEN_SERVICE_POINT_HOURS", hoursOf(3),
			map[string]any{"duration": 5, "intervalId": "Hours"}, "2019-02-01T18:00:00.000Z", "2019-02-04T12:00:00.000Z"},
		// Due while open: kept.
		{"open hours", "MOVE_TO_BEGINNING_OF_NEXT_OPEN_SERVICE_POINT_HOURS", hoursOf(2), nil, "2019-02-01T09:00:00.000Z", "2019-02-01T11:00:00.000Z"},
		{"short term kept", "KEEP_THE_CURRENT_DUE_DATE_TIME", hoursOf(3), nil, "2019-02-01T18:00:00.000Z", "2019-02-01T21:00:00.000Z"},
	}
	for _, tc := range cases {
		if got := lend(tc.strategy, tc.period, tc.offset, tc.loanDate); got != tc.want {
			t.Errorf("%s (%s): due %s, FOLIO's %s", tc.name, tc.strategy, got, tc.want)
		}
	}
	// Lent through an override of a patron block, it is the policy's loan
	// still: its due date moves (only an override lending an item the
	// policy does not lend keeps the librarian's date), as FOLIO's does.
	if got := lend("MOVE_TO_THE_END_OF_THE_NEXT_OPEN_DAY", week, nil, "2019-02-02T10:00:00.000Z",
		map[string]any{"overrideBlocks": map[string]any{"patronBlock": map[string]any{}, "comment": "Desk"}}); got != "2019-02-12T23:59:59.000Z" {
		t.Errorf("lent through an override: due %s, FOLIO's 2019-02-12T23:59:59.000Z", got)
	}
	changePolicy(t, c, lib, map[string]any{"loanable": false})
	if got := lend("MOVE_TO_THE_END_OF_THE_NEXT_OPEN_DAY", week, nil, "2019-02-02T10:00:00.000Z",
		map[string]any{"overrideBlocks": map[string]any{"itemNotLoanableBlock": map[string]any{"dueDate": "2019-02-09T10:00:00.000Z"},
			"comment": "Desk"}}); got != "2019-02-09T10:00:00.000Z" {
		t.Errorf("lent past a policy that does not lend: due %s, want the librarian's 2019-02-09T10:00:00.000Z", got)
	}
	changePolicy(t, c, lib, map[string]any{"loanable": true})
	// Now, 50 hours: due while the service point is shut (the day after
	// tomorrow or the day after). The end of the hours open now: open
	// every day until it shuts.
	shut, reopened := today.AddDate(0, 0, 2), today.AddDate(0, 0, 4)
	if got := lend("MOVE_TO_END_OF_CURRENT_SERVICE_POINT_HOURS", hoursOf(50), nil, ""); got != schemas.FormatTime(shut) {
		t.Errorf("end of the current hours: due %s, want %s", got, schemas.FormatTime(shut))
	}
	if got := lend("MOVE_TO_BEGINNING_OF_NEXT_OPEN_SERVICE_POINT_HOURS", hoursOf(50), nil, ""); got != schemas.FormatTime(reopened) {
		t.Errorf("beginning of the next hours: due %s, want %s", got, schemas.FormatTime(reopened))
	}

	// A renewal's due date moves as the check-out's: lent yesterday for
	// two days (due tomorrow, open: the end of it), renewed a day from
	// its due date, which is shut: the end of the day it reopens.
	renewable(t, c, lib, map[string]any{"unlimited": true, "renewFromId": "CURRENT_DUE_DATE", "period": map[string]any{"duration": 1, "intervalId": "Days"}})
	renewedPatron := patron
	due := lend("MOVE_TO_THE_END_OF_THE_NEXT_OPEN_DAY", map[string]any{"duration": 2, "intervalId": "Days"}, nil, schemas.FormatTime(today.AddDate(0, 0, -1).Add(10*time.Hour)))
	if want := schemas.FormatTime(today.AddDate(0, 0, 1).Add(24*time.Hour - time.Second)); due != want {
		t.Errorf("check-out before the renewal: due %s, want %s", due, want)
	}
	var renewed struct{ DueDate string }
	c.Do(c.Circulations[0], "POST", "/circulation/renew-by-barcode", map[string]any{"itemBarcode": lib.Items[renewedPatron][0],
		"userBarcode": lib.Patrons[renewedPatron]}).Want(t, http.StatusOK).Decode(t, &renewed)
	if want := schemas.FormatTime(reopened.Add(24*time.Hour - time.Second)); renewed.DueDate != want {
		t.Errorf("renewal: due %s, want %s (the end of the day the service point reopens)", renewed.DueDate, want)
	}
	// Past a patron block alone, it is the policy's renewal still: its due
	// date moves as well (an override of the policy's refusals keeps the
	// date it gives).
	overriddenPatron := patron
	lend("MOVE_TO_THE_END_OF_THE_NEXT_OPEN_DAY", map[string]any{"duration": 2, "intervalId": "Days"}, nil, schemas.FormatTime(today.AddDate(0, 0, -1).Add(10*time.Hour)))
	var overridden struct{ DueDate, Action string }
	c.Do(c.Circulations[0], "POST", "/circulation/renew-by-barcode", map[string]any{"itemBarcode": lib.Items[overriddenPatron][0],
		"userBarcode": lib.Patrons[overriddenPatron], "overrideBlocks": map[string]any{"patronBlock": map[string]any{}, "comment": "Desk"}}).
		Want(t, http.StatusOK).Decode(t, &overridden)
	if want := schemas.FormatTime(reopened.Add(24*time.Hour - time.Second)); overridden.DueDate != want || overridden.Action != schemas.LoanRenewedThroughOverride {
		t.Errorf("renewal past a patron block: due %s, %s, want %s, %s", overridden.DueDate, overridden.Action, want, schemas.LoanRenewedThroughOverride)
	}

	// A service point with no calendar is open always.
	var bare struct{ ID string }
	c.Do(c.Storage, "POST", "/service-points", map[string]any{"name": "No calendar", "code": "bare", "discoveryDisplayName": "Bare"}).
		Want(t, http.StatusCreated).Decode(t, &bare)
	changePolicy(t, c, lib, map[string]any{"loansPolicy": map[string]any{"profileId": "Rolling", "period": week,
		"closedLibraryDueDateManagementId": "MOVE_TO_THE_END_OF_THE_NEXT_OPEN_DAY"}})
	var kept struct{ DueDate string }
	c.Do(c.Circulations[0], "POST", "/circulation/check-out-by-barcode", map[string]any{"itemBarcode": lib.Items[patron][0],
		"userBarcode": lib.Patrons[patron], "servicePointId": bare.ID, "loanDate": "2019-02-02T10:00:00.000Z"}).
		Want(t, http.StatusCreated).Decode(t, &kept)
	patron++
	if kept.DueDate != "2019-02-09T10:00:00.000Z" {
		t.Errorf("no calendar: due %s, want the period's 2019-02-09T10:00:00.000Z", kept.DueDate)
	}

	// A hold shelf's expiration: three days from today is shut; the
	// service point moves it to the end of the next open day.
	keepHolds(t, c, sp, 3, "Days")
	var point map[string]any
	c.Do(c.Storage, "GET", "/service-points/"+sp, nil).Want(t, http.StatusOK).Decode(t, &point)
	delete(point, "metadata")
	point["holdShelfClosedLibraryDateManagement"] = "MOVE_TO_THE_END_OF_THE_NEXT_OPEN_DAY"
	c.Do(c.Storage, "PUT", "/service-points/"+sp, point).Want(t, http.StatusNoContent)
	changePolicy(t, c, lib, map[string]any{"loansPolicy": map[string]any{"profileId": "Rolling", "period": week}})
	owner, requester := lib.Patrons[patron], lib.Patrons[patron+1]
	item := lib.Items[patron][0]
	c.CheckOut(0, item, owner).Want(t, http.StatusCreated)
	var request struct{ ID string }
	c.Do(c.Storage, "POST", "/request-storage/requests", map[string]any{"requestType": "Hold", "requestLevel": "Item",
		"requestDate": schemas.FormatTime(today), "requesterId": c.IDOf(t, "/users", "users", requester),
		"itemId": c.IDOf(t, "/item-storage/items", "items", item), "status": "Open - Not yet filled", "position": 1,
		"fulfillmentPreference": "Hold Shelf", "pickupServicePointId": sp}).Want(t, http.StatusCreated).Decode(t, &request)
	c.Do(c.Circulations[0], "POST", "/circulation/check-in-by-barcode", map[string]string{"itemBarcode": item, "servicePointId": sp}).
		Want(t, http.StatusOK)
	if got, want := readRequest(t, c, request.ID).HoldShelfExpiration, schemas.FormatTime(reopened.Add(24*time.Hour-time.Second)); got != want {
		t.Errorf("hold shelf expiration %s, want %s (three days on is shut: the end of the day it reopens)", got, want)
	}
	patron += 2

	// The end of a day is the tenant's: in New York, a week from
	// Saturday 2 February at 10:00 UTC ends at 04:59:59 UTC on the 10th.
	// The tenant administrator sets it, as docs/configuration.md does.
	c.DoWith(c.Storage, "POST", "/settings/entries", map[string]any{"scope": schemas.LocaleScope, "key": schemas.LocaleKey,
		"value": map[string]any{"locale": "en-US", "timezone": "America/New_York", "currency": "USD"}},
		map[string]string{schemas.HeaderTenant: c.Tenant, schemas.HeaderToken: c.Token(schemas.RoleTenantAdmin)}).Want(t, http.StatusCreated)
	if got := lend("KEEP_THE_CURRENT_DUE_DATE", week, nil, "2019-02-02T10:00:00.000Z"); got != "2019-02-10T04:59:59.000Z" {
		t.Errorf("New York's end of the day: due %s, want 2019-02-10T04:59:59.000Z", got)
	}
}

// TestCalendarsAreMODCalendars: mod-calendar's routes at storage. A
// calendar is refused, and nothing written, for each of mod-calendar's
// rules it breaks; a service point's days are its exceptions where they
// fall and its normal hours elsewhere (surrounding-openings,
// all-openings); twenty calendars of one service point for the same
// dates sent at once: one is kept, the others refused.
func TestCalendarsAreMODCalendars(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, Storages: 1})
	c.SetupLibrary(1, 1, 0)
	sp := harness.ServicePoint
	base := func() map[string]any {
		return map[string]any{"name": "Spring", "startDate": "2022-01-08", "endDate": "2022-05-09", "assignments": []string{sp},
			"normalHours": []map[string]string{{"startDay": "MONDAY", "startTime": "07:00", "endDay": "FRIDAY", "endTime": "22:00"},
				{"startDay": "SATURDAY", "startTime": "07:00", "endDay": "SATURDAY", "endTime": "22:00"}},
			"exceptions": []map[string]any{{"name": "Spring break", "startDate": "2022-03-01", "endDate": "2022-03-05", "openings": []any{}},
				{"name": "Early closure", "startDate": "2022-04-01", "endDate": "2022-04-01",
					"openings": []map[string]string{{"startDate": "2022-04-01", "startTime": "07:00", "endDate": "2022-04-01", "endTime": "12:00"}}}}}
	}
	refusals := []struct {
		name   string
		change func(m map[string]any)
		field  string
	}{
		{"dates out of order", func(m map[string]any) { m["endDate"] = "2022-01-01" }, "startDate"},
		{"no such date", func(m map[string]any) { m["endDate"] = "2022-02-30" }, "startDate"},
		{"overlapping hours", func(m map[string]any) {
			m["normalHours"] = append(m["normalHours"].([]map[string]string), map[string]string{"startDay": "FRIDAY", "startTime": "21:00", "endDay": "FRIDAY", "endTime": "23:00"})
		}, "normalHours"},
		{"an exception outside", func(m map[string]any) {
			m["exceptions"] = []map[string]any{{"name": "Late", "startDate": "2022-06-01", "endDate": "2022-06-02", "openings": []any{}}}
		}, "exceptions"},
		{"an unknown service point", func(m map[string]any) { m["assignments"] = []string{"6a3b1d4e-0000-4000-8000-000000000001"} }, "assignments"},
	}
	for _, r := range refusals {
		doc := base()
		r.change(doc)
		var errsOut struct {
			Errors []struct {
				Message    string
				Parameters []struct{ Key string }
			}
		}
		c.Do(c.Storage, "POST", "/calendar/calendars", doc).Want(t, http.StatusUnprocessableEntity).Decode(t, &errsOut)
		if len(errsOut.Errors) != 1 || len(errsOut.Errors[0].Parameters) == 0 || errsOut.Errors[0].Parameters[0].Key != r.field {
			t.Errorf("%s: %+v, want one error about %s", r.name, errsOut.Errors, r.field)
		}
	}
	var n int
	if err := c.DB.QueryRow(context.Background(), fmt.Sprintf(`SELECT count(*) FROM %s.calendar`, c.Schema)).Scan(&n); err != nil || n != 0 {
		t.Fatalf("calendars after refusals: %d (%v), want 0", n, err)
	}

	// Twenty at once: one kept.
	var wg sync.WaitGroup
	statuses := make([]int, 20)
	for i := range statuses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			doc := base()
			doc["name"] = fmt.Sprintf("Spring %d", i)
			statuses[i] = c.Do(c.Storage, "POST", "/calendar/calendars", doc).Status
		}()
	}
	wg.Wait()
	created := 0
	for _, s := range statuses {
		switch s {
		case http.StatusCreated:
			created++
		case http.StatusUnprocessableEntity:
		default:
			t.Errorf("a calendar sent at once answered %d", s)
		}
	}
	var assigned int
	if err := c.DB.QueryRow(context.Background(), `SELECT count(*) FROM circulation_storage.calendar_assignment WHERE tenant_id = $1`, c.Tenant).
		Scan(&assigned); err != nil {
		t.Fatal(err)
	}
	if created != 1 || assigned != 1 {
		t.Fatalf("20 calendars of one service point for the same dates at once: %d created, %d assignments; want 1 and 1", created, assigned)
	}

	type dayOpen struct {
		Date          string
		AllDay, Open  bool
		Exceptional   bool
		ExceptionName string
		Openings      []struct{ StartTime, EndTime string }
	}
	var around struct{ Openings []dayOpen }
	// Tuesday 1 March is in the spring break, which runs to Saturday 5;
	// Monday 28 February is open from Monday's 07:00 through the night.
	c.Do(c.Storage, "GET", "/calendar/dates/"+sp+"/surrounding-openings?date=2022-03-01", nil).Want(t, http.StatusOK).Decode(t, &around)
	got := fmt.Sprintf("%+v", around.Openings)
	want := "[{Date:2022-02-28 AllDay:false Open:true Exceptional:false ExceptionName: Openings:[{StartTime:07:00:00 EndTime:23:59:00}]} " +
		"{Date:2022-03-01 AllDay:true Open:false Exceptional:true ExceptionName:Spring break Openings:[]} " +
		"{Date:2022-03-07 AllDay:false Open:true Exceptional:false ExceptionName: Openings:[{StartTime:07:00:00 EndTime:23:59:00}]}]"
	if got != want {
		t.Errorf("surrounding openings of 2022-03-01:\n got %s\nwant %s", got, want)
	}
	var page struct {
		Dates        []dayOpen
		TotalRecords int
	}
	c.Do(c.Storage, "GET", "/calendar/dates/"+sp+"/all-openings?startDate=2022-03-31&endDate=2022-04-03&includeClosed=false", nil).
		Want(t, http.StatusOK).Decode(t, &page)
	got = fmt.Sprintf("%d %+v", page.TotalRecords, page.Dates)
	want = "3 [{Date:2022-03-31 AllDay:true Open:true Exceptional:false ExceptionName: Openings:[{StartTime:00:00:00 EndTime:23:59:00}]} " +
		"{Date:2022-04-01 AllDay:false Open:true Exceptional:true ExceptionName:Early closure Openings:[{StartTime:07:00:00 EndTime:12:00:00}]} " +
		"{Date:2022-04-02 AllDay:false Open:true Exceptional:false ExceptionName: Openings:[{StartTime:07:00:00 EndTime:22:00:00}]}]"
	if got != want {
		t.Errorf("all openings 2022-03-31 to 2022-04-03:\n got %s\nwant %s", got, want)
	}
	c.Do(c.Storage, "GET", "/calendar/dates/"+sp+"/all-openings?startDate=2022-04-03&endDate=2022-03-31&includeClosed=false", nil).
		Want(t, http.StatusUnprocessableEntity)
	// The days next to the first and last a date can name: their
	// neighbours are dates a client can read.
	for date, want := range map[string][]string{"0001-01-02": {"0001-01-01", "0001-01-02", "2022-01-08"},
		"9999-12-30": {"2022-05-09", "9999-12-30", "9999-12-31"}} {
		var edge struct {
			Openings []struct{ Date string }
		}
		c.Do(c.Storage, "GET", "/calendar/dates/"+sp+"/surrounding-openings?date="+date, nil).Want(t, http.StatusOK).Decode(t, &edge)
		var got []string
		for _, o := range edge.Openings {
			got = append(got, o.Date)
		}
		if !slices.Equal(got, want) {
			t.Errorf("surrounding openings of %s: %q, want %q", date, got, want)
		}
	}
	// Dates PostgreSQL cannot read (no year 0) are the client's to mend.
	// Nor are the first and last days a date can name, whose neighbours
	// the surrounding openings would have to name.
	for _, bad := range []string{"surrounding-openings?date=yesterday", "surrounding-openings?date=0000-01-01",
		"surrounding-openings?date=0001-01-01", "surrounding-openings?date=9999-12-31",
		"all-openings?startDate=0000-01-01&endDate=0000-01-02&includeClosed=true",
		"all-openings?startDate=2022-03-31&endDate=2022-02-30&includeClosed=true"} {
		r := c.Do(c.Storage, "GET", "/calendar/dates/"+sp+"/"+bad, nil).Want(t, http.StatusUnprocessableEntity)
		if codes := r.ErrorCodes(); !slices.Equal(codes, []string{schemas.CodeInvalidParameter}) {
			t.Errorf("GET %s: codes %q, want %s: %s", bad, codes, schemas.CodeInvalidParameter, r.Body)
		}
	}
}

// TestOverdueFinesCountOnlyOpenHours: an overdue fine policy that does
// not count closed days (countClosed false, mod-circulation's
// OverduePeriodCalculatorService) fines only the minutes the loan's
// service point was open by its calendar. Due on Friday 8 February 2019
// at 10:00 and returned on Tuesday 12 at 10:00, over a weekend and a
// closed Monday: nine open hours, one day begun at 5.00 a day (every
// minute would be four days: 20.00).
func TestOverdueFinesCountOnlyOpenHours(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, Storages: 1, FeatureOn: true})
	overdue := facultyStandard()
	overdue["countClosed"] = false
	lib := setUpFees(t, c, 1, 1, overdue, lostPolicy(10, 5))
	postCalendar(t, c, "2019", day("2019-01-01"), day("2019-12-31"), []string{harness.ServicePoint},
		hours(weekdays, "08:00", "12:00", "14:00", "19:00"), closure("Staff day", day("2019-02-11"), day("2019-02-11")))
	changePolicy(t, c, lib.Library, map[string]any{"loansPolicy": map[string]any{"profileId": "Rolling",
		"period": map[string]any{"duration": 1, "intervalId": "Weeks"}}})
	loan := checkOutOn(t, c, lib.Items[0][0], lib.Patrons[0], "2019-02-01T10:00:00.000Z")
	checkInOn(t, c, lib.Items[0][0], harness.ServicePoint, "2019-02-12T10:00:00.000Z")
	fees := accountsOf(t, c, c.IDOf(t, "/users", "users", lib.Patrons[0]))
	if len(fees) != 1 {
		t.Fatalf("an overdue loan returned: %d fees/fines, want 1", len(fees))
	}
	wantCharge(t, c, fees[0], loan, lib.OverdueType, schemas.FeeFineOverdueFine, lib.Owner, "5.00")
}
