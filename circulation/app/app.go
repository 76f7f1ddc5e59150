// Package app is the circulation service's process: configuration from
// the environment, its authentication (and, in jwt mode, its own module
// key for calling storage), the storage client, the domain service and
// the HTTP server, wired once. The command runs it; tests run it
// in-process.
package app

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/checkoutlock/circulation"
	"github.com/checkoutlock/circulation/internal/httpapi"
	"github.com/checkoutlock/circulation/internal/storageclient"
	"github.com/checkoutlock/config"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/locksettings"
	"github.com/checkoutlock/serverkit"
	"github.com/checkoutlock/serverkit/auth"
)

// Run starts the service and blocks until ctx is done, then shuts down
// gracefully: the command's whole life, and what tests start in-process
// so they run the very wiring the command runs. When listening is not
// nil, the bound address is sent on it once the server accepts
// connections (tests pass HTTP_ADDR=127.0.0.1:0).
func Run(ctx context.Context, args []string, environ map[string]string, stdout io.Writer, listening chan<- string) error {
	cfg, logger, err := serverkit.Start("circulation", args, environ, stdout, config.LoadCirculation)
	if err != nil {
		return err
	}
	authn, err := serverkit.NewGuard(ctx, schemas.ServiceCirculation, cfg.Auth, cfg.Warnings(), nil, logger)
	if err != nil {
		return err
	}
	// In jwt mode circulation calls storage as itself, with tokens it signs.
	var module *auth.ModuleSigner
	if authn.Mode == auth.JWT {
		if module, err = auth.NewModuleSigner(schemas.ServiceCirculation, schemas.ServiceStorage, cfg.ModuleKeyFile, cfg.ModuleTokenTTL); err != nil {
			return err
		}
	}

	sch, err := schemas.Load()
	if err != nil {
		return err
	}
	roots, err := config.CertPool(cfg.StorageCAFile)
	if err != nil {
		return err
	}
	storage := storageclient.New(cfg.StorageURL, cfg.StorageTimeout, roots)
	// The storage client closes last, once no check-out uses it any more.
	defer storage.Close()
	storage.SetLogger(logger)
	if module != nil {
		// A token of a sign-in whose session has ended (logout, a refresh
		// token used twice, its account disabled or deleted) is refused:
		// storage, which keeps the sessions, is asked, as circulation.
		authn.Sessions = auth.NewSessions(func(ctx context.Context, tenant, id string) (bool, error) {
			token, err := module.Token(tenant, "", "session check", []string{schemas.PermissionSessionGet})
			if err != nil {
				return false, err
			}
			return storage.SessionAlive(circulation.WithOkapi(ctx, circulation.Okapi{Tenant: tenant, Token: token}), id)
		})
	}
	metrics := httpapi.NewMetrics()
	settings := circulation.NewSettings(storage, circulation.SettingsConfig{
		Env: circulation.LockSettings{
			LockTTL:        time.Duration(cfg.LockTTLMs) * time.Millisecond,
			RetryIntervals: cfg.RetryIntervalMs.Durations(),
		},
		TTL: cfg.SettingsCacheTTL,
		// A check-out's waits for the lock end a second before its deadline.
		Bounds:     locksettings.DefaultBounds(max(cfg.RequestTimeout-time.Second, cfg.RequestTimeout/2)),
		MaxTenants: cfg.SettingsCacheTenants,
	}, logger)
	// The port listened on names this instance in its locks, unless
	// configured: it is bound before the service is built.
	ln, err := serverkit.Bind(cfg.Server)
	if err != nil {
		return err
	}
	svc := circulation.NewService(storage, settings, metrics, logger, circulation.ServiceConfig{
		ReleaseTimeout: cfg.ReleaseTimeout,
		SettleTimeout:  cfg.SettleTimeout,
		WaitAtStorage:  cfg.LockWaitAtStorage,
		Instance:       instanceName(cfg.InstanceName, ln.Addr()),
	})
	server := httpapi.New(httpapi.Config{Config: serverkit.ConfigOf(cfg.Server, authn),
		Module: module, SIP2AdminURLs: cfg.SIP2AdminURLs, SummaryRate: cfg.PatronSummaryRate,
		SummaryAccountSessions: cfg.PatronSummaryAccountSessions,
		TraceLink:              cfg.TraceLink()},
		httpapi.Services{
			Circulation: svc,
			Settings:    settings,
			Storage:     storage,
			Console:     storage,
			Pass:        storage,
			Presence:    storage,
			Ready:       storage.Ready,
		}, sch, metrics, logger)
	// A client that does not read its answer is cut off once the longest
	// a request can take has passed: its timeout, the write phase that
	// outlives it, and the lock's release.
	srv := server.HTTP(cfg.RequestTimeout + circulation.WriteTimeout + cfg.ReleaseTimeout + 5*time.Second)
	if err := serverkit.Listen(ctx, srv, ln, cfg.Server, logger, listening); err != nil {
		return err
	}
	logger.Info("shutting down", slog.Duration("timeout", cfg.ShutdownTimeout))
	// In-flight check-outs finish, releasing their locks, before exit.
	if err := serverkit.Shutdown(srv, cfg.ShutdownTimeout, logger); err != nil {
		return err
	}
	logger.Info("stopped")
	return nil
}

// instanceName is the configured name, or this host and the port listened
// on.
func instanceName(configured string, addr net.Addr) string {
	if configured != "" {
		return configured
	}
	host, err := os.Hostname()
	if err != nil {
		host = "circulation"
	}
	if tcp, ok := addr.(*net.TCPAddr); ok {
		return net.JoinHostPort(host, strconv.Itoa(tcp.Port))
	}
	return host
}
