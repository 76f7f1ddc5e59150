package notices

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/checkoutlock/circulation-storage/internal/postgres"
)

// noticeLock is the advisory lock a round holds: of several instances,
// one at a time schedules and sends.
const noticeLock int64 = 0x636f6c5f6e6f7469 // "col_noti"

// roundTimeout bounds how long a round holds the lock without using the
// connection that holds it (postgres.TryLead): an instance frozen in the
// middle of a round lets another go on after it.
const roundTimeout = 30 * time.Second

// maxBatches bounds one round: at most this many batches scheduled and
// sent; what is left waits for the next round.
const maxBatches = 20

// Runner schedules and sends notices every interval.
type Runner struct {
	DB     *postgres.DB
	Logger *slog.Logger
	// Mailer sends the notices; nil, none is sent (they are scheduled,
	// and wait).
	Mailer Mailer
	Config SendConfig
	// OnRound, when set, is told of each round this instance led: how
	// many changes it scheduled from and notices it sent or settled, and
	// its failure.
	OnRound func(scheduled, sent int, err error)
}

// Run runs a round every interval until ctx ends.
func (r *Runner) Run(ctx context.Context, interval time.Duration) {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			scheduled, sent, led, err := r.Round(ctx)
			if err != nil && ctx.Err() == nil {
				r.Logger.WarnContext(ctx, "notices: a round failed; it is tried again at the next", slog.Any("error", err))
			}
			if led && r.OnRound != nil && ctx.Err() == nil {
				r.OnRound(scheduled, sent, err)
			}
		}
	}
}

// Round schedules the notices of the changes recorded, then sends those
// due, a batch at a time, when no other instance is doing it (led).
func (r *Runner) Round(ctx context.Context) (scheduled, sent int, led bool, err error) {
	release, led, err := postgres.TryLead(ctx, r.DB.LeadPool, noticeLock, roundTimeout)
	if err != nil || !led {
		return 0, 0, false, err
	}
	defer release()
	// The lead's session is idle while the round works on others: the
	// round ends before PostgreSQL would end it.
	until := time.Now().Add(roundTimeout / 2)
	defer func() {
		if postgres.TablesMissing(err) {
			// No tenant was initialised on this database yet.
			err = nil
		}
	}()
	batch := max(1, r.Config.Batch)
	var errs []error
	for range maxBatches {
		n, err := Schedule(ctx, r.DB, batch)
		scheduled += n
		if err != nil {
			errs = append(errs, err)
		}
		if err != nil || n < batch || time.Now().After(until) {
			break
		}
	}
	if r.Mailer == nil {
		return scheduled, 0, true, errors.Join(errs...)
	}
	for range maxBatches {
		n, err := Send(ctx, r.DB, r.Mailer, r.Config, until)
		sent += n
		if err != nil {
			errs = append(errs, err)
		}
		if err != nil || n < batch || time.Now().After(until) {
			break
		}
	}
	return scheduled, sent, true, errors.Join(errs...)
}
