// A check-out by barcode asked of storage in one call: validation's reads
// and the check-out's write, the loan built between them.

package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
)

// checkOutInOneRequest is schemas/check-out-storage-request.json.
type checkOutInOneRequest struct {
	ID             string `json:"id"`
	ItemBarcode    string `json:"itemBarcode"`
	UserBarcode    string `json:"userBarcode"`
	ServicePointID string `json:"servicePointId"`
	LoanDate       string `json:"loanDate"`
}

// checkOutInOneJSON is schemas/check-out-storage-written.json.
type checkOutInOneJSON struct {
	Loan         json.RawMessage `json:"loan"`
	User         json.RawMessage `json:"user,omitempty"`
	Item         json.RawMessage `json:"item,omitempty"`
	MaterialType json.RawMessage `json:"materialType,omitempty"`
}

// checkOutLoanJSON is the loan a check-out opens (loan.json), as
// circulation's check-out writes it.
type checkOutLoanJSON struct {
	ID                      string     `json:"id"`
	UserID                  string     `json:"userId"`
	ItemID                  string     `json:"itemId"`
	LoanDate                string     `json:"loanDate"`
	DueDate                 string     `json:"dueDate"`
	Action                  string     `json:"action"`
	Status                  statusName `json:"status"`
	LoanPolicyID            string     `json:"loanPolicyId"`
	CheckoutServicePointID  string     `json:"checkoutServicePointId"`
	PatronGroupIDAtCheckout string     `json:"patronGroupIdAtCheckout,omitempty"`
}

type statusName struct {
	Name string `json:"name"`
}

// checkOutInOne is POST /check-out-storage/check-outs: it reads what a
// check-out's validation reads (GET /check-out-storage/validation), builds
// the loan from it, due by the loan policy's period (schemas.DueDate),
// and writes it by the check-out's own write (the loan POST's, with the
// item's version it read), which judges every rule again in its
// transaction and takes the lock the request's headers name. What it
// cannot build a loan from (no such patron or item, no loan policy) it
// refuses in FOLIO's words, as the write refuses what breaks a rule;
// the caller words a refusal as its validation does.
func (s *Server) checkOutInOne(c echo.Context) error {
	var in checkOutInOneRequest
	if err := s.bind(c, &in); err != nil {
		return err
	}
	if v := c.Request().Header.Get(schemas.HeaderCheckOutOverride); v != "" {
		return errs.Errorf(errs.KindBadRequest, schemas.CodeInvalidHeader,
			"%s: a check-out in one call lifts no block; an override is a loan's POST", schemas.HeaderCheckOutOverride).
			With("override", truncateText(v))
	}
	loanDate, err := schemas.ParseDateTime(in.LoanDate)
	if err != nil {
		return errs.Errorf(errs.KindInvalid, schemas.CodeValidation, "loanDate: %v", err).With("loanDate", truncateText(in.LoanDate))
	}
	recs, err := s.svc.CheckOuts.ReadForCheckOut(c.Request().Context(), tenantOf(c), in.ItemBarcode, in.UserBarcode)
	if errs.IsKind(err, errs.KindUnavailable) {
		// Nothing is written yet, and the caller is told so: it need not
		// wait to learn whether this call wrote (its database out of
		// reach, say).
		return errs.Errorf(errs.KindUnavailable, schemas.CodeCheckOutsBusy,
			"The check-out's records could not be read; nothing was written").Because(err)
	}
	if err != nil {
		return err
	}
	var refusals []*errs.Error
	if recs.User == nil {
		refusals = append(refusals, errs.Errorf(errs.KindInvalid, schemas.CodeUserBarcodeNotFound, "Could not find user with matching barcode").
			With("userBarcode", in.UserBarcode))
	}
	if recs.Item == nil {
		refusals = append(refusals, errs.Errorf(errs.KindInvalid, schemas.CodeItemBarcodeNotFound, "No item with barcode %s could be found", in.ItemBarcode).
			With("itemBarcode", in.ItemBarcode))
	} else if recs.User != nil && (!recs.RulesSet || recs.LoanPolicy == nil) {
		refusals = append(refusals, errs.Errorf(errs.KindInvalid, schemas.CodeNoLoanPolicy, "No loan policy applies: the circulation rules are not set").
			With("itemBarcode", in.ItemBarcode))
	}
	if len(refusals) > 0 {
		return s.refusedUnlessLanded(c, &errs.Refusal{Errors: refusals})
	}
	var user struct {
		ID          string `json:"id"`
		PatronGroup string `json:"patronGroup"`
	}
	var item struct {
		ID      string `json:"id"`
		Version int    `json:"_version"`
	}
	var policy struct {
		ID          string `json:"id"`
		LoansPolicy struct {
			Period struct {
				Duration   int    `json:"duration"`
				IntervalID string `json:"intervalId"`
			} `json:"period"`
		} `json:"loansPolicy"`
	}
	for _, read := range []struct {
		doc json.RawMessage
		v   any
	}{{recs.User, &user}, {recs.Item, &item}, {recs.LoanPolicy, &policy}} {
		if err := json.Unmarshal(read.doc, read.v); err != nil {
			return errs.Errorf(errs.KindInternal, schemas.CodeInternal, "a stored record the check-out reads cannot be read").Because(err)
		}
	}
	period := policy.LoansPolicy.Period
	loan := checkOutLoanJSON{
		ID:                      strings.ToLower(in.ID),
		UserID:                  user.ID,
		ItemID:                  item.ID,
		LoanDate:                schemas.FormatTime(loanDate),
		DueDate:                 schemas.FormatTime(schemas.DueDate(loanDate, period.Duration, period.IntervalID)),
		Action:                  schemas.LoanCheckedOut,
		Status:                  statusName{Name: schemas.LoanOpen},
		LoanPolicyID:            policy.ID,
		CheckoutServicePointID:  in.ServicePointID,
		PatronGroupIDAtCheckout: user.PatronGroup,
	}
	doc, err := json.Marshal(loan)
	if err != nil {
		return err
	}
	// The loan is held to the schema the loan's POST holds the loan it is
	// sent to: what this call builds is never written unless a loan sent
	// whole would be (a guard: schemas.DueDate keeps the one date it
	// computes within the years a record may hold).
	decoded, err := schemas.DecodeBuilt(doc)
	if err != nil {
		return err
	}
	if err := s.Schemas().Validate(loanPostSchema, decoded); err != nil {
		return s.refusedUnlessLanded(c, err)
	}
	h := recordHeader{ID: loan.ID, Status: statusField{Name: loan.Status.Name}, LoanDate: loan.LoanDate, UserID: loan.UserID,
		ServicePointID: loan.CheckoutServicePointID}
	w, err := s.checkOutWriteOf(c, loan.ID, doc, h, item.Version)
	if err != nil {
		return err
	}
	written, err := s.checkOutLoan(c, w, h)
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderLocation, storage.Loans.Path+"/"+loan.ID)
	return c.JSON(http.StatusCreated, checkOutInOneJSON{Loan: written.Loan, User: recs.User, Item: recs.Item, MaterialType: recs.MaterialType})
}

// loanPostSchema is the schema of the loan a loan's POST is sent.
var loanPostSchema = func() string {
	r, _ := schemas.RouteFor(schemas.ServiceStorage, http.MethodPost, storage.Loans.Path)
	return r.Request
}()

// refusedUnlessLanded is refused, the answer of a check-out in one call
// refused before its write, unless the call's write id had landed: a call
// sent again after its answer was lost is answered with the loan it
// wrote, whatever its reads find now (the item's barcode changed since,
// say), as its write would answer it.
func (s *Server) refusedUnlessLanded(c echo.Context, refused error) error {
	ctx := c.Request().Context()
	w, ok := storage.WriteFrom(ctx)
	if !ok {
		return refused
	}
	l, found, err := s.svc.Writes.Landed(ctx, tenantOf(c), w.ID)
	if err != nil || !found || l.Kind != schemas.WriteCheckOut || (l.Digest != "" && w.Digest != "" && l.Digest != w.Digest) {
		return refused
	}
	return &storage.Replayed{Answer: l.Answer}
}

// checkOutInOneReplayed answers a check-out in one call whose write had
// landed: the loan it wrote, alone.
func (s *Server) checkOutInOneReplayed(c echo.Context, answer json.RawMessage) error {
	s.releasedOnReplay(c)
	c.Response().Header().Set(echo.HeaderLocation, storage.Loans.Path+"/"+recordID(answer))
	return c.JSON(http.StatusCreated, checkOutInOneJSON{Loan: answer})
}
