// A check-out's write sent to storage as FOLIO's loan POST with this
// project's headers (the lock, the item's version, a release, an
// override, an acquisition): what it asks for, read and checked, and its
// lock taken and given back around the write when it asks storage to.

package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/checkoutlock/schemas/errs"

	"github.com/labstack/echo/v4"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/serverkit"
)

// checkOutWrite reads the check-out headers of a loan creation: the item
// version it read (required: a loan opens only with its item checked out),
// the lock it holds and whether to release it. What the write must respect
// beyond them (the lock feature, the item limit) storage decides itself.
func (s *Server) checkOutWrite(c echo.Context, id string, doc json.RawMessage, loan recordHeader) (storage.CheckOutWrite, error) {
	v := c.Request().Header.Get(ItemVersionHeader)
	if v == "" {
		return storage.CheckOutWrite{}, errs.Errorf(errs.KindInvalid, schemas.CodeCheckOutRequired,
			"A loan is opened only by a check-out's write, which checks its item out with it: name the _version of the item read in %s "+
				"(and the borrower's lock in %s while the check-out lock is on)", ItemVersionHeader, LockIDHeader)
	}
	n, err := itemVersion(ItemVersionHeader, v)
	if err != nil {
		return storage.CheckOutWrite{}, err
	}
	return s.checkOutWriteOf(c, id, doc, loan, n)
}

// checkOutWriteOf is checkOutWrite of the item at itemVersion: the
// headers beside it (the lock, its release, an override) read and
// checked.
func (s *Server) checkOutWriteOf(c echo.Context, id string, doc json.RawMessage, loan recordHeader, itemVersion int) (storage.CheckOutWrite, error) {
	w := storage.CheckOutWrite{LoanID: id, Loan: doc, UserID: strings.ToLower(loan.UserID), ItemVersion: itemVersion}
	h := c.Request().Header
	if err := notAhead(loan.LoanDate); err != nil {
		return w, err
	}
	if lockID := h.Get(LockIDHeader); lockID != "" {
		if !s.Schemas().ValidUUID(lockID) {
			return w, errs.Errorf(errs.KindBadRequest, schemas.CodeInvalidID, "Invalid lock id in %s", LockIDHeader).
				With("lockId", truncateText(lockID))
		}
		w.LockID = strings.ToLower(lockID)
	}
	switch v := h.Get(schemas.HeaderReleaseLock); {
	case v == "true" && w.LockID != "":
		// Releasing a lock is a permission of its own, here as on DELETE.
		if err := s.cfg.Auth.Require(serverkit.Claims(c.Request().Context()), releasePermission); err != nil {
			return w, err
		}
		w.ReleaseLock = true
	case v == "true":
		return w, errs.Errorf(errs.KindBadRequest, schemas.CodeInvalidHeader,
			"%s needs the lock to release in %s", schemas.HeaderReleaseLock, LockIDHeader)
	case v != "" && v != "false":
		return w, errs.Errorf(errs.KindBadRequest, schemas.CodeInvalidHeader,
			"%s must be true or false", schemas.HeaderReleaseLock).With("releaseLock", truncateText(v))
	}
	if v := h.Get(schemas.HeaderCheckOutOverride); v != "" {
		if err := s.cfg.Auth.Require(serverkit.Claims(c.Request().Context()), schemas.PermissionCheckOutOverride); err != nil {
			return w, err
		}
		for _, block := range strings.Split(v, ",") {
			switch strings.TrimSpace(block) {
			case "itemLimitBlock":
				w.OverrideItemLimit = true
			case "patronBlock":
				w.OverridePatronBlock = true
			case "itemNotLoanableBlock":
				w.OverrideItemNotLoanable = true
			case "offline":
				// Recorded past the rules only as a loan made offline, which
				// says so, dated when it was made: its broken rules are
				// then written on it, whoever calls.
				if loan.Offline == nil || loan.Offline.TransactionDate != loan.LoanDate {
					return w, errs.Errorf(errs.KindInvalid, schemas.CodeValidation,
						"offline: %s: offline writes a loan made offline, whose offline.transactionDate is its loanDate",
						schemas.HeaderCheckOutOverride).With("override", "offline")
				}
				w.Offline = true
			default:
				return w, errs.Errorf(errs.KindBadRequest, schemas.CodeInvalidHeader,
					"%s lists the blocks an override lifts: itemLimitBlock, patronBlock, itemNotLoanableBlock, or offline", schemas.HeaderCheckOutOverride).
					With("override", truncateText(v))
			}
		}
	}
	return w, nil
}

// checkOutLoan makes the check-out's write w, of the loan whose header is
// loan, whichever route asked for it: the patron's lock acquired in the
// write when the call asks (acquisitionOf), the loan written, and the
// lock's release with it said in X-Check-Out-Lock-Released.
func (s *Server) checkOutLoan(c echo.Context, w storage.CheckOutWrite, loan recordHeader) (storage.CheckOutWritten, error) {
	acquiring, err := s.acquisitionOf(c, w, loan)
	if err != nil {
		return storage.CheckOutWritten{}, err
	}
	written, err := s.writeCheckOut(c, w, acquiring)
	if err != nil {
		return storage.CheckOutWritten{}, err
	}
	if written.LockReleased {
		c.Response().Header().Set(schemas.HeaderLockReleased, "true")
	}
	return written, nil
}

// acquisitionOf reads schemas.HeaderAcquireLock of the check-out's write w
// (of loan): nil without it. The acquisition is read as the body of
// POST /check-out-lock-storage would be (checkout-lock-request.json and
// lockTerms), the lock being w's: its id, its borrower, the loan's service
// point and the request's id.
func (s *Server) acquisitionOf(c echo.Context, w storage.CheckOutWrite, loan recordHeader) (*lockRequest, error) {
	v := c.Request().Header.Get(schemas.HeaderAcquireLock)
	if v == "" {
		return nil, nil
	}
	if w.LockID == "" || !w.ReleaseLock {
		return nil, errs.Errorf(errs.KindBadRequest, schemas.CodeInvalidHeader,
			"%s acquires the lock the write names in %s and releases (%s: true)", schemas.HeaderAcquireLock, LockIDHeader, schemas.HeaderReleaseLock)
	}
	if err := s.cfg.Auth.Require(serverkit.Claims(c.Request().Context()), acquirePermission); err != nil {
		return nil, err
	}
	invalid := func(format string, a ...any) error {
		return errs.Errorf(errs.KindBadRequest, schemas.CodeInvalidHeader, "%s: "+format, append([]any{schemas.HeaderAcquireLock}, a...)...).
			With("acquireLock", truncateText(v))
	}
	q, err := url.ParseQuery(v)
	if err != nil {
		return nil, invalid("not a query string (ttlMs=…&waitMs=…&instance=…&itemBarcode=…)")
	}
	body := map[string]any{"id": w.LockID, "userId": w.UserID}
	holder := map[string]any{}
	for k, vals := range q {
		if len(vals) != 1 {
			return nil, invalid("%s is given %d times", k, len(vals))
		}
		switch k {
		case "ttlMs", "waitMs":
			n, err := strconv.ParseInt(vals[0], 10, 64)
			if err != nil {
				return nil, invalid("%s must be an integer", k)
			}
			body[k] = json.Number(strconv.FormatInt(n, 10))
		case "instance", "itemBarcode":
			holder[k] = vals[0]
		default:
			return nil, invalid("%s is not ttlMs, waitMs, instance or itemBarcode", k)
		}
	}
	if sp := loan.ServicePointID; sp != "" {
		holder["servicePointId"] = sp
	}
	if id := c.Request().Header.Get(RequestIDHeader); id != "" {
		holder["requestId"] = id
	}
	if len(holder) > 0 {
		body["holder"] = holder
	}
	if err := s.Schemas().Validate("checkout-lock-request.json", body); err != nil {
		return nil, err
	}
	req := lockRequestOf(body)
	return &req, nil
}

// writeCheckOut makes the check-out's write w. One that acquires its lock
// (acquiring, its terms) takes it inside its own transaction first, where
// a patron's writes queue one after another; when the patron's lock row is
// there already (a lock taken by a call of its own, live or stale), it
// takes the lock the ordinary way, waiting for it as an acquisition does,
// then writes, and releases the lock if the write wrote nothing.
func (s *Server) writeCheckOut(c echo.Context, w storage.CheckOutWrite, acquiring *lockRequest) (storage.CheckOutWritten, error) {
	ctx, t := c.Request().Context(), tenantOf(c)
	if acquiring == nil {
		return s.svc.Loans.CreateCheckOutLoan(ctx, t, w)
	}
	ttl, wait, holder, err := s.lockTerms(c, *acquiring)
	if err != nil {
		return storage.CheckOutWritten{}, err
	}
	inWrite := w
	inWrite.AcquireInWrite = &storage.LockTerms{TTL: ttl, Holder: holder}
	written, err := s.svc.Loans.CreateCheckOutLoan(ctx, t, inWrite)
	var replayed *storage.Replayed
	if errors.As(err, &replayed) {
		// The write had landed before: this one took no lock.
		return written, err
	}
	if !errors.Is(err, storage.ErrLockTaken) {
		if err == nil || !errs.IsKind(err, errs.KindUnavailable) {
			// Acquired in the write (a write that failed otherwise
			// ended its transaction, and the lock with it).
			s.metrics.acquisition(storage.Acquired.String())
			c.Response().Header().Set(schemas.HeaderLockAcquired, "0")
		}
		return written, err
	}
	if err := s.acquireForWrite(c, w, ttl, wait, holder); err != nil {
		return storage.CheckOutWritten{}, err
	}
	if err := ctx.Err(); err != nil {
		// The client left while the lock was being acquired: nothing is
		// written for it.
		s.releaseUnwritten(c, w.LockID)
		return storage.CheckOutWritten{}, err
	}
	written, err = s.svc.Loans.CreateCheckOutLoan(ctx, t, w)
	if err != nil {
		// Nothing was written (the write's outcome is final when it
		// answers): the lock this call took goes back.
		s.releaseUnwritten(c, w.LockID)
	}
	return written, err
}

// acquireForWrite takes the lock of the check-out's write w, as
// POST /check-out-lock-storage does (its wait, lifetime and holder),
// before the write runs.
func (s *Server) acquireForWrite(c echo.Context, w storage.CheckOutWrite, ttl, wait time.Duration, holder storage.Holder) error {
	start := time.Now()
	if _, err := s.acquire(c, w.UserID, w.LockID, ttl, wait, holder); err != nil {
		return err
	}
	c.Response().Header().Set(schemas.HeaderLockAcquired, strconv.FormatInt(time.Since(start).Milliseconds(), 10))
	return nil
}

// releaseUnwrittenTimeout bounds the release of a lock whose write wrote
// nothing; a release that does not finish in time leaves the lock to
// expire.
const releaseUnwrittenTimeout = 5 * time.Second

// releaseUnwritten releases the lock lockID a check-out's write acquired
// and did not release, having written nothing, even if the client has
// gone: a lock left behind would keep the patron's next scan waiting for
// its expiry. It says whether the lock is gone (released, or not held).
func (s *Server) releaseUnwritten(c echo.Context, lockID string) bool {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.Request().Context()), releaseUnwrittenTimeout)
	defer cancel()
	err := s.svc.Locks.Release(ctx, tenantOf(c), lockID, storage.CallerFrom(ctx), false)
	if err != nil && !errs.IsKind(err, errs.KindNotFound) {
		s.Logger().WarnContext(ctx, "releasing the lock of a check-out that wrote nothing failed; it expires by itself",
			slog.String("lock_id", lockID), slog.Any("error", err))
		return false
	}
	return true
}

// releasedOnReplay is, for a check-out's write answered from its write id
// (it writes nothing), the release its headers ask for: the lock it names
// (LockIDHeader, with schemas.HeaderReleaseLock) is released if it is
// still held, and the answer says so (schemas.HeaderLockReleased) once it
// is gone. The write that landed released its own lock; the call sent
// again with its id holds that one, now gone, or one it took itself (a
// second call of a client's Idempotency-Key, made at once with the
// first, that took a lock before its write found the first landed).
// Without the release permission, or when the release fails, nothing is
// said, and the caller releases the lock itself.
func (s *Server) releasedOnReplay(c echo.Context) {
	h := c.Request().Header
	lockID := strings.ToLower(h.Get(LockIDHeader))
	if lockID == "" || h.Get(schemas.HeaderReleaseLock) != "true" || !s.Schemas().ValidUUID(lockID) ||
		s.cfg.Auth.Require(serverkit.Claims(c.Request().Context()), releasePermission) != nil {
		return
	}
	if s.releaseUnwritten(c, lockID) {
		c.Response().Header().Set(schemas.HeaderLockReleased, "true")
	}
}

// notAhead refuses a loanDate more than schemas.MaxLoanDateAhead from
// now.
func notAhead(loanDate string) error {
	d, err := schemas.ParseDateTime(loanDate)
	if err == nil && d.After(time.Now().Add(schemas.MaxLoanDateAhead)) {
		return errs.Errorf(errs.KindInvalid, schemas.CodeValidation,
			"loanDate: %s is more than %s ahead of this server's clock", loanDate, schemas.MaxLoanDateAhead).With("loanDate", loanDate)
	}
	return nil
}

// releasePermission is the permission to release a lock
// (DELETE /check-out-lock-storage/{id}), which a check-out's write that
// releases its lock needs too.
var releasePermission = permissionFor(http.MethodDelete, locksPath+"/{id}")

// acquirePermission is the permission to acquire a lock
// (POST /check-out-lock-storage), which a check-out's write that acquires
// its lock needs too.
var acquirePermission = permissionFor(http.MethodPost, locksPath)

// permissionFor is the permission of one of storage's routes (method, and
// path in FOLIO's notation) as schemas.Routes lists it. A route missing
// there is a bug that panics when the package is initialised, at start-up,
// rather than a permission check against "" at run time.
func permissionFor(method, path string) string {
	p, ok := schemas.PermissionFor(schemas.ServiceStorage, method, path)
	if !ok || p == "" {
		panic(fmt.Sprintf("httpapi: schemas.Routes names no permission for %s %s", method, path))
	}
	return p
}

// checkOutHeaders are the headers of a check-out's write.
var checkOutHeaders = []string{LockIDHeader, ItemVersionHeader, schemas.HeaderReleaseLock, schemas.HeaderCheckOutOverride, schemas.HeaderAcquireLock}

// itemVersion reads an item version from header. The column is a
// PostgreSQL integer: what it cannot hold is refused here, before any
// statement runs.
func itemVersion(header, v string) (int, error) {
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n < 1 {
		return 0, errs.Errorf(errs.KindBadRequest, schemas.CodeInvalidHeader,
			"%s must be an integer from 1 to 2147483647", header).With("itemVersion", truncateText(v))
	}
	return int(n), nil
}
