package schemas

import (
	"testing"
	"time"
)

func TestDueDateAddsThePolicysPeriod(t *testing.T) {
	t.Parallel()
	// The last day of January: a month on is the calendar's (Go's AddDate
	// normalises 31 February to 3 March), as every judge computes it.
	at := time.Date(2026, 1, 31, 10, 30, 0, 0, time.UTC)
	for _, tc := range []struct {
		duration int
		interval string
		want     time.Time
	}{
		{45, "Minutes", time.Date(2026, 1, 31, 11, 15, 0, 0, time.UTC)},
		{3, "Hours", time.Date(2026, 1, 31, 13, 30, 0, 0, time.UTC)},
		{14, "Days", time.Date(2026, 2, 14, 10, 30, 0, 0, time.UTC)},
		{2, "Weeks", time.Date(2026, 2, 14, 10, 30, 0, 0, time.UTC)},
		{1, "Months", time.Date(2026, 3, 3, 10, 30, 0, 0, time.UTC)},
		{5, "Fortnights", at},
		{0, "", at},
		// The longest periods a policy may give: past MaxYear, its end.
		{100000, "Months", LatestDate()},
		{100000, "Weeks", time.Date(3942, 8, 15, 10, 30, 0, 0, time.UTC)},
	} {
		if got := DueDate(at, tc.duration, tc.interval); !got.Equal(tc.want) {
			t.Errorf("DueDate(%s, %d, %q) = %s, want %s", at, tc.duration, tc.interval, got, tc.want)
		}
	}
}
