package httpapi

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/checkoutlock/schemas/text"

	"github.com/checkoutlock/schemas/errs"

	"github.com/labstack/echo/v4"

	"github.com/checkoutlock/circulation"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/locksettings"
	"github.com/checkoutlock/serverkit"
)

type statusJSON struct {
	Name string `json:"name"`
}

// itemSummaryJSON and borrowerJSON are the summaries a loan answer carries
// (schemas/circulation-loan.json).
type itemSummaryJSON struct {
	ID             string     `json:"id"`
	Barcode        string     `json:"barcode,omitempty"`
	Title          string     `json:"title"`
	Status         statusJSON `json:"status"`
	MaterialTypeID string     `json:"materialTypeId,omitempty"`
	LoanTypeID     string     `json:"loanTypeId,omitempty"`
	// InTransitDestinationServicePointID is where an item In transit goes.
	InTransitDestinationServicePointID string `json:"inTransitDestinationServicePointId,omitempty"`
}

type borrowerJSON struct {
	ID         string `json:"id,omitempty"`
	Barcode    string `json:"barcode,omitempty"`
	FirstName  string `json:"firstName,omitempty"`
	MiddleName string `json:"middleName,omitempty"`
	LastName   string `json:"lastName,omitempty"`
	// PatronGroup is the borrower's patron group's id, as FOLIO's loans
	// name it.
	PatronGroup string `json:"patronGroup,omitempty"`
}

type loanJSON struct {
	ID                     string          `json:"id"`
	UserID                 string          `json:"userId,omitempty"`
	ItemID                 string          `json:"itemId"`
	LoanDate               string          `json:"loanDate"`
	DueDate                string          `json:"dueDate,omitempty"`
	RenewalCount           int             `json:"renewalCount,omitempty"`
	ReturnDate             string          `json:"returnDate,omitempty"`
	Action                 string          `json:"action"`
	ActionComment          string          `json:"actionComment,omitempty"`
	Status                 statusJSON      `json:"status"`
	LoanPolicyID           string          `json:"loanPolicyId,omitempty"`
	LoanPolicy             *loanPolicyJSON `json:"loanPolicy,omitempty"`
	CheckoutServicePointID string          `json:"checkoutServicePointId,omitempty"`
	CheckinServicePointID  string          `json:"checkinServicePointId,omitempty"`
	Item                   itemSummaryJSON `json:"item"`
	Borrower               borrowerJSON    `json:"borrower"`
	Offline                *offlineJSON    `json:"offline,omitempty"`
}

// offlineJSON is a loan's offline: a loan made offline.
type offlineJSON struct {
	TransactionDate string   `json:"transactionDate"`
	RecordedBy      string   `json:"recordedBy,omitempty"`
	Kiosk           string   `json:"kiosk,omitempty"`
	BrokenRules     []string `json:"brokenRules"`
}

// loanPolicyJSON names a loan's policy, as FOLIO's loans do.
type loanPolicyJSON struct {
	Name string `json:"name"`
}

func itemSummary(i circulation.Item) itemSummaryJSON {
	return itemSummaryJSON{ID: i.ID, Barcode: i.Barcode, Title: i.Title, Status: statusJSON{Name: i.Status},
		MaterialTypeID: i.MaterialTypeID, LoanTypeID: i.LoanTypeID(), InTransitDestinationServicePointID: i.InTransitDestinationServicePointID}
}

// checkOut is POST /circulation/check-out-by-barcode. A self-check
// machine may give the patron's PIN in X-Patron-Pin, checked against the
// patron before any refusal is told (circulation.CheckOut).
func (s *Server) checkOut(c echo.Context) error {
	var req struct {
		ItemBarcode      string `json:"itemBarcode"`
		UserBarcode      string `json:"userBarcode"`
		ProxyUserBarcode string `json:"proxyUserBarcode"`
		ServicePointID   string `json:"servicePointId"`
		LoanDate         string `json:"loanDate"`
		OverrideBlocks   *struct {
			PatronBlock          *struct{} `json:"patronBlock"`
			ItemLimitBlock       *struct{} `json:"itemLimitBlock"`
			ItemNotLoanableBlock *struct {
				DueDate string `json:"dueDate"`
			} `json:"itemNotLoanableBlock"`
			Comment *string `json:"comment"`
		} `json:"overrideBlocks"`
		Offline *struct {
			TransactionDate string `json:"transactionDate"`
			DueDate         string `json:"dueDate"`
		} `json:"offline"`
	}
	if err := s.bind(c, &req); err != nil {
		return err
	}
	var offline *circulation.Offline
	if o := req.Offline; o != nil {
		var err error
		if offline, err = s.offlineCheckOut(c, o.TransactionDate, o.DueDate, req.LoanDate); err != nil {
			return err
		}
	}
	if req.ProxyUserBarcode != "" && req.ProxyUserBarcode != req.UserBarcode {
		return errs.Errorf(errs.KindInvalid, schemas.CodeValidation,
			"proxyUserBarcode: check-out by proxy is not supported").With("proxyUserBarcode", req.ProxyUserBarcode)
	}
	loanDate, err := parseDate("loanDate", req.LoanDate)
	if err != nil {
		return err
	}
	if err := s.allowLoanDate(c, loanDate, req.LoanDate); err != nil {
		return err
	}
	var overrides circulation.Overrides
	if o := req.OverrideBlocks; o != nil {
		overrides = circulation.Overrides{PatronBlock: o.PatronBlock != nil, ItemLimit: o.ItemLimitBlock != nil,
			ItemNotLoanable: o.ItemNotLoanableBlock != nil}
		if o.Comment != nil {
			overrides.Comment = *o.Comment
		}
		if o.ItemNotLoanableBlock != nil && o.ItemNotLoanableBlock.DueDate != "" {
			if overrides.DueDate, err = parseDate("overrideBlocks.itemNotLoanableBlock.dueDate", o.ItemNotLoanableBlock.DueDate); err != nil {
				return err
			}
		}
		if err := s.allowOverrides(c, overrides, o.Comment != nil, loanDate); err != nil {
			return err
		}
	}
	start := time.Now()
	res, err := s.svc.Circulation.CheckOut(c.Request().Context(), circulation.CheckOutRequest{
		ItemBarcode: req.ItemBarcode, UserBarcode: req.UserBarcode, ServicePointID: req.ServicePointID, LoanDate: loanDate,
		Overrides: overrides, Offline: offline, Pin: c.Request().Header.Get(schemas.HeaderPatronPin),
	})
	s.metrics.observeCheckOut(err, time.Since(start))
	if err != nil {
		return err
	}
	l := res.Loan
	serverkit.Log(c, slog.String("user_id", l.UserID), slog.String("item_id", l.ItemID), slog.String("loan_id", l.ID))
	if overrides.Any() {
		// The audit log of overrides: who lifted which block, for whom, why.
		s.Logger().InfoContext(c.Request().Context(), "check-out override", slog.String("loan_id", l.ID),
			slog.String("user_id", l.UserID), slog.String("item_id", l.ItemID), slog.String("by", serverkit.Caller(c.Request().Context())),
			slog.Bool("patron_block", overrides.PatronBlock), slog.Bool("item_limit", overrides.ItemLimit),
			slog.Bool("item_not_loanable", overrides.ItemNotLoanable), slog.String("comment", overrides.Comment))
	}
	if o := l.Offline; o != nil && len(o.BrokenRules) > 0 {
		// The operator's history has its line; the log says it too.
		s.Logger().WarnContext(c.Request().Context(), schemas.OfflineWords(o.BrokenRules), slog.String("loan_id", l.ID),
			slog.String("user_id", l.UserID), slog.String("item_id", l.ItemID), slog.Any("broken_rules", o.BrokenRules),
			slog.String("by", o.RecordedBy))
	}
	c.Response().Header().Set(echo.HeaderLocation, "/circulation/loans/"+l.ID)
	// A self-check machine is told of the borrower what a patron summary
	// without the PIN tells (the barcode it gave): no id, no name. The
	// patron's name is the summary's, with the PIN.
	if !s.holds(c, schemas.PermissionPatronSummaryDetails) {
		out := loanAnswer(l, res.Item, res.Patron.Unnamed(req.UserBarcode))
		out.UserID = ""
		return c.JSON(http.StatusCreated, out)
	}
	return c.JSON(http.StatusCreated, loanAnswer(l, res.Item, res.Patron))
}

// offlineCheckOut reads a check-out's offline (its transactionDate and
// dueDate as sent): it takes PermissionCheckOutOffline, a transaction
// date no later than schemas.MaxLoanDateAhead past this server's clock,
// and no loanDate beside it (the transaction's date is the loan's). Its
// age is the service's to judge (circulation.Offline).
func (s *Server) offlineCheckOut(c echo.Context, rawDate, rawDue, loanDate string) (*circulation.Offline, error) {
	if !s.holds(c, schemas.PermissionCheckOutOffline) {
		return nil, errs.Errorf(errs.KindInvalid, schemas.CodeInsufficientOverridePermissions,
			"A check-out made offline takes permission %s", schemas.PermissionCheckOutOffline).
			With("missingPermissions", schemas.PermissionCheckOutOffline)
	}
	if loanDate != "" {
		return nil, errs.Errorf(errs.KindInvalid, schemas.CodeValidation,
			"loanDate: a check-out made offline is dated by its offline.transactionDate; give one of them").With("loanDate", loanDate)
	}
	at, err := parseDate("offline.transactionDate", rawDate)
	if err != nil {
		return nil, err
	}
	if at.After(time.Now().Add(schemas.MaxLoanDateAhead)) {
		return nil, errs.Errorf(errs.KindInvalid, schemas.CodeValidation,
			"offline.transactionDate: %s is more than %s ahead of this server's clock", rawDate, schemas.MaxLoanDateAhead).
			With("transactionDate", rawDate)
	}
	due, err := parseDate("offline.dueDate", rawDue)
	if err != nil {
		return nil, err
	}
	if !due.IsZero() && !due.After(at) {
		return nil, errs.Errorf(errs.KindInvalid, schemas.CodeValidation, "offline.dueDate: %s is not after the transaction date", rawDue).
			With("dueDate", rawDue)
	}
	if due.After(at.Add(schemas.MaxOfflineLoanPeriod)) {
		return nil, errs.Errorf(errs.KindInvalid, schemas.CodeValidation,
			"offline.dueDate: %s is more than %d days after the transaction date", rawDue, int(schemas.MaxOfflineLoanPeriod.Hours()/24)).
			With("dueDate", rawDue)
	}
	return &circulation.Offline{TransactionDate: at, DueDate: due, RecordedBy: serverkit.Caller(c.Request().Context()),
		Kiosk: circulation.OkapiFrom(c.Request().Context()).Kiosk, Tenant: c.Request().Header.Get(schemas.HeaderTenant)}, nil
}

// loanAnswer is a loan with its item and borrower, as a check-out and a
// renewal answer it (circulation-loan.json).
func loanAnswer(l circulation.Loan, item circulation.Item, patron circulation.Patron) loanJSON {
	return loanJSON{
		ID: l.ID, UserID: l.UserID, ItemID: l.ItemID, LoanDate: schemas.FormatTime(l.LoanDate), DueDate: schemas.FormatTime(l.DueDate),
		RenewalCount: l.RenewalCount, ReturnDate: schemas.FormatTime(l.ReturnDate),
		Action: l.Action, ActionComment: l.ActionComment, Status: statusJSON{Name: l.Status}, LoanPolicyID: l.LoanPolicyID,
		CheckoutServicePointID: l.CheckoutServicePointID, CheckinServicePointID: l.CheckinServicePointID, Item: itemSummary(item),
		Borrower: borrowerJSON{ID: patron.ID, Barcode: patron.Barcode, FirstName: patron.FirstName, LastName: patron.LastName},
		Offline:  offlineAnswer(l.Offline),
	}
}

// offlineAnswer is a loan's offline as answered; nil for a loan made live.
func offlineAnswer(o *circulation.OfflineRecord) *offlineJSON {
	if o == nil {
		return nil
	}
	return &offlineJSON{TransactionDate: schemas.FormatTime(o.TransactionDate), RecordedBy: o.RecordedBy, Kiosk: o.Kiosk,
		BrokenRules: append([]string{}, o.BrokenRules...)}
}

// renew is POST /circulation/renew-by-barcode (FOLIO's): 200 with the loan
// renewed and Location. A self-check machine gives the patron's PIN in
// X-Patron-Pin, which the tenant may require (circulation.RenewByBarcode);
// its answer names the borrower (userId, and the borrower's id and name)
// only when the PIN was given and right, as a patron summary's would.
func (s *Server) renew(c echo.Context) error {
	var req struct {
		ItemBarcode    string                 `json:"itemBarcode"`
		UserBarcode    string                 `json:"userBarcode"`
		ServicePointID string                 `json:"servicePointId"`
		OverrideBlocks *renewalOverrideBlocks `json:"overrideBlocks"`
	}
	if err := s.bind(c, &req); err != nil {
		return err
	}
	overrides, err := s.renewalOverrides(c, req.OverrideBlocks)
	if err != nil {
		return err
	}
	res, err := s.svc.Circulation.RenewByBarcode(c.Request().Context(), circulation.RenewRequest{
		ItemBarcode: req.ItemBarcode, UserBarcode: req.UserBarcode, ServicePointID: req.ServicePointID,
		Access: s.patronAccess(c), Overrides: overrides})
	if err != nil {
		return s.overridable(c, err, overrides)
	}
	return s.renewed(c, res, overrides)
}

// renewalOverrideBlocks is a renewal's overrideBlocks, as FOLIO shapes
// them (renew-by-barcode-request.json).
type renewalOverrideBlocks struct {
	PatronBlock                 *struct{} `json:"patronBlock"`
	RenewalBlock                *struct{} `json:"renewalBlock"`
	RenewalDueDateRequiredBlock *struct {
		DueDate string `json:"dueDate"`
	} `json:"renewalDueDateRequiredBlock"`
	Comment string `json:"comment"`
}

// renewalOverrides reads a renewal's overrideBlocks (none: nil): the
// caller holds each asked block's permission
// (schemas.RenewalOverridePermissions), else every block it may not
// override is refused at once, as FOLIO refuses them (422
// INSUFFICIENT_OVERRIDE_PERMISSIONS naming the block and the permission
// missing). The comment and the due date are the renewal's to judge
// (circulation.RenewalOverrides).
func (s *Server) renewalOverrides(c echo.Context, o *renewalOverrideBlocks) (circulation.RenewalOverrides, error) {
	if o == nil {
		return circulation.RenewalOverrides{}, nil
	}
	out := circulation.RenewalOverrides{PatronBlock: o.PatronBlock != nil,
		Renewal: o.RenewalBlock != nil || o.RenewalDueDateRequiredBlock != nil, Comment: o.Comment}
	if b := o.RenewalDueDateRequiredBlock; b != nil && b.DueDate != "" {
		var err error
		if out.DueDate, err = parseDate("overrideBlocks.renewalDueDateRequiredBlock.dueDate", b.DueDate); err != nil {
			return out, err
		}
		// As stored: to the millisecond.
		out.DueDate = schemas.WireTime(out.DueDate)
	}
	asked := map[string]bool{schemas.OverridePatronBlock: o.PatronBlock != nil, schemas.OverrideRenewalBlock: o.RenewalBlock != nil,
		schemas.OverrideRenewalDueDateRequiredBlock: o.RenewalDueDateRequiredBlock != nil}
	var refused []*errs.Error
	missing := map[string]bool{}
	for _, p := range schemas.RenewalOverridePermissions {
		if asked[p.Block] && !missing[p.Permission] && !s.holds(c, p.Permission) {
			missing[p.Permission] = true
			refused = append(refused, insufficientOverride(p.Block, p.Permission))
		}
	}
	if len(refused) > 0 {
		return out, &errs.Refusal{Errors: refused}
	}
	return out, nil
}

// insufficientOverride is FOLIO's refusal of an override of block by a
// caller without permission.
func insufficientOverride(block, permission string) *errs.Error {
	e := errs.Errorf(errs.KindInvalid, schemas.CodeInsufficientOverridePermissions, "Insufficient override permissions").
		With("overridableBlock", block).With("missingPermissions", permission)
	e.Overridable = &errs.OverridableBlock{Name: block, MissingPermissions: []string{permission}}
	return e
}

// overridable is err with each of its refusals an override lifts naming
// the block that does and the permissions the caller lacks to send it
// (FOLIO's overridableBlock, which FOLIO's Users app reads to offer the
// override: it offers it when every refusal has one); but not where sent
// already overrides it: what is refused then is the override.
func (s *Server) overridable(c echo.Context, err error, sent circulation.RenewalOverrides) error {
	r, ok := errs.Outermost(err).(*errs.Refusal)
	if !ok {
		return err
	}
	for _, e := range r.Errors {
		block := schemas.RenewalOverridableBlock(e.Code)
		if block == "" || (block == schemas.OverridePatronBlock && sent.PatronBlock) || (block != schemas.OverridePatronBlock && sent.Renewal) {
			continue
		}
		e.Overridable = &errs.OverridableBlock{Name: block, MissingPermissions: s.overrideLacks(c)(block)}
	}
	return err
}

// overrideLacks is, for the caller of c, the permissions it lacks to send
// an override's block (schemas.RenewalOverridePermissions): none when it
// may.
func (s *Server) overrideLacks(c echo.Context) func(block string) []string {
	return func(block string) []string {
		missing := []string{}
		for _, p := range schemas.RenewalOverridePermissions {
			if p.Block == block && !s.holds(c, p.Permission) {
				missing = append(missing, p.Permission)
			}
		}
		return missing
	}
}

// renewByID is POST /circulation/renew-by-id (FOLIO's, as mod-patron
// renews a patron's loan): the loan of the item itemId to the patron
// userId, answered as renew answers, the borrower named: the caller named
// them by id (circulation.RenewByID).
func (s *Server) renewByID(c echo.Context) error {
	var req struct {
		ItemID         string                 `json:"itemId"`
		UserID         string                 `json:"userId"`
		ServicePointID string                 `json:"servicePointId"`
		OverrideBlocks *renewalOverrideBlocks `json:"overrideBlocks"`
	}
	if err := s.bind(c, &req); err != nil {
		return err
	}
	overrides, err := s.renewalOverrides(c, req.OverrideBlocks)
	if err != nil {
		return err
	}
	res, err := s.svc.Circulation.RenewByID(c.Request().Context(), circulation.RenewRequest{
		ItemID: strings.ToLower(req.ItemID), UserID: strings.ToLower(req.UserID), ServicePointID: req.ServicePointID,
		Overrides: overrides})
	if err != nil {
		return s.overridable(c, err, overrides)
	}
	return s.renewed(c, res, overrides)
}

// renewed answers a renewal done: 200 with the loan renewed and Location.
// An override's is logged (who lifted which refusals, for whom, why).
func (s *Server) renewed(c echo.Context, res circulation.RenewResult, overrides circulation.RenewalOverrides) error {
	l := res.Loan
	serverkit.Log(c, slog.String("user_id", l.UserID), slog.String("item_id", l.ItemID), slog.String("loan_id", l.ID))
	if overrides.Any() {
		s.Logger().InfoContext(c.Request().Context(), "renewal override", slog.String("loan_id", l.ID),
			slog.String("user_id", l.UserID), slog.String("item_id", l.ItemID), slog.String("by", serverkit.Caller(c.Request().Context())),
			slog.Bool("patron_block", overrides.PatronBlock), slog.Bool("renewal_block", overrides.Renewal),
			slog.String("comment", overrides.Comment))
	}
	c.Response().Header().Set(echo.HeaderLocation, "/circulation/loans/"+l.ID)
	out := loanAnswer(l, res.Item, res.Patron)
	if !res.Named {
		out.UserID = ""
	}
	if res.PolicyName != "" {
		out.LoanPolicy = &loanPolicyJSON{Name: res.PolicyName}
	}
	return c.JSON(http.StatusOK, out)
}

// allowLoanDate refuses a check-out's loanDate (raw as sent) that no
// caller may give, more than schemas.MaxLoanDateAhead ahead of this
// server's clock, or that the caller may not: more than
// schemas.MaxLoanDateBehind behind it without PermissionOverrideLoanDate.
// A loan dated by a kiosk is a loan of now.
func (s *Server) allowLoanDate(c echo.Context, loanDate time.Time, raw string) error {
	if loanDate.IsZero() {
		return nil
	}
	now := time.Now()
	if loanDate.After(now.Add(schemas.MaxLoanDateAhead)) {
		return errs.Errorf(errs.KindInvalid, schemas.CodeValidation,
			"loanDate: %s is more than %s ahead of this server's clock", raw, schemas.MaxLoanDateAhead).With("loanDate", raw)
	}
	if loanDate.Before(now.Add(-schemas.MaxLoanDateBehind)) && !s.holds(c, schemas.PermissionOverrideLoanDate) {
		return errs.Errorf(errs.KindInvalid, schemas.CodeInsufficientOverridePermissions,
			"loanDate: %s is more than %s before this server's clock, which takes permission %s",
			raw, schemas.MaxLoanDateBehind, schemas.PermissionOverrideLoanDate).
			With("loanDate", raw).With("missingPermissions", schemas.PermissionOverrideLoanDate)
	}
	return nil
}

// allowOverrides applies FOLIO's rules for overriding blocks
// (mod-circulation's OverridingBlockValidator and OverridingLoanValidator):
// the caller holds each override's permission, the comment is there, and
// an item that is not loanable gets a due date after the loan date. Each
// is refused with FOLIO's message.
func (s *Server) allowOverrides(c echo.Context, o circulation.Overrides, hasComment bool, loanDate time.Time) error {
	asked := map[string]bool{"patronBlock": o.PatronBlock, "itemLimitBlock": o.ItemLimit, "itemNotLoanableBlock": o.ItemNotLoanable}
	for _, p := range schemas.OverridePermissions {
		if asked[p.Block] && !s.holds(c, p.Permission) {
			return insufficientOverride(p.Block, p.Permission)
		}
	}
	if !hasComment {
		return errs.Errorf(errs.KindInvalid, schemas.CodeValidation, "Override should be performed with the comment specified").
			With("comment", "")
	}
	if o.ItemNotLoanable && o.DueDate.IsZero() {
		return errs.Errorf(errs.KindInvalid, schemas.CodeValidation, "Override should be performed with due date specified").
			With("dueDate", "")
	}
	if loanDate.IsZero() {
		loanDate = time.Now()
	}
	if o.ItemNotLoanable && !o.DueDate.After(loanDate) {
		return errs.Errorf(errs.KindInvalid, schemas.CodeValidation, "Due date should be later than loan date").
			With("dueDate", schemas.FormatTime(o.DueDate))
	}
	return nil
}

// checkIn is POST /circulation/check-in-by-barcode.
func (s *Server) checkIn(c echo.Context) error {
	var req struct {
		ItemBarcode    string `json:"itemBarcode"`
		ServicePointID string `json:"servicePointId"`
		CheckInDate    string `json:"checkInDate"`
		// Resolution is one of the schema's enum, or "".
		Resolution string `json:"claimedReturnedResolution"`
	}
	if err := s.bind(c, &req); err != nil {
		return err
	}
	checkInDate, err := parseDate("checkInDate", req.CheckInDate)
	if err != nil {
		return err
	}
	res, err := s.svc.Circulation.CheckIn(c.Request().Context(), circulation.CheckInRequest{
		ItemBarcode: req.ItemBarcode, ServicePointID: req.ServicePointID, CheckInDate: checkInDate, ClaimedReturnedResolution: req.Resolution,
	})
	if err != nil {
		return err
	}
	serverkit.Log(c, slog.String("item_id", res.Item.ID))
	if res.Loan != nil {
		serverkit.Log(c, slog.String("loan_id", res.Loan.ID))
	}
	return c.JSON(http.StatusOK, checkInAnswer(res))
}

// listLoans is GET /circulation/loans (FOLIO's): storage's loans, by a CQL
// query as FOLIO's clients send it (query, with its sortBy; storage's one
// translator reads it) and the filters userId, itemId and status, a page,
// each loan with FOLIO's summaries.
func (s *Server) listLoans(c echo.Context) error {
	q, err := queryParams(c, "query", "userId", "itemId", "status", "offset", "limit")
	if err != nil {
		return err
	}
	for _, name := range []string{"userId", "itemId"} {
		if v := q.Get(name); v != "" && !s.Schemas().ValidUUID(v) {
			return invalidParam(name, v, "must be a UUID")
		}
	}
	f := circulation.LoanFilter{UserID: strings.ToLower(q.Get("userId")), ItemID: strings.ToLower(q.Get("itemId")),
		Status: q.Get("status"), Query: q.Get("query")}
	if f.Status != "" && !slices.Contains(schemas.LoanStatuses, f.Status) {
		return invalidParam("status", f.Status, fmt.Sprintf("must be %q or %q", schemas.LoanOpen, schemas.LoanClosed))
	}
	if f.Offset, err = intParam(c, "offset", 0, 0, 1<<31-1); err != nil {
		return err
	}
	if f.Limit, err = intParam(c, "limit", schemas.DefaultPageSize, 0, schemas.MaxRecordsLimit); err != nil {
		return err
	}
	ctx := c.Request().Context()
	page, err := s.svc.Storage.Loans(ctx, f)
	if err != nil {
		return err
	}
	out, err := s.summarizedPage(ctx, page, "loans", s.summarizeLoans)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// getLoan is GET /circulation/loans/{id}, where a check-out's Location
// points: the loan with FOLIO's summaries.
func (s *Server) getLoan(c echo.Context) error {
	id := c.Param("id")
	if strings.Contains(id, "/") {
		return echo.ErrNotFound
	}
	if u, err := url.PathUnescape(id); err == nil {
		id = u
	}
	if !s.Schemas().ValidUUID(id) {
		return errs.Errorf(errs.KindBadRequest, schemas.CodeInvalidID, "Invalid loan id").With("id", truncate(id))
	}
	ctx := c.Request().Context()
	doc, err := s.svc.Storage.Loan(ctx, id)
	if err != nil {
		return err
	}
	out, err := s.summarizedOne(ctx, doc, s.summarizeLoans)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// loanID is the path's loan id (pathID).
func (s *Server) loanID(c echo.Context) (string, error) { return s.pathID(c, "loan") }

// pathID is the path's id of what: a UUID, in lower case (400 otherwise).
func (s *Server) pathID(c echo.Context, what string) (string, error) {
	return s.pathUUID(c, "id", what)
}

// pathUUID is the path's parameter param, the id of what: a UUID, in lower
// case (400 otherwise).
func (s *Server) pathUUID(c echo.Context, param, what string) (string, error) {
	id := c.Param(param)
	if u, err := url.PathUnescape(id); err == nil {
		id = u
	}
	if !s.Schemas().ValidUUID(id) {
		return "", errs.Errorf(errs.KindBadRequest, schemas.CodeInvalidID, "Invalid %s id", what).With("id", truncate(id))
	}
	return strings.ToLower(id), nil
}

// anonymizePatron is POST /loan-anonymization/by-user/{userId} (FOLIO's):
// the patron's closed loans forget them; 200 with the loans anonymized.
func (s *Server) anonymizePatron(c echo.Context) error {
	id, err := s.pathUUID(c, "userId", "patron")
	if err != nil {
		return err
	}
	out, err := s.svc.Circulation.AnonymizePatron(c.Request().Context(), id)
	if err != nil {
		return err
	}
	serverkit.Log(c, slog.String("user_id", id), slog.Int("anonymized", len(out.Anonymized)))
	return c.JSON(http.StatusOK, out)
}

// claimItemReturned is POST /circulation/loans/{id}/claim-item-returned
// (FOLIO's): 204.
func (s *Server) claimItemReturned(c echo.Context) error {
	id, err := s.loanID(c)
	if err != nil {
		return err
	}
	var req struct {
		At      string `json:"itemClaimedReturnedDateTime"`
		Comment string `json:"comment"`
	}
	if err := s.bind(c, &req); err != nil {
		return err
	}
	at, err := parseDate("itemClaimedReturnedDateTime", req.At)
	if err != nil {
		return err
	}
	serverkit.Log(c, slog.String("loan_id", id))
	if err := s.svc.Circulation.ClaimItemReturned(c.Request().Context(), id,
		circulation.ClaimItemReturnedRequest{At: at, Comment: req.Comment}); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// declareItemLost is POST /circulation/loans/{id}/declare-item-lost
// (FOLIO's): 204.
func (s *Server) declareItemLost(c echo.Context) error {
	id, err := s.loanID(c)
	if err != nil {
		return err
	}
	var req struct {
		At             string `json:"declaredLostDateTime"`
		Comment        string `json:"comment"`
		ServicePointID string `json:"servicePointId"`
	}
	if err := s.bind(c, &req); err != nil {
		return err
	}
	at, err := parseDate("declaredLostDateTime", req.At)
	if err != nil {
		return err
	}
	serverkit.Log(c, slog.String("loan_id", id))
	if err := s.svc.Circulation.DeclareItemLost(c.Request().Context(), id,
		circulation.DeclareItemLostRequest{At: at, Comment: req.Comment, ServicePointID: req.ServicePointID}); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// changeDueDate is POST /circulation/loans/{id}/change-due-date (FOLIO's):
// 204.
func (s *Server) changeDueDate(c echo.Context) error {
	id, err := s.loanID(c)
	if err != nil {
		return err
	}
	var req struct {
		DueDate string `json:"dueDate"`
	}
	if err := s.bind(c, &req); err != nil {
		return err
	}
	due, err := parseDate("dueDate", req.DueDate)
	if err != nil {
		return err
	}
	serverkit.Log(c, slog.String("loan_id", id))
	if err := s.svc.Circulation.ChangeDueDate(c.Request().Context(), id, circulation.ChangeDueDateRequest{DueDate: due}); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// addInfo is POST /circulation/loans/{id}/add-info (FOLIO's): a patron's
// or the staff's note added to the loan; 204.
func (s *Server) addInfo(c echo.Context) error {
	id, err := s.loanID(c)
	if err != nil {
		return err
	}
	var req struct {
		Action  string `json:"action"`
		Comment string `json:"actionComment"`
	}
	if err := s.bind(c, &req); err != nil {
		return err
	}
	serverkit.Log(c, slog.String("loan_id", id))
	if err := s.svc.Circulation.AddInfo(c.Request().Context(), id, req.Action, req.Comment); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// replaceLoan is PUT /circulation/loans/{id} (FOLIO's), as FOLIO's Users
// app sends it to change a loan's due date: the loan as read, its dueDate
// changed and its action dueDateChanged. It changes the due date alone,
// as changeDueDate does, at the _version sent; a body naming another
// action, a closed status, another loan, borrower or item is refused
// (every other write of a loan has a route of its own). 204.
func (s *Server) replaceLoan(c echo.Context) error {
	id, err := s.loanID(c)
	if err != nil {
		return err
	}
	var req struct {
		ID      string `json:"id"`
		UserID  string `json:"userId"`
		ItemID  string `json:"itemId"`
		DueDate string `json:"dueDate"`
		Action  string `json:"action"`
		Status  struct {
			Name string `json:"name"`
		} `json:"status"`
		Version int `json:"_version"`
	}
	if err := s.bind(c, &req); err != nil {
		return err
	}
	refused := func(member, value, format string, args ...any) error {
		return &errs.Refusal{Errors: []*errs.Error{errs.Errorf(errs.KindInvalid, schemas.CodeValidation, format, args...).
			With(member, truncate(value))}}
	}
	switch {
	case req.ID != "" && !strings.EqualFold(req.ID, id):
		return refused("id", req.ID, "id: %s in the body does not match %s in the path", truncate(req.ID), id)
	case req.Action != "" && req.Action != circulation.ActionDueDateChanged:
		return refused("action", req.Action, "action: a loan replaced here only has its due date changed (%s); a renewal, "+
			"a claim, a declaration of loss and a check-in have routes of their own", circulation.ActionDueDateChanged)
	case req.Status.Name != "" && req.Status.Name != schemas.LoanOpen:
		return refused("status", req.Status.Name, "status: a loan is closed only by a check-in (POST /circulation/check-in-by-barcode)")
	}
	due, err := parseDate("dueDate", req.DueDate)
	if err != nil {
		return err
	}
	serverkit.Log(c, slog.String("loan_id", id))
	if err := s.svc.Circulation.ChangeDueDate(c.Request().Context(), id, circulation.ChangeDueDateRequest{DueDate: due,
		Version: req.Version, UserID: req.UserID, ItemID: req.ItemID}); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// settingsJSON is schemas/checkout-lock-settings-effective.json.
type settingsJSON struct {
	Enabled           bool   `json:"checkOutLockFeatureEnabled"`
	LockTTL           int64  `json:"lockTtl"`
	RetryIntervalsMs  []int  `json:"retryIntervalsMs"`
	NoOfRetryAttempts int    `json:"noOfRetryAttempts"`
	SettingsError     string `json:"settingsError,omitempty"`
	Sources           struct {
		Enabled        circulation.Source `json:"checkOutLockFeatureEnabled"`
		LockTTL        circulation.Source `json:"lockTtl"`
		RetryIntervals circulation.Source `json:"retryIntervalsMs"`
	} `json:"sources"`
	// Environment is what each field takes when the stored entry leaves
	// it out, or holds it as null.
	Environment struct {
		Enabled          bool  `json:"checkOutLockFeatureEnabled"`
		LockTTL          int64 `json:"lockTtl"`
		RetryIntervalsMs []int `json:"retryIntervalsMs"`
	} `json:"environment"`
	Bounds     boundsJSON  `json:"bounds"`
	LastChange *changeJSON `json:"lastChange,omitempty"`
}

// changeJSON is who changed the stored settings last, and when.
type changeJSON struct {
	UserID   string `json:"userId,omitempty"`
	UserName string `json:"userName,omitempty"`
	Date     string `json:"date"`
}

type rangeJSON struct {
	Minimum int64 `json:"minimum"`
	Maximum int64 `json:"maximum"`
}

type boundsJSON struct {
	LockTTL        rangeJSON `json:"lockTtl"`
	RetryWait      rangeJSON `json:"retryWaitMs"`
	MaxRetries     int       `json:"maxRetries"`
	MaxTotalWaitMs int64     `json:"maxTotalWaitMs"`
}

func toSettingsJSON(s, env circulation.LockSettings, b locksettings.Bounds) settingsJSON {
	out := settingsJSON{Enabled: s.Enabled, LockTTL: s.LockTTL.Milliseconds(), NoOfRetryAttempts: len(s.RetryIntervals),
		SettingsError: s.SettingsError, RetryIntervalsMs: millis(s.RetryIntervals)}
	out.Environment.Enabled, out.Environment.LockTTL, out.Environment.RetryIntervalsMs = env.Enabled, env.LockTTL.Milliseconds(),
		millis(env.RetryIntervals)
	out.Sources.Enabled, out.Sources.LockTTL, out.Sources.RetryIntervals = s.EnabledSource, s.LockTTLSource, s.RetrySource
	out.Bounds = boundsJSON{
		LockTTL:        rangeJSON{b.MinLockTTL.Milliseconds(), b.MaxLockTTL.Milliseconds()},
		RetryWait:      rangeJSON{b.MinRetryWait.Milliseconds(), b.MaxRetryWait.Milliseconds()},
		MaxRetries:     b.MaxRetries,
		MaxTotalWaitMs: b.MaxTotalWait.Milliseconds(),
	}
	if s.ChangedAt != "" {
		out.LastChange = &changeJSON{UserID: s.ChangedBy, Date: s.ChangedAt}
	}
	return out
}

// millis is ds in whole milliseconds.
func millis(ds []time.Duration) []int {
	out := make([]int, len(ds))
	for i, d := range ds {
		out[i] = int(d.Milliseconds())
	}
	return out
}

// settingsAnswer answers the settings in effect, naming who changed them
// last.
func (s *Server) settingsAnswer(c echo.Context, effective circulation.LockSettings) error {
	out := toSettingsJSON(effective, s.svc.Settings.Environment(), s.svc.Settings.Bounds())
	if out.LastChange != nil {
		out.LastChange.UserName = s.names(c.Request().Context()).person(out.LastChange.UserID)
	}
	return c.JSON(http.StatusOK, out)
}

func (s *Server) getSettings(c echo.Context) error {
	effective, err := s.svc.Settings.Effective(c.Request().Context())
	if err != nil {
		return err
	}
	return s.settingsAnswer(c, effective)
}

// putSettings replaces the stored settings with the body, the whole
// document.
func (s *Server) putSettings(c echo.Context) error {
	var stored locksettings.Stored
	if err := s.bind(c, &stored); err != nil {
		return err
	}
	effective, err := s.svc.Settings.Put(c.Request().Context(), stored)
	if err != nil {
		return err
	}
	return s.settingsAnswer(c, effective)
}

// patchSettings changes only the fields the body names (a JSON merge
// patch; null removes a field).
func (s *Server) patchSettings(c echo.Context) error {
	var patch json.RawMessage
	if err := s.bind(c, &patch, mimeMergePatch); err != nil {
		return err
	}
	effective, err := s.svc.Settings.Patch(c.Request().Context(), patch)
	if err != nil {
		return err
	}
	return s.settingsAnswer(c, effective)
}

// parseDate reads an optional date-time the schema accepted, by the
// schema's own rule (schemas.ParseDateTime: RFC 3339, a lowercase "t" and
// "z" read, years schemas.MinYear to MaxYear); anything else is refused
// here, before anything is changed, never replaced by now.
func parseDate(field, value string) (time.Time, error) {
	if value == "" {
		return time.Time{}, nil
	}
	t, err := schemas.ParseDateTime(value)
	if err != nil {
		return time.Time{}, errs.Errorf(errs.KindInvalid, schemas.CodeValidation,
			"%s: %q %v", field, truncate(value), err).With(field, truncate(value))
	}
	return t, nil
}

// queryParams returns the request's query parameters, refusing (422) any
// not among allowed and any given more than once: a misspelt or repeated
// filter must not silently widen a list to every patron's loans.
func queryParams(c echo.Context, allowed ...string) (url.Values, error) {
	q := c.QueryParams()
	for name, values := range q {
		if !slices.Contains(allowed, name) {
			return nil, invalidParam(name, strings.Join(values, ","), "is not a parameter of this call; it takes "+strings.Join(allowed, ", "))
		}
		if len(values) > 1 {
			return nil, invalidParam(name, values[0], "must be given at most once")
		}
	}
	return q, nil
}

// intParam reads an integer query parameter within [min, max].
func intParam(c echo.Context, name string, def, min, max int) (int, error) {
	raw := c.QueryParam(name)
	if raw == "" {
		return def, nil
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < min || n > max {
		return 0, invalidParam(name, raw, "must be an integer from "+strconv.Itoa(min)+" to "+strconv.Itoa(max))
	}
	return n, nil
}

func invalidParam(name, value, rule string) *errs.Error {
	return errs.Errorf(errs.KindInvalid, schemas.CodeInvalidParameter, "%s %s", name, rule).With(name, truncate(value))
}

// truncate is a client's value as an answer repeats it (schemas.Echoed).
func truncate(s string) string { return text.Echoed(s) }
