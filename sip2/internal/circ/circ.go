// Package circ is the SIP2 door's way into circulation: a kiosk signs in
// with its account (circulation passes FOLIO's login on to storage), and
// checks items out and in through circulation's own API, under the
// patron's lock, the item limit and the kiosk's permissions. The door
// never calls storage and never holds more than the kiosk's own token.
package circ

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs/errhttp"
	"github.com/checkoutlock/serverkit/tracing"
)

// Client calls one circulation (or a load balancer in front of several).
type Client struct {
	base string
	http *http.Client
}

// New returns a client of the circulation at baseURL; timeout bounds each
// call; roots, when not nil, are the CAs an https:// circulation's
// certificate is checked against.
func New(baseURL string, timeout time.Duration, roots *x509.CertPool) *Client {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	if roots != nil {
		transport.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	}
	// While tracing is on each call carries the message's trace,
	// which circulation continues (traceparent).
	rt := tracing.Transport(transport)
	return &Client{base: strings.TrimRight(baseURL, "/"), http: &http.Client{Timeout: timeout, Transport: rt}}
}

// Session is a kiosk signed in: its tokens, refreshed when the access
// token has expired, and the kiosk's address, which every call names to
// circulation (X-Forwarded-For: circulation believes it from the door, a
// proxy it trusts), so that failed logins and PIN guesses are counted,
// and patron summaries rated, by kiosk rather than by door.
type Session struct {
	Tenant, Username string
	Address          string
	// Location is the location code the kiosk gave at its login (SIP2's
	// CP), cut to its bound: every call names the machine by it
	// (schemas.HeaderKiosk), and storage records it in what the call
	// causes.
	Location        string
	mu              sync.Mutex
	access, refresh string
	ended           atomic.Bool
}

// Ended says whether the session has ended (ErrSessionEnded): the kiosk
// must log in again.
func (s *Session) Ended() bool { return s.ended.Load() }

// Refusal is circulation's refusal of a request: FOLIO's messages, joined,
// the first error's code, and every error with its parameters.
type Refusal struct {
	Status  int
	Code    string
	Message string
	Errors  []errhttp.Entry
}

// OwnLoan says whether the refusal is of a check-out of an item already on
// loan to the same patron (a retry whose first answer was lost), and that
// loan's due date: the zero time when circulation named none (a due date
// stored that cannot be read).
func (r *Refusal) OwnLoan() (time.Time, bool) {
	for _, e := range r.Errors {
		if e.Code == schemas.CodeItemAlreadyCheckedOut && e.Param("loanId") != "" {
			due, _ := schemas.ParseDateTime(e.Param("dueDate"))
			return due, true
		}
	}
	return time.Time{}, false
}

func (r *Refusal) Error() string { return fmt.Sprintf("%d %s: %s", r.Status, r.Code, r.Message) }

// ErrLoginFailed is a kiosk whose name or password is wrong;
// ErrLoginLocked one whose sign-ins are refused for a while (too many
// failed from its address), its password not checked; ErrLoginBusy one
// whose turn did not come within the call's time (others from its place
// being checked all along), its password not checked either.
var (
	ErrLoginFailed = errors.New("circ: login failed")
	ErrLoginLocked = fmt.Errorf("%w: locked for a while", ErrLoginFailed)
	ErrLoginBusy   = fmt.Errorf("%w: no turn came", ErrLoginFailed)
)

// ErrSessionEnded is a kiosk whose sign-in has ended (its account was
// disabled or deleted, or its session ended): it must log in again.
var ErrSessionEnded = errors.New("circ: the kiosk's session has ended")

// ErrTooMuch is a kiosk account that holds more than the self-check role:
// a kiosk may check items out and in, nothing else.
var ErrTooMuch = errors.New("circ: the kiosk account holds more than the self-check role")

// Login signs the kiosk at address, named location, in and checks that
// its account holds no more than the self-check role.
func (c *Client) Login(ctx context.Context, tenant, username, password, address, location string) (*Session, error) {
	body, _ := json.Marshal(map[string]string{"username": username, "password": password})
	res, data, err := c.do(ctx, tenant, address, "", http.MethodPost, "/authn/login-with-expiry", body, "")
	if err != nil {
		return nil, err
	}
	switch res.StatusCode {
	case http.StatusUnprocessableEntity:
		return nil, ErrLoginFailed
	case http.StatusTooManyRequests:
		if _, busy := busyFor(res, data); busy {
			return nil, ErrLoginBusy
		}
		return nil, ErrLoginLocked
	}
	if res.StatusCode != http.StatusCreated {
		return nil, refusal(res.StatusCode, data)
	}
	s := &Session{Tenant: tenant, Username: username, Address: address, Location: schemas.KioskLocation(location)}
	s.access, s.refresh = cookie(res, "folioAccessToken"), cookie(res, "folioRefreshToken")
	if s.access == "" {
		return nil, errors.New("circ: the login answered no access token")
	}
	var self struct {
		Permissions struct {
			Permissions []string `json:"permissions"`
		} `json:"permissions"`
	}
	if err := c.call(ctx, s, http.MethodGet, "/bl-users/_self", nil, &self); err != nil {
		return nil, err
	}
	kiosk, _ := schemas.PermissionSetNamed(schemas.RoleSelfCheck)
	for _, p := range self.Permissions.Permissions {
		if p != kiosk.Name && !slices.Contains(kiosk.Permissions, p) {
			return nil, ErrTooMuch
		}
	}
	return s, nil
}

// Logout ends the kiosk's session (its refresh token, and its access
// tokens at both services within seconds).
func (c *Client) Logout(ctx context.Context, s *Session) error {
	s.mu.Lock()
	refresh := s.refresh
	s.mu.Unlock()
	res, data, err := c.do(ctx, s.Tenant, s.Address, "", http.MethodPost, "/authn/logout", nil, "folioRefreshToken="+refresh)
	if err != nil {
		return err
	}
	if res.StatusCode != http.StatusNoContent {
		return refusal(res.StatusCode, data)
	}
	s.ended.Store(true)
	return nil
}

// Loan is what a check-out answers a kiosk.
type Loan struct {
	DueDate time.Time
	Title   string
}

// CheckOut checks item out to patron at servicePoint, as the
// transaction key names ("" for none: see msg's Key), with the PIN the
// patron typed ("" for none), which circulation checks against the patron
// before any refusal: a *Refusal with PIN_INVALID, PIN_LOCKED or PIN_BUSY
// when it is not right or not checked.
func (c *Client) CheckOut(ctx context.Context, s *Session, item, patron, servicePoint, pin, key string) (Loan, error) {
	body, _ := json.Marshal(map[string]string{"itemBarcode": item, "userBarcode": patron, "servicePointId": servicePoint})
	var out struct {
		DueDate time.Time `json:"dueDate"`
		Item    struct {
			Title string `json:"title"`
		} `json:"item"`
	}
	if err := c.call(ctx, s, http.MethodPost, "/circulation/check-out-by-barcode", body, &out, headerOf(key, pin)...); err != nil {
		return Loan{}, err
	}
	return Loan{DueDate: out.DueDate, Title: out.Item.Title}, nil
}

// keyed is the header of a call made as the transaction key names: its
// Idempotency-Key; none for "".
func keyed(key string) []string {
	if key == "" {
		return nil
	}
	return []string{schemas.HeaderIdempotencyKey, key}
}

// headerOf is keyed's header, and the patron's PIN when one is given.
func headerOf(key, pin string) []string {
	header := keyed(key)
	if pin != "" {
		header = append(header, schemas.HeaderPatronPin, pin)
	}
	return header
}

// CheckOutOffline records a check-out the kiosk made offline, at,
// due when the kiosk said (zero: the loan policy's), to patron at
// servicePoint: it already happened, and circulation records it past the
// rules a live one keeps, once however often it is sent, the PIN given
// ("" for none) checked first as CheckOut's. BrokenRules are those it
// broke.
func (c *Client) CheckOutOffline(ctx context.Context, s *Session, item, patron, servicePoint string, at, due time.Time, pin, key string) (Loan, []string, error) {
	offline := map[string]string{"transactionDate": schemas.FormatTime(at)}
	if !due.IsZero() {
		offline["dueDate"] = schemas.FormatTime(due)
	}
	body, _ := json.Marshal(map[string]any{"itemBarcode": item, "userBarcode": patron, "servicePointId": servicePoint, "offline": offline})
	var out struct {
		DueDate time.Time `json:"dueDate"`
		Item    struct {
			Title string `json:"title"`
		} `json:"item"`
		Offline struct {
			BrokenRules []string `json:"brokenRules"`
		} `json:"offline"`
	}
	if err := c.call(ctx, s, http.MethodPost, "/circulation/check-out-by-barcode", body, &out, headerOf(key, pin)...); err != nil {
		return Loan{}, nil, err
	}
	return Loan{DueDate: out.DueDate, Title: out.Item.Title}, out.Offline.BrokenRules, nil
}

// SelfCheckSettings is what the tenant asks of its self-check machines,
// as circulation applies it: whether patrons' PINs are required, and
// whether check-outs made offline are taken.
type SelfCheckSettings struct {
	PatronPin      string `json:"patronPin"`
	OfflineLending string `json:"offlineLending"`
	// Currency is the tenant's (ISO 4217), which payments are in.
	Currency string `json:"currency"`
}

// SelfCheckSettings reads the tenant's self-check settings.
func (c *Client) SelfCheckSettings(ctx context.Context, s *Session) (SelfCheckSettings, error) {
	var out SelfCheckSettings
	err := c.call(ctx, s, http.MethodGet, "/circulation/settings/self-check", nil, &out)
	return out, err
}

// Renew renews the loan of item to patron at servicePoint, with the PIN
// the patron typed ("" for none), which circulation checks when given
// and the tenant may require: a *Refusal with PIN_REQUIRED, PIN_INVALID
// or PIN_LOCKED when it is missing or not right.
func (c *Client) Renew(ctx context.Context, s *Session, item, patron, servicePoint, pin, key string) (Loan, error) {
	req := map[string]string{"itemBarcode": item, "userBarcode": patron}
	if servicePoint != "" {
		req["servicePointId"] = servicePoint
	}
	body, _ := json.Marshal(req)
	var out struct {
		DueDate time.Time `json:"dueDate"`
		Item    struct {
			Title string `json:"title"`
		} `json:"item"`
	}
	if err := c.call(ctx, s, http.MethodPost, "/circulation/renew-by-barcode", body, &out, headerOf(key, pin)...); err != nil {
		return Loan{}, err
	}
	return Loan{DueDate: out.DueDate, Title: out.Item.Title}, nil
}

// Return is what a check-in answers a kiosk.
type Return struct {
	Title, Location string
	// Patron is the barcode of the patron whose loan closed, when known.
	Patron string
	// Status is the item's status after the check-in (Awaiting pickup: a
	// request waits for it here; In transit: one waits at Destination,
	// the service point's code, as a sorter keys its bins, or its name or
	// id when it has none).
	Status, Destination string
}

// CheckIn checks item in at servicePoint, as the transaction key names.
func (c *Client) CheckIn(ctx context.Context, s *Session, item, servicePoint string, at time.Time, key string) (Return, error) {
	body, _ := json.Marshal(map[string]string{"itemBarcode": item, "servicePointId": servicePoint,
		"checkInDate": schemas.FormatTime(at)})
	var out struct {
		Item struct {
			Title  string `json:"title"`
			Status struct {
				Name string `json:"name"`
			} `json:"status"`
			DestinationID string `json:"inTransitDestinationServicePointId"`
			Destination   struct {
				Name string `json:"name"`
				Code string `json:"code"`
			} `json:"inTransitDestinationServicePoint"`
		} `json:"item"`
	}
	if err := c.call(ctx, s, http.MethodPost, "/circulation/check-in-by-barcode", body, &out, keyed(key)...); err != nil {
		return Return{}, err
	}
	destination := out.Item.DestinationID
	switch d := out.Item.Destination; {
	case d.Code != "":
		destination = d.Code
	case d.Name != "":
		destination = d.Name
	}
	return Return{Title: out.Item.Title, Status: out.Item.Status.Name, Destination: destination}, nil
}

// PatronSummary is what a kiosk shows a patron, as circulation answers
// GET /circulation/patron-summary: View "full" with the patron's name and
// loans out (the patron's PIN was right), "verdict" without.
type PatronSummary struct {
	View   string `json:"view"`
	Patron struct {
		ID        string `json:"id"`
		Barcode   string `json:"barcode"`
		Active    bool   `json:"active"`
		FirstName string `json:"firstName"`
		LastName  string `json:"lastName"`
	} `json:"patron"`
	CanBorrow bool `json:"canBorrow"`
	Reasons   []struct {
		Code          string `json:"code"`
		Message       string `json:"message"`
		PatronMessage string `json:"patronMessage"`
	} `json:"reasons"`
	OpenLoanCount int  `json:"openLoanCount"`
	OverdueCount  int  `json:"overdueCount"`
	AtItemLimit   bool `json:"atItemLimit"`
	ItemLimits    []struct {
		ItemLimit int    `json:"itemLimit"`
		Reached   bool   `json:"reached"`
		AllLoans  bool   `json:"allLoans"`
		Message   string `json:"message"`
	} `json:"itemLimits"`
	OpenLoans []struct {
		ItemBarcode string    `json:"itemBarcode"`
		Title       string    `json:"title"`
		DueDate     time.Time `json:"dueDate"`
		// Overdue is storage's judgement, by the database's clock.
		Overdue bool `json:"overdue"`
	} `json:"openLoans"`
	// ExcessiveFees says the patron owes more than their group may; the
	// balance, the count and the fees/fines come in the full view only.
	ExcessiveFees  bool   `json:"excessiveFees"`
	FeeFineBalance string `json:"feeFineBalance"`
	Currency       string `json:"currency"`
	FeeFineCount   int    `json:"feeFineCount"`
	FeesFines      []struct {
		ID          string `json:"id"`
		FeeFineType string `json:"feeFineType"`
		Remaining   string `json:"remaining"`
		Title       string `json:"title"`
	} `json:"feesFines"`
}

// PatronSummary reads what a kiosk shows the patron with barcode, with the
// PIN the patron typed ("" for none: the verdict alone); a barcode of no
// patron is a *Refusal with status 404, a wrong PIN one with PIN_INVALID,
// a locked one PIN_LOCKED, and one whose turn did not come PIN_BUSY.
func (c *Client) PatronSummary(ctx context.Context, s *Session, barcode, pin string) (PatronSummary, error) {
	var out PatronSummary
	err := c.call(ctx, s, http.MethodGet, "/circulation/patron-summary?"+url.Values{"userBarcode": {barcode}}.Encode(), nil, &out, headerOf("", pin)...)
	return out, err
}

// Payment is what a patron's payment did: the amount paid and what
// remains of the fees/fines it paid, decimals of two places, and when.
type Payment struct {
	Amount, Remaining string
	PaidAt            time.Time
}

// PayFees takes the patron's payment of amount by method (a payment
// method's name) at servicePoint, of the fee/fine feeFineID ("" for the
// patron's open ones, oldest first), with the PIN the patron typed, as
// the transaction key names it: sent again with the key, on any
// connection or door, it is answered as first and pays nothing more.
func (c *Client) PayFees(ctx context.Context, s *Session, patron, pin, amount, method, servicePoint, feeFineID, info, key string) (Payment, error) {
	req := map[string]string{"userBarcode": patron, "amount": amount, "paymentMethod": method, "servicePointId": servicePoint}
	if feeFineID != "" {
		req["feeFineId"] = feeFineID
	}
	if info != "" {
		req["transactionInfo"] = info
	}
	body, _ := json.Marshal(req)
	var out struct {
		Amount          string `json:"amount"`
		RemainingAmount string `json:"remainingAmount"`
		Feefineactions  []struct {
			DateAction time.Time `json:"dateAction"`
		} `json:"feefineactions"`
	}
	if err := c.call(ctx, s, http.MethodPost, "/circulation/patron-fees/pay", body, &out, headerOf(key, pin)...); err != nil {
		return Payment{}, err
	}
	p := Payment{Amount: out.Amount, Remaining: out.RemainingAmount}
	if len(out.Feefineactions) > 0 {
		p.PaidAt = out.Feefineactions[0].DateAction
	}
	return p, nil
}

// ItemSummary is what a kiosk shows of an item.
type ItemSummary struct {
	Barcode string    `json:"barcode"`
	Title   string    `json:"title"`
	Status  string    `json:"status"`
	DueDate time.Time `json:"dueDate"`
}

// ItemSummary reads what a kiosk shows of the item with barcode; a barcode
// of no item is a *Refusal with status 404.
func (c *Client) ItemSummary(ctx context.Context, s *Session, barcode string) (ItemSummary, error) {
	var out ItemSummary
	err := c.call(ctx, s, http.MethodGet, "/circulation/item-summary?"+url.Values{"itemBarcode": {barcode}}.Encode(), nil, &out)
	return out, err
}

// call sends a request with the session's access token (and header, as
// name, value pairs), refreshing the sign-in once when circulation
// answers 401, and decodes a 2xx answer into out; any other answer is a
// *Refusal.
func (c *Client) call(ctx context.Context, s *Session, method, path string, body []byte, out any, header ...string) error {
	// The machine is named even when it gave no location code (the
	// header sent empty): a call a door names a machine for is told from
	// one no door names.
	header = append([]string{schemas.HeaderKiosk, s.Location}, header...)
	for attempt := 0; ; attempt++ {
		s.mu.Lock()
		token := s.access
		s.mu.Unlock()
		res, data, err := c.do(ctx, s.Tenant, s.Address, token, method, path, body, "", header...)
		if err != nil {
			return err
		}
		if res.StatusCode == http.StatusUnauthorized && attempt == 0 {
			if err := c.refreshSession(ctx, s); err != nil {
				return err
			}
			continue
		}
		if res.StatusCode < 200 || res.StatusCode > 299 {
			return refusal(res.StatusCode, data)
		}
		if out == nil {
			return nil
		}
		return json.Unmarshal(data, out)
	}
}

// refreshSession takes the refresh token for new tokens.
func (c *Client) refreshSession(ctx context.Context, s *Session) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	res, data, err := c.do(ctx, s.Tenant, s.Address, "", http.MethodPost, "/authn/refresh", nil, "folioRefreshToken="+s.refresh)
	if err != nil {
		return err
	}
	if res.StatusCode == http.StatusUnauthorized {
		s.ended.Store(true)
		return ErrSessionEnded
	}
	if res.StatusCode != http.StatusCreated {
		return refusal(res.StatusCode, data)
	}
	s.access, s.refresh = cookie(res, "folioAccessToken"), cookie(res, "folioRefreshToken")
	return nil
}

// maxAnswer bounds an answer's body.
const maxAnswer = 1 << 20

// do sends a request for the kiosk at address, with header's name, value
// pairs. A sign-in or PIN refused unchecked for a moment (LOGIN_BUSY,
// PIN_BUSY: as many others from its place were being checked as their
// limit lets be, and nothing was counted or done) is sent again after
// the Retry-After it was answered, for as long as ctx gives the kiosk: a
// branch's kiosks signing in together all get in, each in its turn.
func (c *Client) do(ctx context.Context, tenant, address, token, method, path string, body []byte, cookies string, header ...string) (*http.Response, []byte, error) {
	for {
		res, data, err := c.send(ctx, tenant, address, token, method, path, body, cookies, header...)
		if err != nil {
			return nil, nil, err
		}
		wait, busy := busyFor(res, data)
		if dl, ok := ctx.Deadline(); !busy || (ok && time.Until(dl) < wait) {
			return res, data, nil
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return res, data, nil
		case <-t.C:
		}
	}
}

// Ready asks circulation whether it can answer: its readiness, which
// asks storage's, which asks PostgreSQL. It is nil when all three answer.
func (c *Client) Ready(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/admin/ready", nil)
	if err != nil {
		return err
	}
	res, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(res.Body, maxAnswer))
	if res.StatusCode != http.StatusOK {
		return refusal(res.StatusCode, data)
	}
	return nil
}

// busyFor says whether an answer is a refusal unchecked for a moment
// (LOGIN_BUSY, PIN_BUSY), and how long it asks to wait: its Retry-After,
// at least minBusyWait.
func busyFor(res *http.Response, data []byte) (time.Duration, bool) {
	if res.StatusCode != http.StatusTooManyRequests {
		return 0, false
	}
	env, found := errhttp.Decode(data)
	if !found || (env.Errors[0].Code != schemas.CodeLoginBusy && env.Errors[0].Code != schemas.CodePinBusy) {
		return 0, false
	}
	return max(errhttp.RetryAfter(res.Header), minBusyWait), true
}

// minBusyWait is the least wait before a refusal unchecked for a moment is
// asked again, whatever its Retry-After says.
const minBusyWait = 100 * time.Millisecond

// send sends one request for the kiosk at address.
func (c *Client) send(ctx context.Context, tenant, address, token, method, path string, body []byte, cookies string, header ...string) (*http.Response, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	req.Header.Set(schemas.HeaderTenant, tenant)
	if address != "" {
		req.Header.Set(schemas.HeaderForwardedFor, address)
	}
	if token != "" {
		req.Header.Set(schemas.HeaderToken, token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if cookies != "" {
		req.Header.Set("Cookie", cookies)
	}
	res, err := c.http.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer res.Body.Close()
	data, err := io.ReadAll(io.LimitReader(res.Body, maxAnswer))
	return res, data, err
}

// refusal reads FOLIO's error envelope (errhttp.Decode, as circulation
// reads storage's); an answer without one is named by its status.
func refusal(status int, data []byte) *Refusal {
	r := &Refusal{Status: status}
	env, found := errhttp.Decode(data)
	if !found {
		r.Message = http.StatusText(status)
		return r
	}
	msgs := make([]string, len(env.Errors))
	for i, e := range env.Errors {
		msgs[i] = e.Message
	}
	r.Errors = env.Errors
	r.Code, r.Message = env.Errors[0].Code, strings.Join(msgs, "; ")
	return r
}

// Busy says whether a refusal is the patron's lock not acquired in time,
// or a PIN whose turn did not come (PIN_BUSY): the kiosk should try
// again.
func (r *Refusal) Busy() bool {
	return r.Code == schemas.CodeUnableToAcquireLock || r.Code == schemas.CodeLockHeld || r.Code == schemas.CodePinBusy ||
		r.Status == http.StatusServiceUnavailable
}

func cookie(res *http.Response, name string) string {
	for _, k := range res.Cookies() {
		if k.Name == name {
			return k.Value
		}
	}
	return ""
}

// SeeOnLine records that the kiosk (its account and Location) is on line
// now, in the span id: a new span begins now, one recorded before lasts
// until now.
func (c *Client) SeeOnLine(ctx context.Context, s *Session, id string) error {
	return c.call(ctx, s, http.MethodPut, "/circulation/kiosks/presence/"+url.PathEscape(id), nil, nil)
}
