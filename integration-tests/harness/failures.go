package harness

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// RepeatFailures returns t with the first lines of each of its failure
// messages (keptLines) repeated, together, as the last thing the test
// logs. A test that runs a Patroni cluster logs
// hundreds of lines of the nodes' logs when it fails (HA.stop, at
// cleanup), after the message that says why; repeated below them, the
// reason is where a reader of the output looks first.
//
// Call it first thing in the test, before anything registers a cleanup,
// and use the t it returns from then on.
func RepeatFailures(t testing.TB) testing.TB {
	r := &repeater{TB: t}
	// Registered first, so it runs last.
	t.Cleanup(func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if len(r.reasons) > 0 {
			t.Logf("---- why %s failed (repeated from above) ----\n%s", t.Name(), strings.Join(r.reasons, "\n"))
		}
	})
	return r
}

// keptLines is how many lines of a failure message are repeated at most:
// the message's first line and the first few things it lists, up to the
// first log it quotes (a line starting "----").
const keptLines = 4

// repeater is a testing.TB that keeps its failure messages.
type repeater struct {
	testing.TB
	mu      sync.Mutex
	reasons []string
}

func (r *repeater) keep(msg string) {
	lines := strings.Split(msg, "\n")
	kept := 1
	for kept < len(lines) && kept < keptLines && !strings.HasPrefix(lines[kept], "----") {
		kept++
	}
	if msg = strings.Join(lines[:kept], "\n"); kept < len(lines) {
		msg += " […]"
	}
	r.mu.Lock()
	r.reasons = append(r.reasons, msg)
	r.mu.Unlock()
}

func (r *repeater) Error(args ...any) {
	r.TB.Helper()
	r.keep(fmt.Sprint(args...))
	r.TB.Error(args...)
}

func (r *repeater) Errorf(format string, args ...any) {
	r.TB.Helper()
	r.keep(fmt.Sprintf(format, args...))
	r.TB.Errorf(format, args...)
}

func (r *repeater) Fatal(args ...any) {
	r.TB.Helper()
	r.keep(fmt.Sprint(args...))
	r.TB.Fatal(args...)
}

func (r *repeater) Fatalf(format string, args ...any) {
	r.TB.Helper()
	r.keep(fmt.Sprintf(format, args...))
	r.TB.Fatalf(format, args...)
}
