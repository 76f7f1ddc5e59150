package harness

import (
	"fmt"
	"testing"
)

// recordingTB is a testing.TB that keeps what it is told.
type recordingTB struct {
	testing.TB
	cleanups []func()
	logs     []string
	errors   []string
}

func (r *recordingTB) Helper()          {}
func (r *recordingTB) Name() string     { return "TestSomething" }
func (r *recordingTB) Cleanup(f func()) { r.cleanups = append(r.cleanups, f) }
func (r *recordingTB) Logf(format string, args ...any) {
	r.logs = append(r.logs, fmt.Sprintf(format, args...))
}
func (r *recordingTB) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}
func (r *recordingTB) Error(args ...any) { r.errors = append(r.errors, fmt.Sprint(args...)) }

// cleanUp runs the cleanups as testing does: last registered first.
func (r *recordingTB) cleanUp() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
}

// TestRepeatFailuresRepeatsFirstLinesAfterEveryCleanup: a message's first
// lines, up to a quoted log or four lines, come after every cleanup's output.
func TestRepeatFailuresRepeatsFirstLinesAfterEveryCleanup(t *testing.T) {
	rec := &recordingTB{}
	tb := RepeatFailures(rec)
	tb.Cleanup(func() { tb.Logf("the nodes' logs") })
	tb.Errorf("no %s within %s. The cluster: leader %q\n---- node1's log ----\nline", "a healthy cluster", "3m0s", "node2")
	tb.Error("fault kill: ", "lost_checkouts=1\n  one\n  two\n  three\n  four")
	rec.cleanUp()

	if len(rec.errors) != 2 {
		t.Fatalf("errors passed on: %q, want both", rec.errors)
	}
	want := []string{
		"the nodes' logs",
		"---- why TestSomething failed (repeated from above) ----\n" +
			"no a healthy cluster within 3m0s. The cluster: leader \"node2\" […]\n" +
			"fault kill: lost_checkouts=1\n  one\n  two\n  three […]",
	}
	if fmt.Sprint(rec.logs) != fmt.Sprint(want) {
		t.Errorf("logged %q,\nwant %q", rec.logs, want)
	}
}

func TestRepeatFailuresIsQuietWithoutFailures(t *testing.T) {
	rec := &recordingTB{}
	tb := RepeatFailures(rec)
	tb.Logf("progress")
	rec.cleanUp()
	if fmt.Sprint(rec.logs) != fmt.Sprint([]string{"progress"}) {
		t.Errorf("logged %q, want only the test's own line", rec.logs)
	}
}
