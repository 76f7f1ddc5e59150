package httpapi

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/checkoutlock/circulation"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
	"github.com/checkoutlock/schemas/errs/errhttp"
	"github.com/checkoutlock/serverkit"
)

// routeFeeFineActions serves mod-feesfines' actions on an account at its
// paths: POST /accounts/{id}/pay, waive, transfer, refund, cancel, each
// but cancel with its check (/accounts/{id}/check-pay, ...).
func (s *Server) routeFeeFineActions() {
	for _, a := range schemas.FeeFineActions {
		s.Handle(http.MethodPost, "/accounts/:id/"+string(a), s.keyed(func(c echo.Context) error { return s.actOnFeeFine(c, a) }), s.tenant)
		if a.Checked() {
			s.Handle(http.MethodPost, "/accounts/:id/check-"+string(a), func(c echo.Context) error { return s.checkFeeFine(c, a) }, s.tenant)
		}
	}
}

// feeFineRequest is mod-feesfines' defaultActionRequest and
// cancelActionRequest, as the routes' schemas take them.
type feeFineRequest struct {
	Amount             string `json:"amount"`
	PaymentMethod      string `json:"paymentMethod"`
	TransactionInfo    string `json:"transactionInfo"`
	Comments           string `json:"comments"`
	NotifyPatron       bool   `json:"notifyPatron"`
	ServicePointID     string `json:"servicePointId"`
	UserName           string `json:"userName"`
	CancellationReason string `json:"cancellationReason"`
}

// actOnFeeFine is POST /accounts/{id}/{action} (mod-feesfines'): 201 with
// the action's answer (fee-fine-action-response.json). Sent again with
// its Idempotency-Key it answers the first call's answer, and moves no
// more money. A refusal is 422 with mod-feesfines' actionFailureResponse
// (accountId, amount, errorMessage) and FOLIO's error envelope, in one
// body; an account that does not exist, 404.
func (s *Server) actOnFeeFine(c echo.Context, a schemas.FeeFineAction) error {
	id, err := s.pathID(c, "fee/fine")
	if err != nil {
		return err
	}
	var req feeFineRequest
	if err := s.bind(c, &req); err != nil {
		return err
	}
	serverkit.Log(c, slog.String("account_id", id), slog.String("fee_fine_action", string(a)))
	answer, err := s.svc.Circulation.ActOnFeeFines(c.Request().Context(), circulation.FeeFineAction{AccountIDs: []string{id},
		Action: a, Amount: req.Amount, PaymentMethod: req.PaymentMethod, TransactionInfo: req.TransactionInfo, Comments: req.Comments,
		NotifyPatron: req.NotifyPatron, ServicePointID: req.ServicePointID, UserName: req.UserName, CancellationReason: req.CancellationReason})
	if e, ok := errs.As(err); ok && e.Kind == errs.KindInvalid {
		return c.JSON(http.StatusUnprocessableEntity, actionFailure{AccountID: id, Amount: req.Amount, ErrorMessage: e.Message,
			Errors: errhttp.Single(e.Message, e.Code, e.Parameters...).Errors})
	}
	if err != nil {
		return err
	}
	return c.JSONBlob(http.StatusCreated, answer)
}

// payPatronFees is POST /circulation/patron-fees/pay: a patron's payment
// at a self-check machine (the PIN in X-Patron-Pin as the tenant
// requires it), 201 with the action's answer; sent again with its
// Idempotency-Key, the first call's answer, nothing more paid.
func (s *Server) payPatronFees(c echo.Context) error {
	var req struct {
		UserBarcode     string `json:"userBarcode"`
		Amount          string `json:"amount"`
		PaymentMethod   string `json:"paymentMethod"`
		ServicePointID  string `json:"servicePointId"`
		FeeFineID       string `json:"feeFineId"`
		TransactionInfo string `json:"transactionInfo"`
	}
	if err := s.bind(c, &req); err != nil {
		return err
	}
	answer, err := s.svc.Circulation.PayPatronFees(c.Request().Context(), circulation.PatronPayment{UserBarcode: req.UserBarcode,
		Amount: req.Amount, PaymentMethod: req.PaymentMethod, ServicePointID: req.ServicePointID, FeeFineID: strings.ToLower(req.FeeFineID),
		TransactionInfo: req.TransactionInfo, UserName: "self-check " + serverkit.Caller(c.Request().Context()), Access: s.patronAccess(c)})
	if err != nil {
		return err
	}
	return c.JSONBlob(http.StatusCreated, answer)
}

// actionFailure is mod-feesfines' actionFailureResponse with FOLIO's
// error envelope beside it: its clients read either.
type actionFailure struct {
	AccountID    string          `json:"accountId"`
	Amount       string          `json:"amount"`
	ErrorMessage string          `json:"errorMessage"`
	Errors       []errhttp.Entry `json:"errors"`
}

// checkFeeFine is POST /accounts/{id}/check-{action} (mod-feesfines'):
// 200 with allowed and what would remain; not allowed, 422 with the
// reason in errorMessage, as mod-feesfines answers.
func (s *Server) checkFeeFine(c echo.Context, a schemas.FeeFineAction) error {
	id, err := s.pathID(c, "fee/fine")
	if err != nil {
		return err
	}
	var req struct {
		Amount string `json:"amount"`
	}
	if err := s.bind(c, &req); err != nil {
		return err
	}
	answer, err := s.svc.Circulation.CheckFeeFines(c.Request().Context(), circulation.FeeFineAction{AccountIDs: []string{id}, Action: a, Amount: req.Amount})
	if err != nil {
		return err
	}
	var checked struct {
		Allowed bool `json:"allowed"`
	}
	if err := json.Unmarshal(answer, &checked); err != nil {
		return errs.Errorf(errs.KindInternal, schemas.CodeInternal, "unreadable check").Because(err)
	}
	if !checked.Allowed {
		return c.JSONBlob(http.StatusUnprocessableEntity, answer)
	}
	return c.JSONBlob(http.StatusOK, answer)
}
