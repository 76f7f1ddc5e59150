package httpapi

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
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
	moved := func(h echo.HandlerFunc) echo.HandlerFunc { return h }
	if r.Path == storage.FeeFineAccounts.Path {
		moved = s.signInMoved
	}
	s.Get(r.Path, moved(func(c echo.Context) error { return s.listRecords(c, r) }), s.tenant)
	s.Get(r.Path+"/:id", moved(func(c echo.Context) error { return s.getRecord(c, r) }), s.tenant)
	if r.ReadOnly {
		return
	}
	s.Handle(http.MethodPut, r.Path+"/:id", moved(s.announcing(r, s.identified(r, func(c echo.Context) error { return s.putRecord(c, r) }))), s.tenant)
	if r.Fixed {
		return
	}
	s.Handle(http.MethodPost, r.Path, moved(s.announcing(r, s.identified(r, func(c echo.Context) error { return s.createRecord(c, r) }))), s.tenant)
	s.Handle(http.MethodDelete, r.Path+"/:id", moved(s.announcing(r, func(c echo.Context) error { return s.deleteRecord(c, r) })), s.tenant)
}

// signInMoved answers, for one release, a call about a sign-in account
// made at /accounts, where sign-in accounts were kept before FOLIO's
// fees/fines took the path: 308 Permanent Redirect to the same call at
// /sign-in-accounts (a client follows it with the same method and body),
// with Deprecation: true. A call is about a sign-in account when it lists
// by username (the parameter, or a CQL query naming it), creates or
// replaces a record naming a username, or names the id of a sign-in
// account that is no fee/fine. Every other call is next's.
func (s *Server) signInMoved(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		moved := false
		switch id := c.Param("id"); {
		case req.Method == http.MethodGet && id == "":
			q := req.URL.Query()
			moved = q.Has("username") || strings.Contains(q.Get("query"), "username")
		case req.Method == http.MethodPost || req.Method == http.MethodPut:
			body, err := serverkit.Bytes(req)
			if err != nil {
				return next(c)
			}
			var doc map[string]json.RawMessage
			if json.Unmarshal(body, &doc) == nil {
				_, username := doc["username"]
				_, amount := doc["amount"]
				moved = username && !amount
			}
		case s.Schemas().ValidUUID(id):
			ctx, t := req.Context(), tenantOf(c)
			if _, err := s.svc.Records.Get(ctx, t, storage.FeeFineAccounts, id); errs.IsKind(err, errs.KindNotFound) {
				_, err := s.svc.Records.Get(ctx, t, storage.Accounts, id)
				moved = err == nil
			}
		}
		if !moved {
			return next(c)
		}
		to := storage.Accounts.Path + strings.TrimPrefix(req.URL.Path, storage.FeeFineAccounts.Path)
		if req.URL.RawQuery != "" {
			to += "?" + req.URL.RawQuery
		}
		serverkit.Log(c, slog.String("moved_to", to))
		c.Response().Header().Set("Deprecation", "true")
		c.Response().Header().Set(echo.HeaderLocation, to)
		return c.NoContent(http.StatusPermanentRedirect)
	}
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
	return s.withWriteID(write, func(c echo.Context, answer json.RawMessage) error {
		switch {
		case c.Request().Method == http.MethodPost:
			if r.Path == storage.Loans.Path {
				s.releasedOnReplay(c)
			}
			c.Response().Header().Set(echo.HeaderLocation, r.Path+"/"+recordID(answer))
			return c.JSON(http.StatusCreated, answer)
		case len(answer) == 0 || string(answer) == "null":
			return c.NoContent(http.StatusNoContent)
		}
		return c.JSON(http.StatusOK, answer)
	})
}

// withWriteID is write carrying the write's own id (storage.Write) when
// the caller names one (schemas.HeaderWriteID, with the digest
// schemas.HeaderWriteDigest gives); a write whose id landed before is
// answered by replay with that write's answer, and
// schemas.HeaderWriteReplayed.
func (s *Server) withWriteID(write echo.HandlerFunc, replay func(c echo.Context, answer json.RawMessage) error) echo.HandlerFunc {
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
		return replay(c, replayed.Answer)
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
		written, err := s.checkOutLoan(c, w, h)
		if err != nil {
			return err
		}
		stored = written.Loan
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
	if f.Offset, f.Limit, err = pageParams(c, schemas.MaxRecordsLimit); err != nil {
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
	if v := c.Request().Header.Get(schemas.HeaderRenewalOverride); v != "" && (r.Path != storage.Loans.Path || c.Request().Header.Get(schemas.HeaderRenewalCount) == "") {
		return errs.Errorf(errs.KindBadRequest, schemas.CodeInvalidHeader, "%s is a renewal's: it goes with %s on a loan's replacement",
			schemas.HeaderRenewalOverride, schemas.HeaderRenewalCount).With("override", truncateText(v))
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
		w := storage.RenewalWrite{LoanID: id, Loan: doc, LoanVersion: version, RenewalCount: int(n)}
		if err := s.renewalOverride(c, &w); err != nil {
			return err
		}
		stored, err := s.svc.Loans.RenewLoan(c.Request().Context(), tenantOf(c), w)
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
		sp := c.Request().Header.Get(schemas.HeaderLoanActionServicePoint)
		if sp != "" && !s.Schemas().ValidUUID(sp) {
			return errs.Errorf(errs.KindBadRequest, schemas.CodeInvalidHeader, "%s must be a UUID", schemas.HeaderLoanActionServicePoint).
				With("servicePointId", truncateText(sp))
		}
		err = s.svc.Loans.ActOnLoan(c.Request().Context(), tenantOf(c), storage.LoanActionWrite{LoanID: id, Loan: doc, ItemVersion: n,
			LoanVersion: version, ServicePointID: sp})
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

// renewalOverride reads schemas.HeaderRenewalOverride onto w: the
// refusals an override lifts, for a caller holding
// schemas.PermissionRenewalOverride.
func (s *Server) renewalOverride(c echo.Context, w *storage.RenewalWrite) error {
	v := c.Request().Header.Get(schemas.HeaderRenewalOverride)
	if v == "" {
		return nil
	}
	if err := s.cfg.Auth.Require(serverkit.Claims(c.Request().Context()), schemas.PermissionRenewalOverride); err != nil {
		return err
	}
	for _, block := range strings.Split(v, ",") {
		switch strings.TrimSpace(block) {
		case "renewalBlock":
			w.OverrideRenewal = true
		case "patronBlock":
			w.OverridePatronBlock = true
		default:
			return errs.Errorf(errs.KindBadRequest, schemas.CodeInvalidHeader,
				"%s lists the refusals an override lifts: renewalBlock, patronBlock", schemas.HeaderRenewalOverride).
				With("override", truncateText(v))
		}
	}
	return nil
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

// pageParams reads offset and limit, as every list takes them: limit at
// most most.
func pageParams(c echo.Context, most int) (offset, limit int, err error) {
	if offset, err = queryInt(c, "offset", 0, 0, 1<<31-1); err != nil {
		return 0, 0, err
	}
	if limit, err = queryInt(c, "limit", schemas.DefaultPageSize, 0, most); err != nil {
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
