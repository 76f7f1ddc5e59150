// Package storageclient implements circulation.Storage over circulation-
// storage's HTTP API. It passes the request's tenant and request id on, and
// maps storage's statuses and error codes back to domain errors: the one
// place where this service interprets another's answers.
package storageclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/checkoutlock/circulation"
	"github.com/checkoutlock/schemas"
)

// Client talks to one circulation-storage (or a load balancer in front of
// several).
type Client struct {
	base    string
	http    *http.Client
	timeout time.Duration
}

var _ circulation.Storage = (*Client)(nil)

// New returns a client for the storage at baseURL. timeout bounds each call.
func New(baseURL string, timeout time.Duration) *Client {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	// Check-outs fan out several calls each; keep connections warm.
	transport.MaxIdleConns = 256
	transport.MaxIdleConnsPerHost = 256
	transport.IdleConnTimeout = 90 * time.Second
	return &Client{base: strings.TrimRight(baseURL, "/"), http: &http.Client{Transport: transport}, timeout: timeout}
}

// Close drops idle connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// envelope is storage's error body.
type envelope struct {
	Errors []struct {
		Message    string                  `json:"message"`
		Code       string                  `json:"code"`
		Parameters []circulation.Parameter `json:"parameters"`
	} `json:"errors"`
}

// call sends one request and decodes a 2xx JSON answer into out (if not nil).
// Headers beyond the Okapi ones may be given as key, value pairs.
func (c *Client) call(ctx context.Context, method, path string, body any, out any, headers ...string) error {
	return c.callFor(ctx, c.timeout, method, path, body, out, headers...)
}

// callFor is call with its own timeout.
func (c *Client) callFor(ctx context.Context, timeout time.Duration, method, path string, body any, out any, headers ...string) error {
	_, err := c.exchange(ctx, timeout, method, path, body, out, headers...)
	return err
}

// callHeaders is call, returning the answer's headers too.
func (c *Client) callHeaders(ctx context.Context, method, path string, body any, out any, headers ...string) (http.Header, error) {
	return c.exchange(ctx, c.timeout, method, path, body, out, headers...)
}

// exchange is the request of call, with its own timeout; on success it
// returns the answer's headers.
func (c *Client) exchange(ctx context.Context, timeout time.Duration, method, path string, body any, out any, headers ...string) (http.Header, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var reader io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		reader = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, reader)
	if err != nil {
		return nil, err
	}
	okapi := circulation.OkapiFrom(ctx)
	req.Header.Set(schemas.HeaderTenant, okapi.Tenant)
	if okapi.RequestID != "" {
		req.Header.Set(schemas.HeaderRequestID, okapi.RequestID)
	}
	if okapi.Token != "" {
		req.Header.Set(schemas.HeaderToken, okapi.Token)
	}
	if okapi.UserID != "" {
		// Who circulation acts for, for storage's audit (the token says
		// what circulation may do; a gateway vouches for this header).
		req.Header.Set(schemas.HeaderUserID, okapi.UserID)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := c.http.Do(req)
	if err != nil {
		return nil, transportError(ctx, method, path, err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(io.LimitReader(res.Body, 32<<20))
	if err != nil {
		return nil, transportError(ctx, method, path, err)
	}
	if res.StatusCode >= 200 && res.StatusCode < 300 {
		if out == nil || res.StatusCode == http.StatusNoContent {
			return res.Header, nil
		}
		if raw, ok := out.(*json.RawMessage); ok {
			*raw = append((*raw)[:0], data...)
			return res.Header, nil
		}
		if err := json.Unmarshal(data, out); err != nil {
			return nil, circulation.Errorf(circulation.KindInternal, circulation.CodeInternal,
				"circulation-storage answered %s %s with unreadable JSON", method, path).Because(err)
		}
		return res.Header, nil
	}
	return nil, statusError(res, data, method, path)
}

// transportError is a call that got no answer: storage is unavailable,
// unless the request itself was cancelled.
func transportError(ctx context.Context, method, path string, err error) error {
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	return circulation.Errorf(circulation.KindUnavailable, circulation.CodeStorageUnavailable,
		"circulation-storage is unavailable; try again").Because(fmt.Errorf("%s %s: %w", method, path, err))
}

// statusError maps storage's error answers to domain errors, by status and
// storage's error code.
func statusError(res *http.Response, data []byte, method, path string) error {
	var env envelope
	_ = json.Unmarshal(data, &env)
	code, msg := "", fmt.Sprintf("status %d", res.StatusCode)
	var params []circulation.Parameter
	if len(env.Errors) > 0 {
		code, msg, params = env.Errors[0].Code, env.Errors[0].Message, env.Errors[0].Parameters
	}
	cause := fmt.Errorf("%s %s: %d %s: %s", method, path, res.StatusCode, code, msg)
	withParams := func(e *circulation.Error) error {
		e.Parameters = params
		return e
	}
	switch {
	case res.StatusCode == http.StatusServiceUnavailable && code == schemas.CodeLockHeld:
		return withParams(circulation.Errorf(circulation.KindConflict, circulation.CodeLockHeld, "%s", msg).Because(cause))
	case res.StatusCode == http.StatusServiceUnavailable, res.StatusCode == http.StatusBadGateway, res.StatusCode == http.StatusGatewayTimeout:
		return circulation.Errorf(circulation.KindUnavailable, circulation.CodeStorageUnavailable,
			"circulation-storage is unavailable; try again").Because(cause)
	case res.StatusCode >= 500:
		// A storage bug: not worth retrying, and the write may have happened.
		return circulation.Errorf(circulation.KindInternal, circulation.CodeInternal, "circulation-storage failed").Because(cause)
	case res.StatusCode == http.StatusUnauthorized:
		// Storage did not accept this service's credentials (its module
		// key not trusted there, say): a configuration problem.
		return withParams(circulation.Errorf(circulation.KindUnauthorized, code, "%s", msg).Because(cause))
	case res.StatusCode == http.StatusForbidden:
		// This service's module permissions do not cover the call (or,
		// behind a gateway, the caller's do not).
		return withParams(circulation.Errorf(circulation.KindForbidden, code, "%s", msg).Because(cause))
	case res.StatusCode == http.StatusNotFound:
		return circulation.Errorf(circulation.KindNotFound, circulation.CodeNotFound, "%s", msg).Because(cause)
	case res.StatusCode == http.StatusConflict && code == schemas.CodeLockLost:
		return circulation.Errorf(circulation.KindConflict, circulation.CodeLockLost,
			"The patron's check-out lock expired before the loan was created; nothing was changed, try again").Because(cause)
	case res.StatusCode == http.StatusConflict && code == schemas.CodeVersionConflict:
		return circulation.Errorf(circulation.KindConflict, circulation.CodeItemChanged, "%s", msg).Because(cause)
	case res.StatusCode == http.StatusConflict:
		return withParams(circulation.Errorf(circulation.KindConflict, circulation.CodeConflict, "%s", msg).Because(cause))
	case res.StatusCode == http.StatusUnprocessableEntity && code == schemas.CodeItemHasOpenLoan:
		return circulation.Errorf(circulation.KindInvalid, circulation.CodeItemHasOpenLoan, "%s", msg).Because(cause)
	case res.StatusCode == http.StatusUnprocessableEntity && code == schemas.CodeItemLimitReached:
		return withParams(circulation.Errorf(circulation.KindInvalid, circulation.CodeItemLimitReached, "%s", msg).Because(cause))
	case res.StatusCode == http.StatusUnprocessableEntity && code == schemas.CodeLockRequired:
		return circulation.Errorf(circulation.KindInvalid, circulation.CodeLockRequired, "%s", msg).Because(cause)
	case res.StatusCode == http.StatusUnprocessableEntity && code == schemas.CodeAlreadyExists:
		return withParams(circulation.Errorf(circulation.KindInvalid, circulation.CodeAlreadyExists, "%s", msg).Because(cause))
	case res.StatusCode == http.StatusUnprocessableEntity:
		// A value storage refuses (a lock TTL above its maximum, a record
		// deleted meanwhile): the client hears storage's reason.
		return withParams(circulation.Errorf(circulation.KindInvalid, circulation.CodeValidation, "%s", msg).Because(cause))
	case res.StatusCode == http.StatusBadRequest && (code == schemas.CodeTenantNotInitialized || code == schemas.CodeInvalidTenant || code == schemas.CodeTenantMissing):
		// The caller's tenant is the problem: say so in storage's words.
		return withParams(circulation.Errorf(circulation.KindBadRequest, code, "%s", msg).Because(cause))
	}
	// Any other refusal means this service sent something storage's
	// contract does not allow: a bug here.
	return circulation.Errorf(circulation.KindInternal, circulation.CodeInternal,
		"circulation-storage refused a request").Because(cause)
}

// query builds a query string from key, value pairs, skipping empty values.
func query(kv ...string) string {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			v.Set(kv[i], kv[i+1])
		}
	}
	if len(v) == 0 {
		return ""
	}
	return "?" + v.Encode()
}

// Ready checks that storage answers its readiness probe.
func (c *Client) Ready(ctx context.Context) error {
	return c.call(ctx, http.MethodGet, "/admin/ready", nil, nil)
}

// GetJSON reads a storage resource at path into out (for the lock console).
func (c *Client) GetJSON(ctx context.Context, path string, out any) error {
	return c.call(ctx, http.MethodGet, path, nil, out)
}
