// Package storageclient implements circulation.Storage over circulation-
// storage's HTTP API. It passes the request's tenant and request id on, and
// maps storage's statuses and error codes back to domain errors: the one
// place where this service interprets another's answers.
package storageclient

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/checkoutlock/schemas/errs"

	"github.com/checkoutlock/circulation"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/serverkit/tracing"
)

// Client talks to one circulation-storage (or a load balancer in front of
// several).
type Client struct {
	base    string
	http    *http.Client
	timeout time.Duration
	// logger says what the client works around in storage's answers (a
	// stored date that cannot be read); SetLogger sets it.
	logger *slog.Logger
	// lockDefault is storage's lock feature default as its last answer
	// said it (schemas.HeaderLockDefault).
	lockDefault atomic.Bool
}

// LockFeatureDefault implements circulation.Storage.
func (c *Client) LockFeatureDefault() bool { return c.lockDefault.Load() }

// SetLogger has the client log to logger.
func (c *Client) SetLogger(logger *slog.Logger) { c.logger = logger }

var _ circulation.Storage = (*Client)(nil)

// New returns a client for the storage at baseURL. timeout bounds each call;
// roots, when not nil, are the CAs an https:// storage's certificate is
// checked against.
func New(baseURL string, timeout time.Duration, roots *x509.CertPool) *Client {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	if roots != nil {
		transport.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	}
	// Check-outs fan out several calls each; keep connections warm.
	transport.MaxIdleConns = 256
	transport.MaxIdleConnsPerHost = 256
	transport.IdleConnTimeout = 90 * time.Second
	// While tracing is on each call carries the check-out's trace,
	// which storage continues (traceparent).
	rt := tracing.Transport(transport)
	return &Client{base: strings.TrimRight(baseURL, "/"), http: &http.Client{Transport: rt}, timeout: timeout,
		logger: slog.New(slog.DiscardHandler)}
}

// Close drops idle connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

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
	if okapi.KioskNamed || okapi.Kiosk != "" {
		// The machine the call is for, which storage believes of this
		// module alone (empty for one that gave no location code).
		req.Header.Set(schemas.HeaderKiosk, okapi.Kiosk)
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
	if v := res.Header.Get(schemas.HeaderLockDefault); v != "" {
		c.lockDefault.Store(v == "true")
	}
	data, err := io.ReadAll(io.LimitReader(res.Body, schemas.MaxStorageAnswerBytes))
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
			return nil, errs.Errorf(errs.KindInternal, schemas.CodeInternal,
				"circulation-storage answered %s %s with unreadable JSON", method, path).Because(err)
		}
		return res.Header, nil
	}
	return nil, fromAnswer(res.StatusCode, res.Header, data, method+" "+path)
}

// transportError is a call that got no answer: storage is unavailable,
// unless the request itself was cancelled.
func transportError(ctx context.Context, method, path string, err error) error {
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if op := (*net.OpError)(nil); errors.As(err, &op) && op.Op == "dial" {
		return unavailable(fmt.Errorf("%s %s: %w: %w", method, path, circulation.ErrNotSent, err))
	}
	return unavailable(fmt.Errorf("%s %s: %w", method, path, err))
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

// SessionAlive asks whether a sign-in's session still speaks for its
// account (GET /authn/sessions/{id}). Storage without a login of its own
// has no sessions: none of them is alive.
func (c *Client) SessionAlive(ctx context.Context, id string) (bool, error) {
	var out struct {
		Active bool `json:"active"`
	}
	err := c.call(ctx, http.MethodGet, "/authn/sessions/"+url.PathEscape(id), nil, &out)
	if e, ok := errs.As(err); ok && e.Kind == errs.KindNotFound {
		return false, nil
	}
	return out.Active, err
}

// maxPassedAnswer bounds the body of an answer Pass passes on.
const maxPassedAnswer = 64 << 10

// Pass sends storage a request of the sign-in (FOLIO's /authn routes) as
// the pages sent it to circulation: the body, and the headers named in
// header (its cookies, the client's address), besides the Okapi ones. It
// answers storage's status, headers and body whatever the status: the
// answer goes back to the page as storage gave it.
//
// It waits for storage's answer as long as ctx allows (the request's own
// deadline, REQUEST_TIMEOUT), not only the timeout of a call: a sign-in
// at storage may wait for its turn (LOGIN_BUSY_WAIT) and for a password
// hash's check, bounded by storage's own REQUEST_TIMEOUT, and then
// answers, signed in, refused or busy. Cut at the call's timeout, a slow
// sign-in was told "storage unavailable" while storage went on and signed
// it in. Without a deadline in ctx, the call's timeout bounds it.
func (c *Client) Pass(ctx context.Context, method, path string, body []byte, header http.Header) (int, http.Header, []byte, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, nil, err
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	okapi := circulation.OkapiFrom(ctx)
	req.Header.Set(schemas.HeaderTenant, okapi.Tenant)
	if okapi.RequestID != "" {
		req.Header.Set(schemas.HeaderRequestID, okapi.RequestID)
	}
	if okapi.Token != "" {
		req.Header.Set(schemas.HeaderToken, okapi.Token)
	}
	res, err := c.http.Do(req)
	if err != nil {
		return 0, nil, nil, transportError(ctx, method, path, err)
	}
	defer res.Body.Close()
	if v := res.Header.Get(schemas.HeaderLockDefault); v != "" {
		c.lockDefault.Store(v == "true")
	}
	data, err := io.ReadAll(io.LimitReader(res.Body, maxPassedAnswer))
	if err != nil {
		return 0, nil, nil, transportError(ctx, method, path, err)
	}
	return res.StatusCode, res.Header, data, nil
}

// SeeKioskOnLine records that the calling self-check machine is on line
// now, in span id (PUT /kiosk-presence-storage/spans/{id}): the machine
// is the call's user and kiosk (circulation.Okapi), which call names.
func (c *Client) SeeKioskOnLine(ctx context.Context, id string) error {
	return c.call(ctx, http.MethodPut, "/kiosk-presence-storage/spans/"+url.PathEscape(id), nil, nil)
}

// KioskOnLine is the calling machine's spans on line overlapping
// from..to (GET /kiosk-presence-storage/spans), as storage answers them.
func (c *Client) KioskOnLine(ctx context.Context, from, to time.Time) (json.RawMessage, error) {
	var out json.RawMessage
	err := c.call(ctx, http.MethodGet, "/kiosk-presence-storage/spans"+query("from", schemas.FormatTime(from), "to", schemas.FormatTime(to)), nil, &out)
	return out, err
}
