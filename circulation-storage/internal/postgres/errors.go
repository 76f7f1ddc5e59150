package postgres

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"

	storage "github.com/checkoutlock/circulation-storage"
)

// Interpret translates a driver error into a domain error by SQLSTATE code,
// never by message text. InterpretWrite, interpretRule and interpretAcquire
// refine it where a constraint name says which field was at fault.
// Errors it does not recognise stay as they are: the HTTP layer answers them
// with 500, because they are bugs.
func Interpret(err error, t storage.Tenant) error {
	if err == nil {
		return nil
	}
	if _, ok := errs.As(err); ok {
		return err
	}
	// A failed connection attempt may wrap a server error (database does not
	// exist, authentication failed): either way the database is unavailable.
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) {
		return storage.Unavailable(err)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case pgErr.Code == pgerrcode.InvalidSchemaName, pgErr.Code == pgerrcode.UndefinedTable:
			if t != "" {
				return storage.TenantNotInitialized(t).Because(err)
			}
		case pgErr.Code == pgerrcode.UniqueViolation:
			return errs.Errorf(errs.KindConflict, schemas.CodeConflict, "A record with the same unique value already exists").
				With("constraint", pgErr.ConstraintName).
				Because(err)
		case pgErr.Code == pgerrcode.ForeignKeyViolation && strings.HasSuffix(pgErr.ConstraintName, "_tenant_fkey") && t != "":
			// A durable record for a tenant that is not enabled (purged
			// a moment ago, on another instance).
			return storage.TenantNotInitialized(t).Because(err)
		case pgErr.Code == pgerrcode.ForeignKeyViolation:
			return errs.Errorf(errs.KindInvalid, schemas.CodeValidation, "A referenced record does not exist").
				With("constraint", pgErr.ConstraintName).
				Because(err)
		case pgErr.Code == pgerrcode.UntranslatableCharacter:
			// JSON allows "\u0000"; PostgreSQL's jsonb does not.
			return errs.Errorf(errs.KindInvalid, schemas.CodeValidation, "Text must not contain the NUL character (\\u0000)").Because(err)
		case pgErr.Code == pgerrcode.CharacterNotInRepertoire:
			return errs.Errorf(errs.KindInvalid, schemas.CodeValidation, "Text must be valid UTF-8 without NUL characters").Because(err)
		case pgErr.Code == pgerrcode.CheckViolation, pgErr.Code == pgerrcode.NotNullViolation,
			pgErr.Code == pgerrcode.InvalidTextRepresentation, pgErr.Code == pgerrcode.NumericValueOutOfRange:
			// The schemas should have refused the value first; if one slips
			// through, it is still the client's value that is wrong.
			return errs.Errorf(errs.KindInvalid, schemas.CodeValidation, "A value is out of range or malformed").
				With("constraint", pgErr.ConstraintName).
				Because(err)
		case pgErr.Code == pgerrcode.QueryCanceled:
			return errs.Errorf(errs.KindUnavailable, schemas.CodeTimeout, "The request took too long and was cancelled").Because(err)
		case tryAgainAtOnce(pgErr.Code),
			strings.HasPrefix(pgErr.Code, "53"),      // insufficient resources
			pgErr.Code == pgerrcode.LockNotAvailable: // a lock_timeout an operator set
			return storage.Unavailable(err)
		}
		return err
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return errs.Errorf(errs.KindUnavailable, schemas.CodeTimeout, "The request took too long and was cancelled").Because(err)
	}
	if isConnectionError(err) {
		return storage.Unavailable(err)
	}
	return err
}

// TryAgainAtOnce reports whether what failed with err may succeed when
// tried again at once: PostgreSQL rolled its transaction back to break a
// deadlock or a serialization conflict, or its session was lost or
// refused (a connection cut, a server shutting down or starting). A
// statement or lock timeout, a full disk, too many connections, a failed
// sign-in or a cancelled request would only fail again, holding what they
// hold as long; Interpret answers those as the caller should hear them.
// Only what is safe to do twice may be tried again so: a transaction whose
// session was lost at its commit may have committed.
func TryAgainAtOnce(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return tryAgainAtOnce(pgErr.Code)
	}
	var connectErr *pgconn.ConnectError
	return errors.As(err, &connectErr) || isConnectionError(err)
}

// tryAgainAtOnce is TryAgainAtOnce of a PostgreSQL error's SQLSTATE code.
func tryAgainAtOnce(code string) bool {
	return strings.HasPrefix(code, "08") || // connection exception
		strings.HasPrefix(code, "57P") || // operator intervention: shutdown, cannot connect now
		code == pgerrcode.SerializationFailure || code == pgerrcode.DeadlockDetected
}

// isConnectionError reports whether err means the database could not be
// reached or the connection broke, as opposed to a bug in a query.
func isConnectionError(err error) bool {
	var netErr net.Error
	var errno syscall.Errno
	return errors.As(err, &netErr) ||
		errors.As(err, &errno) ||
		errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, net.ErrClosed) ||
		pgconn.SafeToRetry(err) ||
		pgconn.Timeout(err)
}

// TablesMissing reports whether err is the shared tables' absence: no
// tenant was initialised on this database yet (its migrations make them).
func TablesMissing(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == pgerrcode.InvalidSchemaName || pgErr.Code == pgerrcode.UndefinedTable)
}
