package waiting

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/jackc/pgx/v5"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/circulation-storage/locksql"
)

// ReleaseChannel is the PostgreSQL notification channel on which every
// release of a check-out lock is announced, by the releasing transaction
// itself (see locksql.Announce), with the payload "<tenant>:<userId>".
const ReleaseChannel = locksql.ReleaseChannel

// ListenerHandlers are told what the listener hears.
type ListenerHandlers struct {
	// Released is called for each release announced.
	Released func(t storage.Tenant, userID string)
	// Purged, when set, is called for each purge of a tenant announced.
	Purged func(t storage.Tenant)
	// Listening is called with true once the listener receives
	// notifications, and with false when it stops.
	Listening func(up bool)
	// Reconnecting is called before each attempt to listen again after a
	// failure.
	Reconnecting func()
}

// Listener receives the release notifications of every tenant, and the
// tenants' purges, on one
// dedicated connection, outside the pool: a pooled connection goes back to
// the pool between statements, and a LISTEN must stay on its session. It
// reconnects with backoff when the connection fails, and checks an idle
// connection now and then, since a read alone cannot tell a silent
// connection from a lost one.
type Listener struct {
	connString string
	logger     *slog.Logger
	h          ListenerHandlers
	// idleCheck is how long a quiet connection is trusted before a ping.
	idleCheck time.Duration
}

// NewListener returns a listener on the database at connString (which may
// differ from the pool's: behind a transaction-mode pooler LISTEN needs a
// direct connection).
func NewListener(connString string, logger *slog.Logger, h ListenerHandlers) *Listener {
	return &Listener{connString: connString, logger: logger, h: h, idleCheck: 10 * time.Second}
}

// Run listens until ctx is done.
func (l *Listener) Run(ctx context.Context) {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval, b.MaxElapsedTime = 50*time.Millisecond, 5*time.Second, 0
	for {
		err := l.listen(ctx, b.Reset)
		l.h.Listening(false)
		if ctx.Err() != nil {
			return
		}
		wait := b.NextBackOff()
		l.logger.WarnContext(ctx, "lock release listener lost its connection; waiters poll until it is back",
			slog.Any("error", err), slog.Duration("retry_in", wait))
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		l.h.Reconnecting()
	}
}

// listen connects, listens and dispatches notifications until the
// connection fails or ctx ends. connected is called once listening.
func (l *Listener) listen(ctx context.Context, connected func()) error {
	cfg, err := pgx.ParseConfig(l.connString)
	if err != nil {
		return fmt.Errorf("parse listener connection string: %w", postgres.Redact(err))
	}
	cfg.ConnectTimeout = postgres.ConnectTimeout(cfg.ConnectTimeout)
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	if cfg.RuntimeParams["application_name"] == "" {
		// Named in pg_stat_activity, unless the connection string names it.
		cfg.RuntimeParams["application_name"] = "circulation-storage-listener"
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("connect: %w", postgres.Redact(err))
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+ReleaseChannel+"; LISTEN "+postgres.PurgeChannel); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	connected()
	l.h.Listening(true)
	l.logger.InfoContext(ctx, "lock release listener listening", slog.String("channel", ReleaseChannel))
	for {
		wctx, cancel := context.WithTimeout(ctx, l.idleCheck)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case err == nil && n.Channel == postgres.PurgeChannel:
			l.purged(n.Payload)
		case err == nil:
			l.dispatch(n.Payload)
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, context.DeadlineExceeded):
			// Quiet for a while: make sure the connection still works.
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := conn.Ping(pctx)
			cancel()
			if err != nil {
				return fmt.Errorf("ping: %w", err)
			}
		default:
			return err
		}
	}
}

// purged hands one purge's payload, the tenant, to Purged.
func (l *Listener) purged(payload string) {
	t, err := storage.ParseTenant(payload)
	if err != nil {
		l.logger.Warn("tenant purge notification not understood", slog.String("payload", payload))
		return
	}
	if l.h.Purged != nil {
		l.h.Purged(t)
	}
}

// dispatch hands one payload, "<tenant>:<userId>", to Released.
func (l *Listener) dispatch(payload string) {
	tenant, userID, ok := strings.Cut(payload, ":")
	t, err := storage.ParseTenant(tenant)
	if !ok || err != nil {
		l.logger.Warn("lock release notification not understood", slog.String("payload", payload))
		return
	}
	l.h.Released(t, userID)
}
