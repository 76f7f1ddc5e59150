package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"

	storage "github.com/checkoutlock/circulation-storage"
)

// TestTryAgainAtOnce: what may succeed when tried again at once (a
// deadlock, a serialization conflict, a lost or refused session) is told
// apart from what would only fail again (a timeout, a full disk, a lock
// an operator's lock_timeout gave up on, a cancelled request, even while
// connecting, the data),
// however deeply the error is wrapped; and Interpret answers each as the
// caller should hear it.
func TestTryAgainAtOnce(t *testing.T) {
	t.Parallel()
	pg := func(code string) error { return &pgconn.PgError{Code: code, Message: "test"} }
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		name   string
		err    error
		atOnce bool
		code   string // Interpret's; "" where it leaves the error as it is (a 500)
	}{
		{"deadlock", pg(pgerrcode.DeadlockDetected), true, schemas.CodeDatabaseUnavailable},
		{"serialization conflict", pg(pgerrcode.SerializationFailure), true, schemas.CodeDatabaseUnavailable},
		{"connection failure", pg(pgerrcode.ConnectionFailure), true, schemas.CodeDatabaseUnavailable},
		{"administrator shutdown", pg(pgerrcode.AdminShutdown), true, schemas.CodeDatabaseUnavailable},
		{"cannot connect now", pg(pgerrcode.CannotConnectNow), true, schemas.CodeDatabaseUnavailable},
		{"deadlock, wrapped", fmt.Errorf("migrate: %w", pg(pgerrcode.DeadlockDetected)), true, schemas.CodeDatabaseUnavailable},
		{"deadlock, interpreted", storage.Unavailable(pg(pgerrcode.DeadlockDetected)), true, schemas.CodeDatabaseUnavailable},
		{"connection cut", fmt.Errorf("read: %w", io.ErrUnexpectedEOF), true, schemas.CodeDatabaseUnavailable},
		{"connection refused", connectError(t, context.Background()), true, schemas.CodeDatabaseUnavailable},
		{"connecting, the request cancelled", connectError(t, cancelled), false, schemas.CodeDatabaseUnavailable},
		{"statement timeout", pg(pgerrcode.QueryCanceled), false, schemas.CodeTimeout},
		{"disk full", pg(pgerrcode.DiskFull), false, schemas.CodeDatabaseUnavailable},
		{"lock timeout", pg(pgerrcode.LockNotAvailable), false, schemas.CodeDatabaseUnavailable},
		{"request cancelled", context.Canceled, false, schemas.CodeTimeout},
		{"request too slow", fmt.Errorf("query: %w", context.DeadlineExceeded), false, schemas.CodeTimeout},
		{"duplicate", pg(pgerrcode.UniqueViolation), false, schemas.CodeConflict},
		{"a bug", pg(pgerrcode.UndefinedColumn), false, ""},
		{"not the database's", errors.New("test"), false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if got := postgres.TryAgainAtOnce(c.err); got != c.atOnce {
				t.Errorf("TryAgainAtOnce(%v) = %t, want %t", c.err, got, c.atOnce)
			}
			got := postgres.Interpret(c.err, "")
			if c.code == "" {
				if got != c.err {
					t.Errorf("Interpret(%v) = %v, want the error as it is", c.err, got)
				}
				return
			}
			e, ok := errs.As(got)
			if !ok || e.Code != c.code {
				t.Errorf("Interpret(%v) = %v, want code %s", c.err, got, c.code)
			}
		})
	}
}

// connectError is pgx's error for a session asked of a port where no
// server listens (127.0.0.1:1), within ctx.
func connectError(t *testing.T, ctx context.Context) error {
	t.Helper()
	conn, err := pgconn.Connect(ctx, "postgres://postgres@127.0.0.1:1/postgres?connect_timeout=5")
	if err == nil {
		_ = conn.Close(ctx)
		t.Fatal("a session at 127.0.0.1:1")
	}
	var connectErr *pgconn.ConnectError
	if !errors.As(err, &connectErr) {
		t.Fatalf("connect: %T %v, want a *pgconn.ConnectError", err, err)
	}
	return err
}
