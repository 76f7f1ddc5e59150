package storageclient

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/checkoutlock/circulation"
)

// ActOnFeeFines implements circulation.Storage: POST
// /fee-fine-storage/actions with the write's id.
func (c *Client) ActOnFeeFines(ctx context.Context, a circulation.FeeFineAction) (json.RawMessage, error) {
	var answer json.RawMessage
	err := c.call(ctx, http.MethodPost, "/fee-fine-storage/actions", a, &answer, writeHeaders(ctx)...)
	return answer, err
}

// CheckFeeFines implements circulation.Storage: POST
// /fee-fine-storage/checks.
func (c *Client) CheckFeeFines(ctx context.Context, a circulation.FeeFineAction) (json.RawMessage, error) {
	check := struct {
		AccountIDs []string `json:"accountIds"`
		Action     string   `json:"action"`
		Amount     string   `json:"amount"`
	}{a.AccountIDs, string(a.Action), a.Amount}
	var answer json.RawMessage
	err := c.call(ctx, http.MethodPost, "/fee-fine-storage/checks", check, &answer)
	return answer, err
}
