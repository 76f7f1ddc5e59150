// Command circulation serves check-out and check-in by barcode for any number
// of tenants, keeping all state in circulation-storage: run as many instances
// as you like behind a load balancer. Configuration comes from the
// environment; see the README's table.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/google/uuid"

	"github.com/caarlos0/env/v10"

	"github.com/checkoutlock/circulation"
	"github.com/checkoutlock/circulation/internal/httpapi"
	"github.com/checkoutlock/circulation/internal/storageclient"
	"github.com/checkoutlock/config"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/auth"
	"github.com/checkoutlock/schemas/locksettings"
	"github.com/checkoutlock/schemas/serve"
)

func main() {
	// Request, lock and loan ids are random UUIDs, several per check-out:
	// drawn from a buffer of crypto/rand bytes instead of a system call
	// each.
	uuid.EnableRandPool()
	config.TuneRuntime()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], env.ToMap(os.Environ()), os.Stdout, nil); err != nil {
		fmt.Fprintf(os.Stderr, "circulation: %v\n", err)
		os.Exit(1)
	}
}

// run starts the service and blocks until ctx is done, then shuts down
// gracefully. When listening is not nil, the bound address is sent on it.
func run(ctx context.Context, args []string, environ map[string]string, stdout io.Writer, listening chan<- string) error {
	flags := flag.NewFlagSet("circulation", flag.ContinueOnError)
	flags.SetOutput(stdout)
	flags.Usage = func() {
		fmt.Fprintln(stdout, "usage: circulation\n\nConfigured by environment variables; see README.md.")
	}
	if err := flags.Parse(args); err != nil {
		return err
	}
	cfg, err := config.LoadCirculation(environ)
	if err != nil {
		return err
	}
	logger := slog.New(httpapi.LogHandler(slog.NewJSONHandler(stdout, config.LogOptions(cfg.LogLevel))))
	logger.Info("starting", slog.Any("config", cfg))
	authn, err := auth.NewGuard(ctx, auth.GuardConfig{Mode: cfg.Auth.Mode, Keys: auth.KeyConfig{Secret: cfg.Auth.JWTSecret,
		PublicKeyFile: cfg.Auth.JWTPublicKeyFile, JWKSURL: cfg.Auth.JWKSURL}, Service: schemas.ServiceCirculation,
		Warnings: cfg.Warnings()}, logger)
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
			Enabled:        cfg.CheckoutLockFeatureEnabled,
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
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.HTTPAddr, err)
	}
	svc := circulation.NewService(storage, settings, metrics, logger, circulation.ServiceConfig{
		ReleaseTimeout: cfg.ReleaseTimeout,
		WaitAtStorage:  cfg.LockWaitAtStorage,
		Instance:       instanceName(cfg.InstanceName, ln.Addr()),
	})
	server := httpapi.New(httpapi.Config{MaxBodyBytes: cfg.MaxBodyBytes, MaxHeaderBytes: cfg.MaxHeaderBytes,
		RequestTimeout: cfg.RequestTimeout, Auth: authn, Module: module, SIP2AdminURLs: cfg.SIP2AdminURLs,
		Clients: serve.NewClients(cfg.Serving.TrustedProxies), SummaryRate: cfg.PatronSummaryRate},
		httpapi.Services{
			Circulation: svc,
			Settings:    settings,
			Storage:     storage,
			Console:     storage,
			Pass:        storage,
			Ready:       storage.Ready,
		}, sch, metrics, logger)

	srv := &http.Server{
		Handler:           server,
		ReadHeaderTimeout: 5 * time.Second,
		// Bodies are read on the request's deadline by the server's
		// middleware. A client that does not read its answer is cut off
		// once the longest a request can take has passed: its timeout,
		// the write phase that outlives it, and the lock's release.
		WriteTimeout:   cfg.RequestTimeout + circulation.WriteTimeout + cfg.ReleaseTimeout + 5*time.Second,
		IdleTimeout:    2 * time.Minute,
		MaxHeaderBytes: config.NetHTTPMaxHeaderBytes,
		ErrorLog:       slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- serve.Serve(srv, ln, cfg.Serving.TLSCertFile, cfg.Serving.TLSKeyFile) }()
	logger.Info("listening", slog.String("addr", ln.Addr().String()), slog.Bool("tls", cfg.Serving.TLS()))
	if listening != nil {
		listening <- ln.Addr().String()
	}
	select {
	case err := <-serveErr:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	logger.Info("shutting down", slog.Duration("timeout", cfg.ShutdownTimeout))
	// In-flight check-outs finish, releasing their locks, before exit.
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		// Check-outs still in flight are cut off; a lock one holds and
		// has not released yet expires at its TTL.
		logger.Error("check-outs still in flight after the shutdown timeout; closing their connections",
			slog.Duration("timeout", cfg.ShutdownTimeout), slog.Any("error", err))
		if cerr := srv.Close(); cerr != nil && !errors.Is(cerr, http.ErrServerClosed) {
			logger.Warn("closing the HTTP server", slog.Any("error", cerr))
		}
		return fmt.Errorf("shutdown: check-outs still in flight after SHUTDOWN_TIMEOUT (%s) were cut off: %w", cfg.ShutdownTimeout, err)
	}
	// The storage client closes after this (deferred above): no check-out
	// uses it any more.
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
