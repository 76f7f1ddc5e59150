package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/checkoutlock/schemas/errs"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/circulation-storage/cql"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/serverkit"
	"github.com/checkoutlock/serverkit/auth"
)

// routeRecords serves the FOLIO-style CRUD of one resource.
func (s *Server) routeRecords(r storage.Resource) {
	s.Get(r.Path, func(c echo.Context) error { return s.listRecords(c, r) }, s.tenant)
	s.Get(r.Path+"/:id", func(c echo.Context) error { return s.getRecord(c, r) }, s.tenant)
	s.Handle(http.MethodPut, r.Path+"/:id", s.announcing(r, s.identified(r, func(c echo.Context) error { return s.putRecord(c, r) })), s.tenant)
	if r.Fixed {
		return
	}
	s.Handle(http.MethodPost, r.Path, s.announcing(r, s.identified(r, func(c echo.Context) error { return s.createRecord(c, r) })), s.tenant)
	s.Handle(http.MethodDelete, r.Path+"/:id", s.announcing(r, func(c echo.Context) error { return s.deleteRecord(c, r) }), s.tenant)
}

// announcing is a write of r's records that tells EventsWritten when it
// succeeded and r's changes are among the outbox's (loans, items,
// requests).
func (s *Server) announcing(r storage.Resource, write echo.HandlerFunc) echo.HandlerFunc {
	if s.cfg.EventsWritten == nil || (r.Path != storage.Loans.Path && r.Path != storage.Items.Path && r.Path != storage.Requests.Path) {
		return write
	}
	return func(c echo.Context) error {
		err := write(c)
		if err == nil && c.Response().Status < http.StatusMultipleChoices {
			s.cfg.EventsWritten()
		}
		return err
	}
}

// identified is a write of r's records that carries its own id
// (storage.Write), when r's are loans, items or requests and the caller
// names one (schemas.HeaderWriteID, with the digest
// schemas.HeaderWriteDigest gives): circulation's always do. A write
// whose id landed before is answered with that write's answer, as it was
// answered then (201 and Location for a creation, 200 with a body or 204
// for a replacement), and schemas.HeaderWriteReplayed. A write without
// one is a write of its own, as FOLIO's storage writes it.
func (s *Server) identified(r storage.Resource, write echo.HandlerFunc) echo.HandlerFunc {
	if r.Path != storage.Loans.Path && r.Path != storage.Items.Path && r.Path != storage.Requests.Path {
		return write
	}
	return func(c echo.Context) error {
		h := c.Request().Header
		w := storage.Write{ID: strings.ToLower(h.Get(schemas.HeaderWriteID)), Digest: h.Get(schemas.HeaderWriteDigest)}
		switch {
		case w.ID == "" && w.Digest != "":
			return errs.Errorf(errs.KindBadRequest, schemas.CodeInvalidHeader, "%s names the request of the write %s names",
				schemas.HeaderWriteDigest, schemas.HeaderWriteID)
		case w.ID == "":
			return write(c)
		case !s.Schemas().ValidUUID(w.ID):
			return errs.Errorf(errs.KindBadRequest, schemas.CodeInvalidHeader, "%s must be a UUID", schemas.HeaderWriteID).
				With("writeId", truncateText(w.ID))
		case len(w.Digest) > maxDigest:
			return errs.Errorf(errs.KindBadRequest, schemas.CodeInvalidHeader, "%s must be at most %d characters", schemas.HeaderWriteDigest, maxDigest)
		}
		c.SetRequest(c.Request().WithContext(storage.WithWrite(c.Request().Context(), w)))
		err := write(c)
		var replayed *storage.Replayed
		if !errors.As(err, &replayed) {
			return err
		}
		serverkit.Log(c, slog.String("write_id", w.ID), slog.Bool("replayed", true))
		c.Response().Header().Set(schemas.HeaderWriteReplayed, "true")
		switch {
		case c.Request().Method == http.MethodPost:
			c.Response().Header().Set(echo.HeaderLocation, r.Path+"/"+recordID(replayed.Answer))
			return c.JSON(http.StatusCreated, replayed.Answer)
		case len(replayed.Answer) == 0 || string(replayed.Answer) == "null":
			return c.NoContent(http.StatusNoContent)
		}
		return c.JSON(http.StatusOK, replayed.Answer)
	}
}

// getWrite is GET /write-storage/writes/{id}: the write with that id as
// it landed, 404 when none has (a transaction still writing it has not).
func (s *Server) getWrite(c echo.Context) error {
	id, err := s.pathID(c, "write")
	if err != nil {
		return err
	}
	l, found, err := s.svc.Writes.Landed(c.Request().Context(), tenantOf(c), id)
	switch {
	case err != nil:
		return err
	case !found:
		return errs.Errorf(errs.KindNotFound, schemas.CodeNotFound, "No write with id %s landed (or it is older than %s)", id, storage.WriteKeptFor).
			With("id", id)
	}
	return c.JSON(http.StatusOK, l)
}

// maxDigest bounds schemas.HeaderWriteDigest: a SHA-256 in hex is 64.
const maxDigest = 128

// recordID is the id of a record's document.
func recordID(doc json.RawMessage) string {
	var r struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(doc, &r)
	return r.ID
}

// Headers of POST /loan-storage/loans that make it a check-out's writes, in
// one transaction: LockIDHeader names the check-out lock the loan is created
// under (only while that lock is live and the borrower's), ItemVersionHeader
// the item _version the check-out read (the item becomes "Checked out" at
// the next version, or nothing is written).
const (
	LockIDHeader      = schemas.HeaderLockID
	ItemVersionHeader = schemas.HeaderItemVersion
)

// checkOutWrite reads the check-out headers of a loan creation: the item
// version it read (required: a loan opens only with its item checked out),
// the lock it holds and whether to release it. What the write must respect
// beyond them (the lock feature, the item limit) storage decides itself.
func (s *Server) checkOutWrite(c echo.Context, id string, doc json.RawMessage, loan recordHeader) (storage.CheckOutWrite, error) {
	w := storage.CheckOutWrite{LoanID: id, Loan: doc, UserID: strings.ToLower(loan.UserID)}
	h := c.Request().Header
	v := h.Get(ItemVersionHeader)
	if v == "" {
		return w, errs.Errorf(errs.KindInvalid, schemas.CodeCheckOutRequired,
			"A loan is opened only by a check-out's write, which checks its item out with it: name the _version of the item read in %s "+
				"(and the borrower's lock in %s while the check-out lock is on)", ItemVersionHeader, LockIDHeader)
	}
	n, err := itemVersion(ItemVersionHeader, v)
	if err != nil {
		return w, err
	}
	w.ItemVersion = n
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
// its expiry.
func (s *Server) releaseUnwritten(c echo.Context, lockID string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.Request().Context()), releaseUnwrittenTimeout)
	defer cancel()
	err := s.svc.Locks.Release(ctx, tenantOf(c), lockID, storage.CallerFrom(ctx), false)
	if err != nil && !errs.IsKind(err, errs.KindNotFound) {
		s.Logger().WarnContext(ctx, "releasing the lock of a check-out that wrote nothing failed; it expires by itself",
			slog.String("lock_id", lockID), slog.Any("error", err))
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

// recordHeader is what the handlers read of any record, in the one
// decoding of its body: its id and version, a settings entry's scope, a
// loan's or an item's status, a loan's date and borrower, and an
// account's username.
type recordHeader struct {
	ID       string      `json:"id"`
	Version  *int        `json:"_version"`
	Scope    string      `json:"scope"`
	Status   statusField `json:"status"`
	LoanDate string      `json:"loanDate"`
	UserID   string      `json:"userId"`
	Username string      `json:"username"`
	// ServicePointID is a loan's checkoutServicePointId.
	ServicePointID string `json:"checkoutServicePointId"`
	// Offline is a loan's offline (a loan made offline), as sent.
	Offline *struct {
		TransactionDate string `json:"transactionDate"`
	} `json:"offline"`
}

// statusField is a record's status: {"name": …} on loans and items, a
// string on requests, read alike.
type statusField struct{ Name string }

func (f *statusField) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		return json.Unmarshal(b, &f.Name)
	}
	var v struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	f.Name = v.Name
	return nil
}

// storedScope checks, for a change to the settings entry id, the scoped
// write permission of the entry as stored and, when it is replaced, of its
// new scope.
func (s *Server) storedScope(c echo.Context, r storage.Resource, id, newScope string) error {
	if r.Path != storage.Settings.Path || s.cfg.Auth.Mode != auth.JWT {
		return nil
	}
	doc, err := s.svc.Records.Get(c.Request().Context(), tenantOf(c), r, id)
	if errs.IsKind(err, errs.KindNotFound) {
		if newScope == "" {
			return nil // the delete itself answers 404
		}
		return s.settingsScope(c, r, newScope) // the change itself answers 404
	}
	if err != nil {
		return err
	}
	scope, err := storedScopeOf(id, doc)
	if err != nil {
		return err
	}
	if err := s.settingsScope(c, r, scope); err != nil {
		return err
	}
	if newScope != "" && newScope != scope {
		return s.settingsScope(c, r, newScope)
	}
	return nil
}

// storedScopeOf is the scope of the settings entry id as stored, which
// decides who may read or change it. An entry whose scope cannot be read
// (written straight into the table, say) is an error, never a permission
// check on an empty scope.
func storedScopeOf(id string, doc json.RawMessage) (string, error) {
	var h struct {
		Scope string `json:"scope"`
	}
	err := json.Unmarshal(doc, &h)
	if err == nil && h.Scope == "" {
		err = errors.New("no scope")
	}
	if err != nil {
		return "", errs.Errorf(errs.KindInternal, schemas.CodeInternal,
			"The stored settings entry %s cannot be read: its scope is missing or not a string", id).With("id", id).Because(err)
	}
	return h.Scope, nil
}

// bindRecord validates the body against the resource's schema and returns it
// with its id and version.
func (s *Server) bindRecord(c echo.Context, r storage.Resource) (json.RawMessage, recordHeader, error) {
	var raw json.RawMessage
	doc, err := s.bindDoc(c, &raw)
	if err != nil {
		return nil, recordHeader{}, err
	}
	if r.MaxBytes > 0 && len(raw) > r.MaxBytes {
		return nil, recordHeader{}, errs.Errorf(errs.KindInvalid, schemas.CodeRecordTooLarge,
			"%s is %d bytes; at most %d are kept (members no field describes count too)", strings.ToLower(r.Name), len(raw), r.MaxBytes).
			With("bytes", strconv.Itoa(len(raw)))
	}
	var h recordHeader
	if err := serverkit.Unmarshal(raw, doc, &h); err != nil {
		if e, ok := errs.As(err); ok {
			return nil, recordHeader{}, e
		}
		return nil, recordHeader{}, errs.Errorf(errs.KindInvalid, schemas.CodeValidation, "_version: must be an integer")
	}
	if r.Path == storage.Accounts.Path {
		if err := schemas.CheckUsername(h.Username); err != nil {
			return nil, recordHeader{}, errs.Errorf(errs.KindInvalid, schemas.CodeValidation, "%v", err).With("username", truncateText(h.Username))
		}
	}
	return raw, h, nil
}

func (s *Server) createRecord(c echo.Context, r storage.Resource) error {
	doc, h, err := s.bindRecord(c, r)
	if err != nil {
		return err
	}
	if err := requestRules(c, r); err != nil {
		return err
	}
	if err := s.settingsScope(c, r, h.Scope); err != nil {
		return err
	}
	id := strings.ToLower(h.ID)
	if id == "" {
		id = uuid.NewString()
	}
	var stored json.RawMessage
	checkOut := r.Path == storage.Loans.Path && h.Status.Name == schemas.LoanOpen
	switch {
	case r.Path == storage.Loans.Path && !checkOut && slices.ContainsFunc(checkOutHeaders, func(h string) bool { return c.Request().Header.Get(h) != "" }):
		return errs.Errorf(errs.KindInvalid, schemas.CodeValidation,
			"status: a check-out's write opens a loan: its status must be Open, got %q", h.Status.Name).With("status", h.Status.Name)
	case r.Path == storage.Items.Path && h.Status.Name == schemas.ItemCheckedOut:
		return errs.Errorf(errs.KindInvalid, schemas.CodeItemStatusByCirculation,
			"An item becomes Checked out only with its loan, by a check-out: create it with another status").With("status", schemas.ItemCheckedOut)
	case r.Path == storage.Settings.Path:
		if err := s.checkSetting(h.Scope, doc); err != nil {
			return err
		}
	}
	if checkOut {
		w, err := s.checkOutWrite(c, id, doc, h)
		if err != nil {
			return err
		}
		acquiring, err := s.acquisitionOf(c, w, h)
		if err != nil {
			return err
		}
		written, err := s.writeCheckOut(c, w, acquiring)
		if err != nil {
			return err
		}
		stored = written.Loan
		if written.LockReleased {
			c.Response().Header().Set(schemas.HeaderLockReleased, "true")
		}
		if w.OverrideItemLimit || w.OverridePatronBlock || w.Offline {
			caller := storage.CallerFrom(c.Request().Context())
			s.Logger().InfoContext(c.Request().Context(), "check-out override", slog.String("loan_id", id),
				slog.String("user_id", w.UserID), slog.Bool("item_limit", w.OverrideItemLimit),
				slog.Bool("patron_block", w.OverridePatronBlock), slog.Bool("offline", w.Offline),
				slog.String("caller", caller.User), slog.String("module", caller.Module))
		}
	} else {
		stored, err = s.svc.Records.Create(c.Request().Context(), tenantOf(c), r, id, doc)
	}
	if err != nil {
		return err
	}
	if r.Path == storage.Settings.Path {
		s.settingChanged(c, "create", id, stored)
	}
	c.Response().Header().Set(echo.HeaderLocation, r.Path+"/"+id)
	return c.JSON(http.StatusCreated, stored)
}

func (s *Server) getRecord(c echo.Context, r storage.Resource) error {
	id, err := s.pathID(c, r.Name)
	if err != nil {
		return err
	}
	doc, err := s.svc.Records.Get(c.Request().Context(), tenantOf(c), r, id)
	if err != nil {
		return err
	}
	if r.Path == storage.Settings.Path && s.cfg.Auth.Mode == auth.JWT {
		// Who may read an entry depends on its scope.
		scope, err := storedScopeOf(id, doc)
		if err != nil {
			return err
		}
		if err := s.cfg.Auth.Require(serverkit.Claims(c.Request().Context()), schemas.SettingsScopeRead(scope)); err != nil {
			return err
		}
	}
	return c.JSON(http.StatusOK, doc)
}

func (s *Server) listRecords(c echo.Context, r storage.Resource) error {
	f := storage.RecordFilter{Params: map[string]string{}, MaxBytes: s.cfg.MaxPageBytes}
	if r.Path == storage.Settings.Path {
		// Only the entries of scopes the caller may read are listed.
		f.Scopes = s.readableScopes(c)
	}
	for _, filter := range r.Filters {
		v, ok, err := s.filterParam(c, filter)
		if err != nil {
			return err
		}
		if ok {
			f.Params[filter.Param] = v
		}
	}
	query, text, err := cqlParam(c)
	if err != nil {
		return err
	}
	f.Query, f.QueryText = query, text
	if f.Offset, f.Limit, err = pageParams(c); err != nil {
		return err
	}
	docs, total, err := s.svc.Records.List(c.Request().Context(), tenantOf(c), r, f)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{r.Plural: docs, "totalRecords": total})
}

// cqlParam reads the query parameter, a CQL query; nil when there is none.
func cqlParam(c echo.Context) (*cql.Query, string, error) {
	raw, ok, err := queryParam(c, "query")
	if err != nil || !ok {
		return nil, "", err
	}
	q, err := cql.Parse(raw)
	if err != nil {
		return nil, "", invalidParam("query", raw, "is not a query this service answers: "+err.Error())
	}
	return q, raw, nil
}

// filterParam reads one filter query parameter, checking its kind.
func (s *Server) filterParam(c echo.Context, f storage.Filter) (string, bool, error) {
	v, ok, err := queryParam(c, f.Param)
	if err != nil || !ok {
		return "", false, err
	}
	if !utf8.ValidString(v) || strings.ContainsRune(v, 0) {
		return "", false, invalidParam(f.Param, strings.ToValidUTF8(strings.ReplaceAll(v, "\x00", ""), "?"),
			"must be valid UTF-8 without NUL characters")
	}
	if f.Kind == storage.FilterUUID {
		if !s.Schemas().ValidUUID(v) {
			return "", false, invalidParam(f.Param, v, "must be a UUID")
		}
		v = strings.ToLower(v)
	}
	if len(f.Values) > 0 {
		allowed := false
		for _, a := range f.Values {
			allowed = allowed || a == v
		}
		if !allowed {
			return "", false, invalidParam(f.Param, v, "must be one of "+joinQuoted(f.Values))
		}
	}
	if utf8.RuneCountInString(v) > 1024 {
		return "", false, invalidParam(f.Param, v, "must be at most 1024 characters")
	}
	return v, true, nil
}

func (s *Server) putRecord(c echo.Context, r storage.Resource) error {
	id, err := s.pathID(c, r.Name)
	if err != nil {
		return err
	}
	if err := requestRules(c, r); err != nil {
		return err
	}
	doc, h, err := s.bindRecord(c, r)
	if err != nil {
		return err
	}
	if err := s.storedScope(c, r, id, h.Scope); err != nil {
		return err
	}
	if r.Path == storage.Settings.Path {
		if err := s.checkSetting(h.Scope, doc); err != nil {
			return err
		}
	}
	if h.ID != "" && !strings.EqualFold(h.ID, id) {
		return errs.Errorf(errs.KindInvalid, schemas.CodeValidation, "id: %s in the body does not match %s in the path", h.ID, id).
			With("id", h.ID)
	}
	// 0: none named (a write that must name one is refused as stale).
	version := 0
	if r.Versioned && h.Version != nil {
		version = *h.Version
	}
	if v := c.Request().Header.Get(schemas.HeaderCheckInServicePoint); v != "" && r.Path == storage.Items.Path {
		if !s.Schemas().ValidUUID(v) {
			return errs.Errorf(errs.KindBadRequest, schemas.CodeInvalidHeader, "%s must be a UUID", schemas.HeaderCheckInServicePoint).
				With("servicePointId", truncateText(v))
		}
		written, err := s.svc.Loans.CheckInItem(c.Request().Context(), tenantOf(c), storage.ItemCheckInWrite{ItemID: id, ItemVersion: version,
			ServicePointID: strings.ToLower(v)})
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, written)
	}
	if v := c.Request().Header.Get(schemas.HeaderCheckInItemVersion); v != "" && r.Path == storage.Loans.Path {
		n, err := itemVersion(schemas.HeaderCheckInItemVersion, v)
		if err != nil {
			return err
		}
		written, err := s.svc.Loans.CheckInLoan(c.Request().Context(), tenantOf(c), storage.CheckInWrite{LoanID: id, Loan: doc, ItemVersion: n, LoanVersion: version})
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, written)
	}
	if v := c.Request().Header.Get(schemas.HeaderRenewalCount); v != "" && r.Path == storage.Loans.Path {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n < 0 {
			return errs.Errorf(errs.KindBadRequest, schemas.CodeInvalidHeader,
				"%s must be an integer from 0 to 2147483647", schemas.HeaderRenewalCount).With("renewalCount", truncateText(v))
		}
		stored, err := s.svc.Loans.RenewLoan(c.Request().Context(), tenantOf(c), storage.RenewalWrite{LoanID: id, Loan: doc, LoanVersion: version, RenewalCount: int(n)})
		if err != nil {
			return err
		}
		return c.JSONBlob(http.StatusOK, stored)
	}
	if v := c.Request().Header.Get(schemas.HeaderLoanActionItemVersion); v != "" && r.Path == storage.Loans.Path {
		n, err := itemVersion(schemas.HeaderLoanActionItemVersion, v)
		if err != nil {
			return err
		}
		err = s.svc.Loans.ActOnLoan(c.Request().Context(), tenantOf(c), storage.LoanActionWrite{LoanID: id, Loan: doc, ItemVersion: n, LoanVersion: version})
		if err != nil {
			return err
		}
		return c.NoContent(http.StatusNoContent)
	}
	if err := s.svc.Records.Update(c.Request().Context(), tenantOf(c), r, id, version, doc); err != nil {
		return err
	}
	if r.Path == storage.Settings.Path {
		s.settingChanged(c, "update", id, doc)
	}
	return c.NoContent(http.StatusNoContent)
}

// requestRules reads schemas.HeaderRequestRules: on a write of a request,
// "circulation" has it judged by FOLIO's request rules; any other value,
// or the header on another record's write, is refused.
func requestRules(c echo.Context, r storage.Resource) error {
	v := c.Request().Header.Get(schemas.HeaderRequestRules)
	switch {
	case v == "":
		return nil
	case v != schemas.RequestRulesCirculation || r.Path != storage.Requests.Path:
		return errs.Errorf(errs.KindBadRequest, schemas.CodeInvalidHeader, "%s is %q on a write of a request, and nothing else",
			schemas.HeaderRequestRules, schemas.RequestRulesCirculation).With("header", truncateText(v))
	}
	c.SetRequest(c.Request().WithContext(storage.WithRequestRules(c.Request().Context())))
	return nil
}

func (s *Server) deleteRecord(c echo.Context, r storage.Resource) error {
	id, err := s.pathID(c, r.Name)
	if err != nil {
		return err
	}
	if err := s.storedScope(c, r, id, ""); err != nil {
		return err
	}
	if err := s.svc.Records.Delete(c.Request().Context(), tenantOf(c), r, id); err != nil {
		return err
	}
	if r.Path == storage.Settings.Path {
		s.settingChanged(c, "delete", id, nil)
	}
	return c.NoContent(http.StatusNoContent)
}

// pageParams reads offset and limit, as every list takes them.
func pageParams(c echo.Context) (offset, limit int, err error) {
	if offset, err = queryInt(c, "offset", 0, 0, 1<<31-1); err != nil {
		return 0, 0, err
	}
	if limit, err = queryInt(c, "limit", schemas.DefaultPageSize, 0, schemas.MaxPageSize); err != nil {
		return 0, 0, err
	}
	return offset, limit, nil
}

func joinQuoted(vs []string) string {
	out := ""
	for i, v := range vs {
		if i > 0 {
			out += ", "
		}
		out += `"` + v + `"`
	}
	return out
}

// settingChanged logs a change to a settings entry with who made it, as
// the setting_change table records it.
func (s *Server) settingChanged(c echo.Context, op, id string, doc json.RawMessage) {
	var e struct {
		Scope string          `json:"scope"`
		Key   string          `json:"key"`
		Value json.RawMessage `json:"value"`
	}
	if doc != nil {
		if err := json.Unmarshal(doc, &e); err != nil {
			// The change is made; its log line says what could not be read.
			s.Logger().WarnContext(c.Request().Context(), "settings entry changed, its body unreadable for the log",
				slog.String("operation", op), slog.String("id", id), slog.Any("error", err))
		}
	}
	by := storage.CallerFrom(c.Request().Context())
	s.Logger().InfoContext(c.Request().Context(), "settings entry changed", slog.String("operation", op), slog.String("id", id),
		slog.String("scope", e.Scope), slog.String("key", e.Key), slog.String("value", string(e.Value)),
		slog.String("caller", by.User), slog.String("module", by.Module))
}
