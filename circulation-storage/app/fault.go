package app

import (
	"log/slog"
	"os"
)

// outboxFault is what OUTBOX_FAULT has the relay do after publishing a
// batch and before marking it published, for the tests that prove the
// broker drops what is published again and that a leader that resumes
// after losing its lead publishes nothing more: exit-after-publish ends
// the process with status 3, stop-after-publish freezes it (SIGSTOP, as a
// paused VM or a hung process would be) until it is sent SIGCONT.
func outboxFault(fault string, logger *slog.Logger) func(seq int64) {
	switch fault {
	case "exit-after-publish":
		return func(seq int64) {
			logger.Error("outbox relay: OUTBOX_FAULT=exit-after-publish: exiting before marking published", slog.Int64("seq", seq))
			os.Exit(3)
		}
	case "stop-after-publish":
		stopped := false
		return func(seq int64) {
			if stopped {
				return
			}
			stopped = true
			logger.Error("outbox relay: OUTBOX_FAULT=stop-after-publish: stopping before marking published", slog.Int64("seq", seq))
			stopSelf()
		}
	}
	return nil
}
