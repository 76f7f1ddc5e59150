package serverkit

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/caarlos0/env/v10"
	"github.com/google/uuid"

	"github.com/checkoutlock/config"
	"github.com/checkoutlock/serverkit/auth"
	"github.com/checkoutlock/serverkit/tracing"
)

// A service's process, from its command to its shutdown: Main (the
// command), and as both services' Run take it, Start (the arguments, the
// configuration, the logger), NewGuard (who may call), ConfigOf (the
// server's configuration), Bind and Listen (the listener, serving),
// Shutdown.

// Run is a service's whole life (its app package's Run): it starts the
// service and blocks until ctx is done, then shuts it down. When listening
// is not nil, the bound address is sent on it once the server accepts
// connections.
type Run func(ctx context.Context, args []string, environ map[string]string, stdout io.Writer, listening chan<- string) error

// Main is a service's command: ids (request, lock and loan ids, several
// per check-out) drawn from a buffer of random bytes instead of a system
// call each, the runtime tuned (config.TuneRuntime), run with the
// process's arguments and environment until SIGINT or SIGTERM, and exit
// code 1, the error on stderr, when run fails.
func Main(name string, run Run) {
	uuid.EnableRandPool()
	config.TuneRuntime()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], env.ToMap(os.Environ()), os.Stdout, nil); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		stop()
		os.Exit(1)
	}
}

// Configuration is a service's configuration: it has the server's
// section (config.Server) and says how it is logged.
type Configuration interface {
	slog.LogValuer
	ServerConfig() config.Server
}

// Start begins a service's process: it takes no arguments (the
// environment configures the service; -h says so), reads the
// configuration from environ with load, and makes the service's logger
// (JSON on stdout at the configured level, every line logged with a
// request's context naming the request), which logs the configuration.
func Start[C Configuration](name string, args []string, environ map[string]string, stdout io.Writer,
	load func(map[string]string) (C, error)) (cfg C, logger *slog.Logger, err error) {
	flags := flag.NewFlagSet(name, flag.ContinueOnError)
	flags.SetOutput(stdout)
	flags.Usage = func() {
		fmt.Fprintf(stdout, "usage: %s\n\nConfigured by environment variables; see README.md.\n", name)
	}
	if err := flags.Parse(args); err != nil {
		return cfg, nil, err
	}
	if cfg, err = load(environ); err != nil {
		return cfg, nil, err
	}
	logger = slog.New(LogHandler(slog.NewJSONHandler(stdout, config.LogOptions(cfg.ServerConfig().LogLevel))))
	logger.Info("starting", slog.Any("config", cfg))
	if err := tracing.Start(context.Background(), name, cfg.ServerConfig().OTLPEndpoint); err != nil {
		return cfg, nil, err
	}
	return cfg, logger, nil
}

// NewGuard is the authentication the Auth section asks for (auth.NewGuard),
// for service, with the warnings of its configuration (a published
// development key in use) and the modules whose tokens it trusts.
func NewGuard(ctx context.Context, service string, cfg config.Auth, warnings []string, trusted []auth.TrustedModule,
	logger *slog.Logger) (auth.Guard, error) {
	return auth.NewGuard(ctx, auth.GuardConfig{Mode: cfg.Mode, Keys: auth.KeyConfig{Secret: cfg.JWTSecret,
		PublicKeyFile: cfg.JWTPublicKeyFile, JWKSURL: cfg.JWKSURL}, Service: service,
		TrustedModules: trusted, Warnings: warnings}, logger)
}

// ConfigOf is the server's configuration from the service's server
// section, with its authentication.
func ConfigOf(s config.Server, guard auth.Guard) Config {
	return Config{Auth: guard, Clients: NewClients(s.Serving.TrustedProxies), MaxBodyBytes: s.MaxBodyBytes,
		MaxHeaderBytes: s.MaxHeaderBytes, RequestTimeout: s.RequestTimeout}
}

// Bind listens on the section's address (HTTP_ADDR).
func Bind(s config.Server) (net.Listener, error) {
	ln, err := net.Listen("tcp", s.HTTPAddr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", s.HTTPAddr, err)
	}
	return ln, nil
}

// Listen serves srv on ln, HTTPS when the server section names a
// certificate and key, until ctx is done (nil) or serving fails (its
// error). Once it accepts connections it logs where, and sends the address
// on listening when that is not nil (tests listen on 127.0.0.1:0). When
// the section names a profile address (PROFILE_ADDR), Go's profiles are
// served there meanwhile (Profile).
//
// Before it serves, what start-up made and dropped is collected and its
// memory given back (startedUp).
func Listen(ctx context.Context, srv *http.Server, ln net.Listener, s config.Server, logger *slog.Logger,
	listening chan<- string) error {
	if s.ProfileAddr != "" {
		_, stop, err := Profile(s.ProfileAddr, logger)
		if err != nil {
			return err
		}
		defer stop()
	}
	startedUp()
	serveErr := make(chan error, 1)
	go func() { serveErr <- serve(srv, ln, s.Serving.TLSCertFile, s.Serving.TLSKeyFile) }()
	logger.Info("listening", slog.String("addr", ln.Addr().String()), slog.Bool("tls", s.Serving.TLS()))
	if listening != nil {
		listening <- ln.Addr().String()
	}
	select {
	case err := <-serveErr:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
		return nil
	}
}

// Profile serves Go's profiles (net/http/pprof's /debug/pprof/) on addr,
// a loopback address (config.Server.ProfileAddr says why), on a server of
// their own, apart from the API's routes, its middleware and its
// metrics, until stop. It logs where, as a warning, and returns it
// (bound: port 0 is a free one).
func Profile(addr string, logger *slog.Logger) (bound string, stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("profiles: listen on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	// A CPU profile or a trace takes the seconds asked to answer: no
	// write timeout; the headers' size and arrival and an idle
	// connection are bounded.
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute, MaxHeaderBytes: 64 << 10,
		ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Warn("the profiles' server stopped", slog.Any("error", err))
		}
	}()
	// A warning, logged at every level: whoever can reach the address
	// reads the profiles, without authentication.
	logger.Warn("serving profiles", slog.String("addr", ln.Addr().String()), slog.String("path", "/debug/pprof/"),
		slog.String("note", "unauthenticated, to the machine's own users (PROFILE_ADDR)"))
	return ln.Addr().String(), func() { _ = srv.Close() }, nil
}

// Shutdown stops srv: it stops accepting and lets the requests in flight
// finish within timeout (SHUTDOWN_TIMEOUT), and closes their connections
// when they do not. A shutdown whose requests outlived timeout is an
// error: they were cut off (a check-out's lock not yet released expires at
// its TTL).
func Shutdown(srv *http.Server, timeout time.Duration, logger *slog.Logger) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := srv.Shutdown(ctx)
	// The spans of the last requests go out before the process ends.
	if terr := tracing.Stop(ctx); terr != nil {
		logger.Warn("sending the last spans", slog.Any("error", terr))
	}
	if err == nil || errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	logger.Error("requests still in flight after the shutdown timeout; closing their connections",
		slog.Duration("timeout", timeout), slog.Any("error", err))
	if cerr := srv.Close(); cerr != nil && !errors.Is(cerr, http.ErrServerClosed) {
		logger.Warn("closing the HTTP server", slog.Any("error", cerr))
	}
	return fmt.Errorf("shutdown: requests still in flight after SHUTDOWN_TIMEOUT (%s) were cut off: %w", timeout, err)
}

// startedUp collects what start-up made and dropped and gives its memory
// back to the system, once, before the first request. In storage that is
// mostly the working memory of the argon2 hash that sign-ins without an
// account are timed against (login's argonMemory, 19 MiB), the schemas'
// compilation and the OpenAPI document made from them.
// Left to the collector, start-up's peak (storage's is some 20 MB live)
// sets a heap goal of three times it (config.GCPercent): the heap grows
// there under the first requests, most of it garbage, and the runtime
// then gives the memory back a little at a time, each return a system
// call and a flush of every core's address cache, under the first
// minutes of load.
func startedUp() { debug.FreeOSMemory() }

// serve serves srv on ln: HTTPS (TLS 1.2 or later) with the certificate
// and key files when they are given, plain HTTP otherwise.
func serve(srv *http.Server, ln net.Listener, certFile, keyFile string) error {
	if certFile == "" {
		return srv.Serve(ln)
	}
	srv.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	return srv.ServeTLS(ln, certFile, keyFile)
}
