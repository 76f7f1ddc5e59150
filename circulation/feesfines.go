package circulation

import (
	"context"
	"encoding/json"
	"log/slog"

	"github.com/checkoutlock/schemas"
)

// FeeFineAction is an action on a patron's fees/fines as mod-feesfines
// takes it (its defaultActionRequest and cancelActionRequest), on the
// fees/fines AccountIDs: one for an account's route; several for a
// kiosk's payment spread over a patron's, oldest first.
type FeeFineAction struct {
	AccountIDs         []string              `json:"accountIds"`
	Action             schemas.FeeFineAction `json:"action"`
	Amount             string                `json:"amount,omitempty"`
	PaymentMethod      string                `json:"paymentMethod,omitempty"`
	TransactionInfo    string                `json:"transactionInfo,omitempty"`
	Comments           string                `json:"comments,omitempty"`
	NotifyPatron       bool                  `json:"notifyPatron,omitempty"`
	ServicePointID     string                `json:"servicePointId,omitempty"`
	UserName           string                `json:"userName,omitempty"`
	CancellationReason string                `json:"cancellationReason,omitempty"`
}

// ActOnFeeFines pays, waives, transfers, refunds or cancels fees/fines:
// judged and written by storage as one write with the call's write id
// (its Idempotency-Key's when it sends one), so a call sent again, on any
// instance, gets the first call's answer and moves no more money. A write
// whose answer was lost is sent again with its id (Service.once); one
// never answered is 503, naming the fee/fine and the writeId.
func (s *Service) ActOnFeeFines(ctx context.Context, a FeeFineAction) (json.RawMessage, error) {
	ctx = identified(ctx)
	request := ctx
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), WriteTimeout)
	defer cancel()
	var answer json.RawMessage
	err := s.once(request, ctx, func(ctx context.Context) error {
		var err error
		answer, err = s.storage.ActOnFeeFines(ctx, a)
		return err
	})
	if ambiguous(err) {
		s.logger.ErrorContext(ctx, "fee/fine action outcome unknown: storage did not answer whether it was written",
			slog.String("account_id", a.AccountIDs[0]), slog.String("action", string(a.Action)), slog.Any("error", err))
		return nil, unanswered(ctx, err, "fee/fine action", "accountId", a.AccountIDs[0])
	}
	return answer, err
}

// CheckFeeFines is whether the action would be allowed now, and what
// would remain: storage's judgment by the write's own rule.
func (s *Service) CheckFeeFines(ctx context.Context, a FeeFineAction) (json.RawMessage, error) {
	return s.storage.CheckFeeFines(ctx, a)
}
