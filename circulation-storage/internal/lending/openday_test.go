package lending

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	storage "github.com/checkoutlock/circulation-storage"
)

// TestAnOpenDayIsFoundWithoutAWalk: calendar_open_day (migration 41)
// reads each calendar of a service point once, where migration 35's
// walked from the day one day at a time, reading each day's hours. It
// answers as that walk, made again here beside it, for every day of
// random calendars and the three weeks around them, forward and back:
// service points with one to three calendars and gaps between them,
// normal hours on some weekdays (none, or a night into the next day),
// closures and exceptions open on one or two stretches of their days.
// It reads no day's hours while it looks (calendar_day, counted by
// track_functions) across ten closed years; and on calendars from 0001
// to 9999 it finds the one opening of 9999, or none, where the walk read
// some three million days.
func TestAnOpenDayIsFoundWithoutAWalk(t *testing.T) {
	t.Parallel()
	db, tenant := sampleDatabase(t, 2)
	ctx := context.Background()
	remakeMigration35Function(t, db, "calendar_open_day", "calendar_open_day_walked")
	lib := newLibrary(db, testPolicy)
	servicePoint := func() string {
		t.Helper()
		sp := uuid.NewString()
		if _, err := lib.Create(ctx, tenant, storage.ServicePoints, sp, mustJSON(t, map[string]any{"name": "sp " + sp[:8], "code": sp[:8],
			"discoveryDisplayName": sp[:8]})); err != nil {
			t.Fatal(err)
		}
		return sp
	}
	calendar := func(sp string, from, to string, normal []map[string]string, exceptions []map[string]any) {
		t.Helper()
		if exceptions == nil {
			exceptions = []map[string]any{}
		}
		if normal == nil {
			normal = []map[string]string{}
		}
		if _, err := lib.Create(ctx, tenant, storage.Calendars, uuid.NewString(), mustJSON(t, map[string]any{"name": "calendar " + from,
			"startDate": from, "endDate": to, "assignments": []string{sp}, "normalHours": normal, "exceptions": exceptions})); err != nil {
			t.Fatalf("calendar %s to %s: %v", from, to, err)
		}
	}
	week := []string{"MONDAY", "TUESDAY", "WEDNESDAY", "THURSDAY", "FRIDAY", "SATURDAY", "SUNDAY"}
	seed := uint64(time.Now().UnixNano())
	t.Logf("random calendars from seed %d", seed)
	rng := rand.New(rand.NewPCG(2, seed))
	date := func(d time.Time) string { return d.Format(time.DateOnly) }
	start := time.Date(2027, 1, 4, 0, 0, 0, 0, time.UTC)
	var sps []string
	for range 12 {
		sp := servicePoint()
		sps = append(sps, sp)
		from := start.AddDate(0, 0, rng.IntN(10))
		for range 1 + rng.IntN(3) {
			to := from.AddDate(0, 0, 5+rng.IntN(40))
			var normal []map[string]string
			switch rng.IntN(4) {
			case 0: // closed but for its exceptions
			case 1: // a night into the next day (Sunday's into Monday)
				d := rng.IntN(7)
				normal = append(normal, map[string]string{"startDay": week[d], "startTime": "22:00", "endDay": week[(d+1)%7], "endTime": "02:00"})
			default:
				for _, d := range week {
					if rng.IntN(4) == 0 {
						normal = append(normal, map[string]string{"startDay": d, "startTime": "09:00", "endDay": d, "endTime": "17:00"})
					}
				}
			}
			var exceptions []map[string]any
			for at := from.AddDate(0, 0, rng.IntN(4)); ; {
				ends := at.AddDate(0, 0, rng.IntN(9))
				if ends.After(to) {
					break
				}
				openings := []any{}
				for range rng.IntN(3) {
					o := at.AddDate(0, 0, rng.IntN(int(ends.Sub(at).Hours()/24)+1))
					openings = append(openings, map[string]string{"startDate": date(o), "startTime": "10:00",
						"endDate": date(o.AddDate(0, 0, rng.IntN(int(ends.Sub(o).Hours()/24)+1))), "endTime": "12:00"})
				}
				exceptions = append(exceptions, map[string]any{"name": "exception " + date(at), "startDate": date(at), "endDate": date(ends),
					"openings": openings})
				at = ends.AddDate(0, 0, 1+rng.IntN(12))
			}
			calendar(sp, date(from), date(to), normal, exceptions)
			from = to.AddDate(0, 0, 1+rng.IntN(15))
		}
	}
	// Open on Mondays only, closed on two of them: the stretch after the
	// first closure begins on a Tuesday and the one before the second
	// ends on a Sunday, so their open day is the seventh looked at.
	mondays := servicePoint()
	sps = append(sps, mondays)
	calendar(mondays, date(start), date(start.AddDate(0, 0, 60)),
		[]map[string]string{{"startDay": "MONDAY", "startTime": "09:00", "endDay": "MONDAY", "endTime": "17:00"}},
		[]map[string]any{
			{"name": "first Monday", "startDate": date(start), "endDate": date(start), "openings": []any{}},
			{"name": "sixth Monday", "startDate": date(start.AddDate(0, 0, 42)), "endDate": date(start.AddDate(0, 0, 42)), "openings": []any{}},
		})
	rows, err := db.Pool.Query(ctx, `SELECT sp, day, step, `+shared("calendar_open_day")+`(@tenant, sp, day, step), `+shared("calendar_open_day_walked")+`(@tenant, sp, day, step)
		FROM unnest(@sps::uuid[]) sp, generate_series(@from::date - 10, @from::date + 180, interval '1 day') g, LATERAL (SELECT g::date AS day) d,
		     unnest(ARRAY[1, -1]) step`,
		pgx.StrictNamedArgs{"tenant": string(tenant), "sps": sps, "from": date(start)})
	if err != nil {
		t.Fatal(err)
	}
	asked, moved, none := 0, 0, 0
	for rows.Next() {
		var sp string
		var day time.Time
		var step int
		var got, want *time.Time
		if err := rows.Scan(&sp, &day, &step, &got, &want); err != nil {
			t.Fatal(err)
		}
		asked++
		switch {
		case want == nil:
			none++
		case !want.Equal(day):
			moved++
		}
		if (got == nil) != (want == nil) || (got != nil && !got.Equal(*want)) {
			t.Errorf("service point %s, from %s by %d: %v, the walk's %v", sp, date(day), step, shown(got), shown(want))
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if want := len(sps) * 191 * 2; asked != want || moved < asked/4 || none == 0 {
		t.Fatalf("%d of %d asked, %d moved, %d with no open day: the days do not ask what the test is about", asked, want, moved, none)
	}

	// Ten closed years, the day after them open: no day's hours read.
	tenYears := servicePoint()
	calendar(tenYears, "2027-01-01", "2037-01-01", nil, []map[string]any{{"name": "open at last", "startDate": "2037-01-01", "endDate": "2037-01-01",
		"openings": []any{map[string]string{"startDate": "2037-01-01", "startTime": "10:00", "endDate": "2037-01-01", "endTime": "12:00"}}}})
	var found time.Time
	var read int64
	if err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL track_functions = 'all'"); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `SELECT `+shared("calendar_open_day")+`($1, $2, date '2027-01-02', 1)`, string(tenant), tenYears).Scan(&found); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `SELECT coalesce(sum(calls), 0) FROM pg_stat_xact_user_functions WHERE funcname = 'calendar_day'`).Scan(&read)
	}); err != nil {
		t.Fatal(err)
	}
	if date(found) != "2037-01-01" || read != 0 {
		t.Fatalf("ten closed years: open on %s after reading %d days' hours, want 2037-01-01 after none", date(found), read)
	}

	// From 0001 to 9999: closed, and closed but for one opening in 9999.
	closed, late := servicePoint(), servicePoint()
	calendar(closed, "0001-01-01", "9999-12-31", nil, nil)
	calendar(late, "0001-01-01", "9999-12-31", nil, []map[string]any{{"name": "the last", "startDate": "9999-12-20", "endDate": "9999-12-31",
		"openings": []any{map[string]string{"startDate": "9999-12-24", "startTime": "10:00", "endDate": "9999-12-24", "endTime": "12:00"}}}})
	for _, c := range []struct {
		sp   string
		step int
		want string
	}{{closed, 1, ""}, {closed, -1, ""}, {late, 1, "9999-12-24"}, {late, -1, ""}} {
		var got *time.Time
		if err := db.Pool.QueryRow(ctx, `SELECT `+shared("calendar_open_day")+`($1, $2, date '2026-12-04', $3)`, string(tenant), c.sp, c.step).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if g := shown(got); (c.want == "" && g != nil) || (c.want != "" && (got == nil || date(*got) != c.want)) {
			t.Errorf("0001 to 9999, by %d: %v, want %q", c.step, g, c.want)
		}
	}
}
