package circulation

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"

	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
)

// FeeFineAction is an action on a patron's fees/fines as mod-feesfines
// takes it, as circulation writes it at storage (schemas.FeeFineActionWrite).
type FeeFineAction = schemas.FeeFineActionWrite

// ActOnFeeFines pays, waives, transfers, refunds or cancels fees/fines:
// judged and written by storage as one write with the call's write id
// (its Idempotency-Key's when it sends one), so a call sent again, on any
// instance, gets the first call's answer and moves no more money. A write
// whose answer was lost is sent again with its id (Service.once); one
// never answered is 503, naming the fee/fine and the writeId.
func (s *Service) ActOnFeeFines(ctx context.Context, a FeeFineAction) (json.RawMessage, error) {
	ctx = identified(ctx)
	var answer json.RawMessage
	err := s.settled(ctx, func(ctx context.Context) error {
		var err error
		answer, err = s.storage.ActOnFeeFines(ctx, a)
		return err
	})
	if ambiguous(err) {
		key, id := actedOn(a)
		s.logger.ErrorContext(ctx, "fee/fine action outcome unknown: storage did not answer whether it was written",
			slog.String(key, id), slog.String("action", string(a.Action)), slog.Any("error", err))
		return nil, unanswered(ctx, err, "fee/fine action", key, id)
	}
	if err != nil {
		return nil, err
	}
	return compact(answer)
}

// actedOn names what a is on, as its error names it: the fee/fine it
// names first ("accountId"), or the patron whose open fees/fines a
// kiosk's payment takes ("userId").
func actedOn(a FeeFineAction) (key, id string) {
	if len(a.AccountIDs) > 0 {
		return "accountId", a.AccountIDs[0]
	}
	return "userId", a.UserID
}

// compact is an action's answer as every call of it answers it, byte for
// byte: the write's own answer, its replay and the answer read back from
// its id each come spaced their own way.
func compact(answer json.RawMessage) (json.RawMessage, error) {
	var b bytes.Buffer
	if err := json.Compact(&b, answer); err != nil {
		return nil, errs.Errorf(errs.KindInternal, schemas.CodeInternal, "unreadable fee/fine action answer").Because(err)
	}
	return b.Bytes(), nil
}

// CheckFeeFines is whether the action would be allowed now, and what
// would remain: storage's judgment by the write's own rule.
func (s *Service) CheckFeeFines(ctx context.Context, a FeeFineAction) (json.RawMessage, error) {
	return s.storage.CheckFeeFines(ctx, a)
}

// PatronPayment is a payment a self-check machine takes from a patron
// (SIP2's 37 fee paid): the amount, how it was paid, and the fee/fine it
// pays (FeeFineID; "" for the patron's open fees/fines, oldest first).
type PatronPayment struct {
	UserBarcode     string
	Amount          string
	PaymentMethod   string
	ServicePointID  string
	FeeFineID       string
	TransactionInfo string
	UserName        string
	Access          PatronAccess
}

// PayPatronFees takes a patron's payment: the PIN as the tenant requires
// it (asked before anything of the patron is read, as a renewal asks
// it), then the payment of the fee/fine named, which must be the
// patron's and open, or of all the patron's open fees/fines oldest
// first, found by storage in the write (FeeFineAction.UserID), written
// as one action with the call's write id (ActOnFeeFines): a payment sent again with its Idempotency-Key, on
// any instance, is answered the first's answer and pays nothing more,
// even when what it paid left nothing open to pay.
func (s *Service) PayPatronFees(ctx context.Context, p PatronPayment) (json.RawMessage, error) {
	ctx = identified(ctx)
	answer, err := s.payPatronFees(ctx, p)
	l, landed, err := s.landed(ctx, schemas.WriteFeeFineAction, err)
	switch {
	case landed:
		return compact(l.FeeFine)
	case err != nil:
		return nil, err
	}
	return answer, nil
}

// payPatronFees is PayPatronFees' judging and write.
func (s *Service) payPatronFees(ctx context.Context, p PatronPayment) (json.RawMessage, error) {
	if err := s.pinBeforeAnything(ctx, p.Access); err != nil {
		return nil, err
	}
	// The patron's id is all the payment needs of them: storage finds
	// their open fees/fines in the write.
	patronID, found, err := s.storage.PatronIDByBarcode(ctx, p.UserBarcode)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, errs.Errorf(errs.KindNotFound, schemas.CodeUserBarcodeNotFound, "Could not find user with matching barcode").
			With("userBarcode", p.UserBarcode)
	}
	if _, err := s.named(ctx, &Patron{ID: patronID}, p.Access); err != nil {
		return nil, err
	}
	var ids []string
	if p.FeeFineID != "" {
		ids = []string{p.FeeFineID}
	}
	return s.ActOnFeeFines(ctx, FeeFineAction{UserID: patronID, AccountIDs: ids, Action: schemas.ActionPay, Amount: p.Amount,
		PaymentMethod: p.PaymentMethod, TransactionInfo: p.TransactionInfo, ServicePointID: p.ServicePointID, UserName: p.UserName})
}

// Currency is the tenant's currency, as its locale settings name it
// (schemas.Currency): what the desk shows amounts in and a kiosk's
// payment must be in.
func (s *Service) Currency(ctx context.Context) (string, error) {
	entry, found, err := s.storage.Setting(ctx, schemas.LocaleScope, schemas.LocaleKey)
	if err != nil || !found {
		return schemas.DefaultCurrency, err
	}
	return schemas.Currency(entry.Value), nil
}
