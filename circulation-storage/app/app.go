// Package app is circulation-storage's process: configuration from the
// environment, the database, the HTTP server and the background work
// (sweeper, release listener, events relay), wired once. The command
// runs it; storagetest runs it in-process for other modules' tests.
package app

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/circulation-storage/internal/accounts"
	"github.com/checkoutlock/circulation-storage/internal/calendars"
	"github.com/checkoutlock/circulation-storage/internal/feesfines"
	"github.com/checkoutlock/circulation-storage/internal/httpapi"
	"github.com/checkoutlock/circulation-storage/internal/lending"
	"github.com/checkoutlock/circulation-storage/internal/locks"
	"github.com/checkoutlock/circulation-storage/internal/notices"
	"github.com/checkoutlock/circulation-storage/internal/outbox"
	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/circulation-storage/internal/presence"
	"github.com/checkoutlock/circulation-storage/internal/recordstore"
	"github.com/checkoutlock/circulation-storage/internal/sample"
	"github.com/checkoutlock/circulation-storage/internal/sweeper"
	"github.com/checkoutlock/circulation-storage/internal/tenants"
	"github.com/checkoutlock/circulation-storage/internal/waiting"
	"github.com/checkoutlock/circulation-storage/login"
	"github.com/checkoutlock/circulation-storage/relay"
	"github.com/checkoutlock/config"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/serverkit"
	"github.com/checkoutlock/serverkit/auth"
	"github.com/checkoutlock/serverkit/tracing"
)

// Run starts the service and blocks until ctx is done, then shuts down
// gracefully: the command's whole life, and what tests start in-process
// (storagetest) so they run the very wiring the command runs. When
// listening is not nil, the bound address is sent on it once the server
// accepts connections (tests pass HTTP_ADDR=127.0.0.1:0).
func Run(ctx context.Context, args []string, environ map[string]string, stdout io.Writer, listening chan<- string) error {
	cfg, logger, err := serverkit.Start("circulation-storage", args, environ, stdout, config.LoadStorage)
	if err != nil {
		return err
	}
	keys, err := config.ParseModuleKeys(cfg.TrustedModules)
	if err != nil {
		return err
	}
	var trusted []auth.TrustedModule
	for _, k := range keys {
		m, err := auth.LoadTrustedModule(k.Module, k.File, schemas.ModulePermissionsOf)
		if err != nil {
			return err
		}
		trusted = append(trusted, m)
	}
	authn, err := serverkit.NewGuard(ctx, schemas.ServiceStorage, cfg.Auth, cfg.Warnings(), trusted, logger)
	if err != nil {
		return err
	}

	var statements pgx.QueryTracer
	if tracing.On() {
		statements = postgres.StatementTracer()
	}
	db, err := postgres.Open(ctx, cfg.Database.ConnString(), postgres.PoolConfig{MaxConns: cfg.Database.MaxConns,
		MaxConnLifetime: cfg.Database.MaxConnLifetime, LockCommit: cfg.LockSynchronousCommit, NoOutbox: cfg.Outbox == "off",
		IdleInTransaction: cfg.RequestTimeout, Logger: logger, Tracer: statements})
	if err != nil {
		return err
	}
	// The pool closes last, once nothing that uses it runs any more (the
	// defers below run before this one).
	defer db.Close()
	pingCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	if err := db.Ping(pingCtx); err != nil {
		// Not fatal: the pool reconnects, and readiness says when it has.
		logger.Warn("database not reachable yet", slog.Any("error", err))
	} else if n, err := tenants.DecodeLockFeatures(pingCtx, db); err != nil {
		// Not fatal either: the next tenant operation decodes them; until
		// then a check-out's write takes the environment's lock feature
		// for an entry not decoded yet. Before migration 12 there is
		// nothing to decode.
		logger.Warn("decoding the lock settings entries", slog.Any("error", err))
	} else if n > 0 {
		logger.Info("lock settings entries decoded", slog.Int("entries", n))
	}
	cancel()

	sch, err := schemas.Load()
	if err != nil {
		return err
	}
	metrics := httpapi.NewMetrics()
	metrics.MustRegister(postgres.NewPoolCollector(db))
	// Storage applies the circulation rules and the lock setting itself,
	// whoever calls: in validation and in the check-out's write alike.
	policy := lending.Policy{LockFeatureDefault: cfg.CheckoutLockFeatureEnabled,
		EnforceUnscopedItemLimit: cfg.ItemLimitWithoutCriteria == "enforce", OfflineGrace: cfg.KioskOfflineGrace}
	rules := lending.NewRules(db, policy)
	// The services tell the waiters of the releases they make; the waiters
	// are made after them, from the locks.
	var waiters *waiting.Waiters
	released := postgres.OnRelease(func(t storage.Tenant, userID string) { waiters.Notify(t, userID) })
	recordService := recordstore.NewRecords(db)
	loans := lending.NewLoans(db, policy, released, postgres.LockHistory(cfg.LockHistory, metrics))
	lockService := locks.NewLocks(db, postgres.LockHistory(cfg.LockHistory, metrics), released)
	waiters = waiting.NewWaiters(lockService, metrics, waiting.WaitConfig{
		Poll: cfg.LockWaitPoll, PollUnlistened: cfg.LockWaitPollUnlistened,
		MaxWaiters: cfg.LockMaxWaiters, StatementTimeout: cfg.RequestTimeout,
	})
	lockMaxWait := time.Duration(cfg.LockMaxWaitMs) * time.Millisecond
	tenantService := tenants.NewTenants(db, logger, sample.LoadData)
	loginCfg := login.Config{Secret: cfg.Auth.JWTSecret,
		AccessTTL: cfg.LoginAccessTTL, RefreshTTL: cfg.LoginRefreshTTL,
		MaxFailures: cfg.LoginMaxFailures, MaxAddressFailures: cfg.LoginMaxAddressFailures,
		FailureWindow: cfg.LoginLockout, Lockout: cfg.LoginLockout,
		AccountRate: cfg.LoginAccountRate, KnownFor: cfg.LoginKnownFor, Hashes: loginHashes, BusyWait: cfg.LoginBusyWait,
		Checked: metrics.SecretChecked, Refused: metrics.AttemptRefused}
	// Patrons' PINs are kept whether or not people sign in here: a
	// self-check machine asks for them either way.
	pins := login.New(accounts.NewAccounts(db), loginCfg)
	if authn.Mode == auth.JWT {
		// A token of a session that has ended (logout, a refresh token
		// used twice, its account disabled or deleted) is refused.
		authn.Sessions = auth.NewSessions(pins.SessionAlive)
	}
	var signIn *login.Service
	if cfg.LoginOn() {
		signIn = pins
	}
	// The background work (sweeper, release listener) runs until the HTTP
	// server is down; stopBackground ends it and waits for it.
	var wg sync.WaitGroup
	sweepCtx, stopSweeper := context.WithCancel(context.WithoutCancel(ctx))
	stopBackground := func() {
		stopSweeper()
		wg.Wait()
	}
	defer stopBackground()
	// The outbox relay: one instance of those on the database publishes;
	// an instance that wrote events wakes it.
	outboxMetrics := metrics.Outbox()
	var outboxRelay *relay.Relay
	var broker *relay.NATS
	if cfg.NATSURL != "" {
		broker, err = relay.DialNATS(sweepCtx, relay.NATSConfig{URL: cfg.NATSURL, Stream: cfg.NATSStream, Prefix: cfg.NATSSubjectPrefix,
			Duplicates: cfg.NATSDuplicateWindow, MaxAge: cfg.NATSMaxAge, Replicas: cfg.NATSStreamReplicas, Logger: logger})
		if err != nil {
			return err
		}
		outboxRelay = relay.New(outbox.NewOutbox(cfg.Database.ConnString(), cfg.OutboxLeadTimeout), broker, outboxMetrics,
			relay.Config{Batch: cfg.OutboxBatch, Poll: cfg.OutboxPoll, Linger: cfg.OutboxLinger, Retention: cfg.OutboxRetention,
				Retry: 5 * time.Second, LeadTimeout: cfg.OutboxLeadTimeout, AfterPublish: outboxFault(cfg.OutboxFault, logger)},
			logger)
	}
	var announcer *relay.Announcer
	var written func()
	if cfg.Outbox != "off" {
		announcer = relay.NewAnnouncer(outboxRelay, func(ctx context.Context) error { return outbox.Announce(ctx, db) },
			func(ctx context.Context) (bool, error) { return outbox.Led(ctx, db) }, logger)
		written = announcer.Written
	}
	server := httpapi.New(httpapi.Config{
		Config:         serverkit.ConfigOf(cfg.Server, authn),
		LockDefaultTTL: time.Duration(cfg.LockDefaultTTLMs) * time.Millisecond,
		LockMaxTTL:     time.Duration(cfg.LockMaxTTLMs) * time.Millisecond,
		LockMaxWait:    lockMaxWait,
		MaxPageBytes:   cfg.MaxPageBytes,
		EventsWritten:  written,
		// The one home of the lock default: storage's write applies it
		// (policy), and every answer tells circulation of it.
		LockFeatureDefault: cfg.CheckoutLockFeatureEnabled,
	}, httpapi.Services{
		Locks:      lockService,
		Waiters:    waiters,
		Tenants:    tenantService,
		Records:    recordService,
		Loans:      loans,
		Rules:      rules,
		Counter:    rules,
		CheckOuts:  rules,
		Writes:     db,
		Presence:   presence.New(db),
		Anonymizer: lending.NewAnonymizer(db),
		Queues:     recordService,
		FeeFines:   feesfines.NewActions(db),
		Calendars:  calendars.New(db),
		Ready:      db.Ping,
		Login:      signIn,
		Pins:       pins,
	}, sch, metrics, logger)

	ln, err := serverkit.Bind(cfg.Server)
	if err != nil {
		return err
	}
	// A client that does not read its answer is cut off a little after
	// the longest a request can take.
	srv := server.HTTP(cfg.RequestTimeout + lockMaxWait + 5*time.Second)

	sweep := sweeper.NewSweeper(db, logger, sweeper.SweeperConfig{BatchSize: cfg.SweepBatchSize, OnDeleted: metrics.SweeperDeleted, OnPass: metrics.SweeperPass, OnWork: metrics.SweeperWork,
		History: cfg.LockHistory, Retention: cfg.LockHistoryRetention, MaxEvents: cfg.LockHistoryMaxEvents,
		KnownFor: cfg.LoginKnownFor, LoginWindow: cfg.LoginLockout})
	wg.Add(2)
	go func() {
		defer wg.Done()
		sweep.Run(sweepCtx, cfg.SweepInterval)
	}()
	noticeRunner := &notices.Runner{DB: db, Logger: logger, OnRound: metrics.NoticeRound,
		Config: notices.SendConfig{Batch: cfg.NoticeBatch, MaxAttempts: cfg.NoticeMaxAttempts, FirstRetry: cfg.NoticeFirstRetry, OnSent: metrics.NoticeSettled}}
	if cfg.NoticeSMTPAddr != "" {
		mailer := &notices.SMTP{Addr: cfg.NoticeSMTPAddr, From: cfg.NoticeFrom}
		defer mailer.Close()
		noticeRunner.Mailer = mailer
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		noticeRunner.Run(sweepCtx, cfg.NoticeInterval)
	}()
	if outboxRelay != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer broker.Close()
			outboxRelay.Run(sweepCtx)
		}()
	}
	if announcer != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			announcer.Run(sweepCtx)
		}()
	}
	// The release listener wakes this instance's waiters when any instance
	// releases a patron's lock, and forgets a tenant any instance purged.
	listener := waiting.NewListener(cfg.ListenConnString(false), logger, waiting.ListenerHandlers{
		Released: waiters.Notify,
		Purged:   tenantService.Forget,
		Listening: func(up bool) {
			if up {
				// Purges announced while it was not listening were missed.
				tenantService.ForgetAll()
			}
			waiters.Listening(up)
			metrics.ListenerUp(up)
		},
		Reconnecting: metrics.ListenerReconnecting,
	})
	go func() {
		defer wg.Done()
		listener.Run(sweepCtx)
	}()

	if err := serverkit.Listen(ctx, srv, ln, cfg.Server, logger, listening); err != nil {
		waiters.Close()
		return err
	}
	return shutdown(logger, srv, waiters, stopBackground, cfg.ShutdownTimeout)
}

// shutdown ends what run started, in order: the waiting acquisitions
// answer at once (503 SHUTTING_DOWN) instead of holding the shutdown up
// for as long as LOCK_MAX_WAIT_MS; the HTTP server stops accepting and
// lets the requests in flight finish within timeout (SHUTDOWN_TIMEOUT),
// and closes their connections when they do not; the background work
// stops. The database pool, deferred by run, closes after it all. A
// shutdown whose requests outlived timeout is an error: they were cut off.
func shutdown(logger *slog.Logger, srv *http.Server, waiters *waiting.Waiters, stopBackground func(), timeout time.Duration) error {
	logger.Info("shutting down", slog.Duration("timeout", timeout))
	waiters.Close()
	failed := serverkit.Shutdown(srv, timeout, logger)
	stopBackground()
	if failed != nil {
		return failed
	}
	logger.Info("stopped")
	return nil
}

// loginHashes bounds the password hashes computed at once: each holds
// argon2id's 19 MiB.
const loginHashes = 4
