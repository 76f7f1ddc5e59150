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
)

// TestAnHoursDueDateMovesAsWhenItReadAMonth: calendar_moved (migration
// 38) reads a service point's hours for the days around an hour's due
// date and now first, and a month's only when those cannot answer; it
// answers as migration 35's calendar_moved, which read the month's hours
// every time, made again here beside it. Both are asked the same 482
// moves: two that the near days cannot answer, and 480 of random due
// dates over seven weeks, each with a now up to three days before or one
// after it, an offset or none, both short strategies, on four calendars:
// two periods on weekdays with a four-day closure, all day every day with
// two days closed (openings that run into the next day's), weekends only,
// and nights from 20:00 to 02:00.
func TestAnHoursDueDateMovesAsWhenItReadAMonth(t *testing.T) {
	t.Parallel()
	db, tenant := sampleDatabase(t, 2)
	ctx := context.Background()
	monthly := monthlyCalendarMoved(t)
	if _, err := db.Pool.Exec(ctx, "BEGIN; SET LOCAL search_path TO "+pgx.Identifier{postgres.SharedSchema}.Sanitize()+"; "+monthly+"; COMMIT"); err != nil {
		t.Fatalf("make migration 35's calendar_moved again: %v", err)
	}
	lib := newLibrary(db, testPolicy)
	today := time.Now().UTC().Truncate(24 * time.Hour)
	date := func(days int) string { return today.AddDate(0, 0, days).Format(time.DateOnly) }
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
	closure := func(name string, from, to int) map[string]any {
		return map[string]any{"name": name, "startDate": date(from), "endDate": date(to), "openings": []any{}}
	}
	calendars := []struct {
		name   string
		normal []map[string]string
		except []map[string]any
	}{
		{"two periods on weekdays", append(weekly(week[:5], "08:00", "12:00", false), weekly(week[:5], "14:00", "19:00", false)...),
			[]map[string]any{closure("Inventory", 3, 6)}},
		{"all day", weekly(week, "00:00", "23:59", false), []map[string]any{closure("Move", 2, 3)}},
		{"weekends", weekly(week[5:], "10:00", "16:00", false), []map[string]any{}},
		{"nights", weekly(week, "20:00", "02:00", true), []map[string]any{}},
	}
	var points []string
	for _, c := range calendars {
		sp := uuid.NewString()
		if _, err := lib.Create(ctx, tenant, storage.ServicePoints, sp, mustJSON(t, map[string]any{"name": c.name, "code": sp[:8],
			"discoveryDisplayName": c.name})); err != nil {
			t.Fatal(err)
		}
		if _, err := lib.Create(ctx, tenant, storage.Calendars, uuid.NewString(), mustJSON(t, map[string]any{"name": c.name,
			"startDate": date(-10), "endDate": date(40), "assignments": []string{sp}, "normalHours": c.normal, "exceptions": c.except})); err != nil {
			t.Fatalf("calendar %s: %v", c.name, err)
		}
		points = append(points, sp)
	}
	rng := rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano())))
	strategies := []string{"MOVE_TO_END_OF_CURRENT_SERVICE_POINT_HOURS", "MOVE_TO_BEGINNING_OF_NEXT_OPEN_SERVICE_POINT_HOURS"}
	offsets := []*string{nil, ptr("1 hour"), ptr("5 hours"), ptr("30 hours")}
	// Two moves the days near them cannot answer, first: on the all-day
	// calendar, due on its second closed day and asked the morning after,
	// the opening found runs past the near days (through the month); on
	// the weekends', due on a Friday at noon with an offset of 30 hours,
	// the next opening and its offset land past them.
	friday := today.AddDate(0, 0, 1)
	for friday.Weekday() != time.Friday {
		friday = friday.AddDate(0, 0, 1)
	}
	friday = friday.Add(12 * time.Hour)
	closed := today.AddDate(0, 0, 3).Add(12 * time.Hour)
	sps := []string{points[1], points[2]}
	ats := []time.Time{closed, friday}
	nows := []time.Time{closed.Add(20 * time.Hour), friday.Add(-2 * time.Hour)}
	moves := []string{strategies[0], strategies[1]}
	offs := []*string{nil, offsets[3]}
	for _, sp := range points {
		for range 120 {
			at := today.AddDate(0, 0, -7).Add(time.Duration(rng.IntN(49*24*4)) * 15 * time.Minute).Add(time.Duration(rng.IntN(15)) * time.Minute)
			sps = append(sps, sp)
			ats = append(ats, at)
			nows = append(nows, at.Add(-time.Duration(rng.IntN(96*60)-24*60)*time.Minute))
			moves = append(moves, strategies[rng.IntN(len(strategies))])
			offs = append(offs, offsets[rng.IntN(len(offsets))])
		}
	}
	fn := func(name string) string { return pgx.Identifier{postgres.SharedSchema, name}.Sanitize() }
	rows, err := db.Pool.Query(ctx, `SELECT c.sp, c.at, c.now, c.move, c.off, `+fn("calendar_moved")+`($1, c.sp, c.at, c.move, true, c.off::interval, c.now),
		`+fn("calendar_moved_month")+`($1, c.sp, c.at, c.move, true, c.off::interval, c.now)
		FROM unnest($2::uuid[], $3::timestamptz[], $4::timestamptz[], $5::text[], $6::text[]) AS c (sp, at, now, move, off)`,
		string(tenant), sps, ats, nows, moves, offs)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	asked, moved := 0, 0
	for rows.Next() {
		var sp, move string
		var at, now time.Time
		var off *string
		var got, want *time.Time
		if err := rows.Scan(&sp, &at, &now, &move, &off, &got, &want); err != nil {
			t.Fatal(err)
		}
		asked++
		if want != nil && !want.Equal(at) {
			moved++
		}
		if (got == nil) != (want == nil) || (got != nil && !got.Equal(*want)) {
			t.Errorf("service point %s, due %s, now %s, %s, offset %v: moved to %v, migration 35's to %v", sp, at, now, move, shown(off), shown(got), shown(want))
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if asked != len(sps) || moved < len(sps)/4 {
		t.Fatalf("%d moves asked, %d of them moved: the cases do not ask what the test is about", asked, moved)
	}
}

// monthlyCalendarMoved is migration 35's calendar_moved, named
// calendar_moved_month.
func monthlyCalendarMoved(t *testing.T) string {
	t.Helper()
	up, err := fs.ReadFile(migrations.FS, "000035_calendars.up.sql")
	if err != nil {
		t.Fatal(err)
	}
	src := string(up)
	start := strings.Index(src, "CREATE FUNCTION calendar_moved(")
	if start < 0 {
		t.Fatal("migration 35 makes no calendar_moved")
	}
	end := strings.Index(src[start:], "$$;")
	return strings.Replace(src[start:start+end+3], "calendar_moved(", "calendar_moved_month(", 1)
}

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
