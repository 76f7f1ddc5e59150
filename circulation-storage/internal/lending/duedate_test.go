package lending

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/migrations"
	"github.com/checkoutlock/schemas"
)

// TestAnHoursDueDateMovesAsWhenItReadAMonth: calendar_moved (migration
// 38) reads a service point's hours for the days around an hour's due
// date and now first, and a month's only when those cannot answer; it
// answers as migration 35's calendar_moved, which read the month's hours
// every time, made again here beside it, to every move both are asked:
//   - moves the near days cannot answer: on a calendar open all day, due
//     on a closed day and asked the morning after (the opening found runs
//     on through the month); on one open at weekends, due on a Friday with
//     an offset of 30 hours (the next opening and its offset land past the
//     near days); on one open 00:00 to 06:00 and 18:00 to 22:00, with an
//     offset landing exactly at midnight after the near days; on a
//     calendar starting weeks after the due date; and with no now;
//   - 360 of random due dates over seven weeks, each with a now up to
//     three days before or one after it, an offset or none, both short
//     strategies, on those calendars and two more (two periods on
//     weekdays with a four-day closure, nights from 20:00 to 02:00), in
//     UTC;
//   - 60 more in the tenant's time zone set to Havana's, whose clocks go
//     from 00:00 to 01:00 on 14 March 2027, on a calendar open from 00:00
//     to 02:00 and from 20:00 to 23:59 that month.
func TestAnHoursDueDateMovesAsWhenItReadAMonth(t *testing.T) {
	t.Parallel()
	db, tenant := sampleDatabase(t, 2)
	remakeMigration35Function(t, db, "calendar_moved", "calendar_moved_month")
	lib := newLibrary(db, testPolicy)
	today := time.Now().UTC().Truncate(24 * time.Hour)
	day := func(days int) time.Time { return today.AddDate(0, 0, days) }
	weekly := func(days []string, from, to string, next bool) []map[string]string {
		var out []map[string]string
		for i, d := range days {
			end := d
			if next {
				end = days[(i+1)%len(days)]
			}
			out = append(out, map[string]string{"startDay": d, "startTime": from, "endDay": end, "endTime": to})
		}
		return out
	}
	week := []string{"MONDAY", "TUESDAY", "WEDNESDAY", "THURSDAY", "FRIDAY", "SATURDAY", "SUNDAY"}
	closure := func(name string, from, to time.Time) map[string]any {
		return map[string]any{"name": name, "startDate": from.Format(time.DateOnly), "endDate": to.Format(time.DateOnly), "openings": []any{}}
	}
	calendar := func(name string, from, to time.Time, normal []map[string]string, exceptions ...map[string]any) string {
		t.Helper()
		return aCalendar(t, lib, tenant, name, from, to, normal, exceptions...)
	}
	allDay := calendar("all day", day(-10), day(40), weekly(week, "00:00", "23:59", false), closure("Move", day(2), day(3)))
	weekends := calendar("weekends", day(-10), day(40), weekly(week[5:], "10:00", "16:00", false))
	split := calendar("early and late", day(-10), day(40), append(weekly(week, "00:00", "06:00", false), weekly(week, "18:00", "22:00", false)...))
	late := calendar("starting late", day(20), day(40), weekly(week[:5], "09:00", "17:00", false))
	points := []string{allDay, weekends, split, late,
		calendar("two periods on weekdays", day(-10), day(40), append(weekly(week[:5], "08:00", "12:00", false),
			weekly(week[:5], "14:00", "19:00", false)...), closure("Inventory", day(3), day(6))),
		calendar("nights", day(-10), day(40), weekly(week, "20:00", "02:00", true))}
	seed := uint64(time.Now().UnixNano())
	t.Logf("random moves from seed %d", seed)
	rng := rand.New(rand.NewPCG(1, seed))
	const endOfHours, nextOpening = "MOVE_TO_END_OF_CURRENT_SERVICE_POINT_HOURS", "MOVE_TO_BEGINNING_OF_NEXT_OPEN_SERVICE_POINT_HOURS"
	offsets := []*string{nil, ptr("1 hour"), ptr("5 hours"), ptr("30 hours")}
	random := func(sp string, from time.Time, days int) dueMove {
		at := from.Add(time.Duration(rng.IntN(days*24*4))*15*time.Minute + time.Duration(rng.IntN(15))*time.Minute)
		return dueMove{sp: sp, at: at, now: ptr(at.Add(-time.Duration(rng.IntN(96*60)-24*60) * time.Minute)),
			strategy: []string{endOfHours, nextOpening}[rng.IntN(2)], offset: offsets[rng.IntN(len(offsets))]}
	}
	friday := day(1)
	for friday.Weekday() != time.Friday {
		friday = friday.AddDate(0, 0, 1)
	}
	friday = friday.Add(12 * time.Hour)
	closed, early := day(3).Add(12*time.Hour), day(5).Add(7*time.Hour)
	moves := []dueMove{
		{sp: allDay, at: closed, now: ptr(closed.Add(20 * time.Hour)), strategy: endOfHours},
		{sp: weekends, at: friday, now: ptr(friday.Add(-2 * time.Hour)), strategy: nextOpening, offset: ptr("30 hours")},
		{sp: split, at: early, now: ptr(early), strategy: nextOpening, offset: ptr("30 hours")},
		{sp: late, at: day(2).Add(12 * time.Hour), now: ptr(day(2)), strategy: endOfHours},
		{sp: late, at: day(2).Add(12 * time.Hour), now: ptr(day(2)), strategy: nextOpening, offset: ptr("1 hour")},
		{sp: weekends, at: friday, strategy: endOfHours},
		{sp: weekends, at: friday, strategy: nextOpening},
	}
	for _, sp := range points {
		for range 60 {
			moves = append(moves, random(sp, day(-7), 49))
		}
	}
	compareDueMoves(t, db, tenant, moves)

	// In Havana's time zone, around the night its clocks go from 00:00 to
	// 01:00.
	inHavana(t, lib, tenant)
	march := time.Date(2027, 3, 1, 0, 0, 0, 0, time.UTC)
	havana := calendar("Havana in March", march, march.AddDate(0, 0, 30),
		append(weekly(week, "00:00", "02:00", false), weekly(week, "20:00", "23:59", false)...))
	moves = nil
	for range 60 {
		moves = append(moves, random(havana, march.AddDate(0, 0, 7), 14))
	}
	compareDueMoves(t, db, tenant, moves)
}

// inHavana sets tenant's time zone to Havana's, whose clocks go from
// 00:00 to 01:00 on 14 March 2027.
func inHavana(t *testing.T, lib library, tenant storage.Tenant) {
	t.Helper()
	if _, err := lib.Create(context.Background(), tenant, storage.Settings, uuid.NewString(), mustJSON(t, map[string]any{"scope": schemas.LocaleScope,
		"key": schemas.LocaleKey, "value": map[string]any{"locale": "es-CU", "timezone": "America/Havana", "currency": "CUP"}})); err != nil {
		t.Fatal(err)
	}
}

// aCalendar stores a service point named name and a calendar of its own
// from one date to another with normal hours and exceptions, and answers
// the service point's id.
func aCalendar(t *testing.T, lib library, tenant storage.Tenant, name string, from, to time.Time, normal []map[string]string, exceptions ...map[string]any) string {
	t.Helper()
	ctx := context.Background()
	sp := uuid.NewString()
	if _, err := lib.Create(ctx, tenant, storage.ServicePoints, sp, mustJSON(t, map[string]any{"name": name, "code": sp[:8],
		"discoveryDisplayName": name})); err != nil {
		t.Fatal(err)
	}
	if _, err := lib.Create(ctx, tenant, storage.Calendars, uuid.NewString(), mustJSON(t, map[string]any{"name": name,
		"startDate": from.Format(time.DateOnly), "endDate": to.Format(time.DateOnly), "assignments": []string{sp},
		"normalHours": normal, "exceptions": append([]map[string]any{}, exceptions...)})); err != nil {
		t.Fatalf("calendar %s: %v", name, err)
	}
	return sp
}

// dueMove is one move of an hour's due date by a service point's
// calendar: due at, asked at now (nil: no now), by strategy, offset by
// offset after an opening (nil: none).
type dueMove struct {
	sp       string
	at       time.Time
	now      *time.Time
	strategy string
	offset   *string
}

// compareDueMoves asks calendar_moved and migration 35's,
// calendar_moved_month, each of moves, and fails the test for each they
// answer differently, or when too few moves move for the comparison to
// be about moving.
func compareDueMoves(t *testing.T, db *postgres.DB, tenant storage.Tenant, moves []dueMove) {
	t.Helper()
	var sps, strategies []string
	var ats []time.Time
	var nows []*time.Time
	var offsets []*string
	for _, m := range moves {
		sps, ats, nows, strategies, offsets = append(sps, m.sp), append(ats, m.at), append(nows, m.now), append(strategies, m.strategy), append(offsets, m.offset)
	}
	rows, err := db.Pool.Query(context.Background(), `SELECT c.sp, c.at, c.now, c.move, c.off,
		`+shared("calendar_moved")+`(@tenant, c.sp, c.at, c.move, true, c.off::interval, c.now),
		`+shared("calendar_moved_month")+`(@tenant, c.sp, c.at, c.move, true, c.off::interval, c.now)
		FROM unnest(@sps::uuid[], @ats::timestamptz[], @nows::timestamptz[], @moves::text[], @offsets::text[]) AS c (sp, at, now, move, off)`,
		pgx.StrictNamedArgs{"tenant": string(tenant), "sps": sps, "ats": ats, "nows": nows, "moves": strategies, "offsets": offsets})
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	asked, moved := 0, 0
	for rows.Next() {
		var sp, strategy string
		var at time.Time
		var now, got, want *time.Time
		var offset *string
		if err := rows.Scan(&sp, &at, &now, &strategy, &offset, &got, &want); err != nil {
			t.Fatal(err)
		}
		asked++
		if want != nil && !want.Equal(at) {
			moved++
		}
		if (got == nil) != (want == nil) || (got != nil && !got.Equal(*want)) {
			t.Errorf("service point %s, due %s, now %v, %s, offset %v: moved to %v, migration 35's to %v",
				sp, at, shown(now), strategy, shown(offset), shown(got), shown(want))
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if asked != len(moves) || moved < len(moves)/4 {
		t.Fatalf("%d moves asked, %d of them moved: the moves do not ask what the test is about", asked, moved)
	}
}

// remakeMigration35Function makes the function name again as migration
// 35 made it, named as, beside what the later migrations made of it.
func remakeMigration35Function(t *testing.T, db *postgres.DB, name, as string) {
	t.Helper()
	up, err := fs.ReadFile(migrations.FS, "000035_calendars.up.sql")
	if err != nil {
		t.Fatal(err)
	}
	src := string(up)
	start := strings.Index(src, "CREATE FUNCTION "+name+"(")
	if start < 0 {
		t.Fatalf("migration 35 makes no %s", name)
	}
	end := strings.Index(src[start:], "$$;")
	fn := strings.Replace(src[start:start+end+3], name+"(", as+"(", 1)
	if _, err := db.Pool.Exec(context.Background(), "BEGIN; SET LOCAL search_path TO "+pgx.Identifier{postgres.SharedSchema}.Sanitize()+"; "+fn+"; COMMIT"); err != nil {
		t.Fatalf("make migration 35's %s again: %v", name, err)
	}
}

// shared is the function name in the schema every tenant shares, quoted.
func shared(name string) string { return pgx.Identifier{postgres.SharedSchema, name}.Sanitize() }

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func ptr[T any](v T) *T { return &v }

// shown is *p, or nil.
func shown[T any](p *T) any {
	if p == nil {
		return nil
	}
	return fmt.Sprint(*p)
}

// TestAnOpeningTheClocksSkipHasNoTimeOpen: on the night Havana's clocks
// go from 00:00 to 01:00 (14 March 2027), a service point's opening from
// 00:30 to 01:15 starts, as PostgreSQL reads a local time the clocks
// skip, at 01:30, after its end. It has no time open that day (migration
// 39): a due date after it moves to the day's next opening, the end of
// the hours open now skips it, and the minutes open that night count
// only the morning's; the day after, the same opening counts its 45
// minutes. Migration 38's calendar_open refused to make the range, and
// every move and count that read the day failed.
func TestAnOpeningTheClocksSkipHasNoTimeOpen(t *testing.T) {
	t.Parallel()
	db, tenant := sampleDatabase(t, 2)
	ctx := context.Background()
	lib := newLibrary(db, testPolicy)
	inHavana(t, lib, tenant)
	var hours []map[string]string
	for _, d := range []string{"MONDAY", "TUESDAY", "WEDNESDAY", "THURSDAY", "FRIDAY", "SATURDAY", "SUNDAY"} {
		hours = append(hours, map[string]string{"startDay": d, "startTime": "00:30", "endDay": d, "endTime": "01:15"},
			map[string]string{"startDay": d, "startTime": "09:00", "endDay": d, "endTime": "17:00"})
	}
	sp := aCalendar(t, lib, tenant, "Havana in March", time.Date(2027, 3, 1, 0, 0, 0, 0, time.UTC), time.Date(2027, 3, 31, 0, 0, 0, 0, time.UTC), hours)
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, m := range []struct {
		at, now, strategy, want string
	}{
		// 01:20 in Havana, after the opening the clocks skipped: the next
		// opening is the day's 09:00.
		{"2027-03-14T05:20:00Z", "2027-03-14T04:00:00Z", "MOVE_TO_BEGINNING_OF_NEXT_OPEN_SERVICE_POINT_HOURS", "2027-03-14T13:00:00Z"},
		// 23:50 the night before: the hours open next end at 17:00.
		{"2027-03-14T04:50:00Z", "2027-03-14T04:50:00Z", "MOVE_TO_END_OF_CURRENT_SERVICE_POINT_HOURS", "2027-03-14T21:00:00Z"},
		// The night after, the opening is 04:30 to 05:15 (UTC).
		{"2027-03-15T04:00:00Z", "2027-03-15T03:00:00Z", "MOVE_TO_BEGINNING_OF_NEXT_OPEN_SERVICE_POINT_HOURS", "2027-03-15T04:30:00Z"},
	} {
		var got time.Time
		if err := db.Pool.QueryRow(ctx, `SELECT `+shared("calendar_moved")+`(@tenant, @sp, @at, @strategy, true, NULL, @now)`,
			pgx.StrictNamedArgs{"tenant": string(tenant), "sp": sp, "at": at(m.at), "strategy": m.strategy, "now": at(m.now)}).Scan(&got); err != nil {
			t.Fatalf("due %s, now %s, %s: %v", m.at, m.now, m.strategy, err)
		}
		if !got.Equal(at(m.want)) {
			t.Errorf("due %s, now %s, %s: moved to %s, want %s", m.at, m.now, m.strategy, got.UTC().Format(time.RFC3339), m.want)
		}
	}
	for _, c := range []struct {
		from, to string
		want     int
	}{
		{"2027-03-14T04:00:00Z", "2027-03-14T14:00:00Z", 60},
		{"2027-03-15T04:00:00Z", "2027-03-15T14:00:00Z", 45 + 60},
	} {
		var got int
		if err := db.Pool.QueryRow(ctx, `SELECT `+shared("calendar_open_minutes")+`(@tenant, @sp, @from, @to)`,
			pgx.StrictNamedArgs{"tenant": string(tenant), "sp": sp, "from": at(c.from), "to": at(c.to)}).Scan(&got); err != nil {
			t.Fatalf("minutes open from %s to %s: %v", c.from, c.to, err)
		}
		if got != c.want {
			t.Errorf("minutes open from %s to %s: %d, want %d", c.from, c.to, got, c.want)
		}
	}
}
