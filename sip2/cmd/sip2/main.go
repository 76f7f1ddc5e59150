// Command sip2 is the SIP2 door: self-check machines speak SIP2 2.00 to it
// over TCP (TLS unless its configuration says plain), and it checks items
// out and in through circulation, under the patron's lock. Its listeners
// are in the file SIP2_CONFIG names (reloaded on SIGHUP); the rest of its
// configuration comes from the environment (docs/sip2.md).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/caarlos0/env/v10"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/checkoutlock/config"
	"github.com/checkoutlock/serverkit/tracing"
	"github.com/checkoutlock/sip2/internal/circ"
	"github.com/checkoutlock/sip2/internal/server"
)

func main() {
	config.TuneRuntime()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	if err := run(ctx, env.ToMap(os.Environ()), os.Stdout, hup); err != nil {
		fmt.Fprintf(os.Stderr, "sip2: %v\n", err)
		os.Exit(1)
	}
}

// run starts the door and blocks until ctx is done; every signal on
// reload reads the listeners' file again.
func run(ctx context.Context, environ map[string]string, stdout io.Writer, reload <-chan os.Signal) error {
	cfg, err := config.LoadSIP2(environ)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewJSONHandler(stdout, config.LogOptions(cfg.LogLevel)))
	listeners, err := server.LoadConfig(cfg.ConfigFile)
	if err != nil {
		return err
	}
	logger.Info("starting", slog.Any("config", cfg))
	if err := tracing.Start(ctx, "sip2", cfg.OTLPEndpoint); err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = tracing.Stop(sctx)
	}()
	roots, err := config.CertPool(cfg.CirculationCAFile)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	srv := server.New(server.Options{MaxLine: cfg.MaxLine, MaxConnections: cfg.MaxConnections,
		MaxConnectionsPerAddress: cfg.MaxConnectionsPerAddress, LoginTimeout: cfg.LoginTimeout, IdleTimeout: cfg.IdleTimeout,
		LineTimeout: cfg.LineTimeout, WriteTimeout: cfg.WriteTimeout, CallTimeout: cfg.CallTimeout,
		OfflineWithin: cfg.OfflineWithin, OfflineGrace: cfg.OfflineGrace,
		PresenceEvery: cfg.PresenceEvery},
		circ.New(cfg.CirculationURL, cfg.CallTimeout, roots), logger, server.NewMetrics(reg))
	if err := srv.Apply(listeners); err != nil {
		return err
	}

	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	health := func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"status": "ok", "listeners": srv.Listeners()})
	}
	mux.HandleFunc("GET /admin/health", health)
	mux.HandleFunc("GET /admin/ready", health)
	mux.HandleFunc("GET /admin/kiosks", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"kiosks": srv.Kiosks(r.URL.Query().Get("tenant"))})
	})
	admin := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 10 * time.Second, MaxHeaderBytes: 16 << 10}
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return err
	}
	go func() {
		if err := admin.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("admin listener", slog.Any("error", err))
		}
	}()
	logger.Info("admin listening", slog.String("address", ln.Addr().String()))

	for {
		select {
		case <-reload:
			next, err := server.LoadConfig(cfg.ConfigFile)
			if err == nil {
				err = srv.Apply(next)
			}
			if err != nil {
				logger.Error("reload refused: the listeners stay as they were", slog.Any("error", err))
				continue
			}
			logger.Info("reloaded", slog.Int("listeners", len(next.Listeners)))
		case <-ctx.Done():
			logger.Info("shutting down", slog.Duration("timeout", cfg.ShutdownTimeout))
			// Every connection ends, its message answered and its kiosk
			// logged out, before the process exits: a session not ended
			// would live on at storage until its refresh token expires.
			sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
			defer cancel()
			err := srv.Shutdown(sctx)
			_ = admin.Shutdown(sctx)
			if err != nil {
				return fmt.Errorf("shutdown: connections still open after SHUTDOWN_TIMEOUT (%s) were cut off: %w", cfg.ShutdownTimeout, err)
			}
			logger.Info("stopped")
			return nil
		}
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
