package harness

import "time"

// Poll calls ok every interval until it holds, for up to timeout, and says
// whether it did: the one way the tests wait for what they cannot be told
// of.
func Poll(timeout, interval time.Duration, ok func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !ok() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(interval) // polling with a deadline
	}
	return true
}
