package httpapi

import (
	"net/http"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"
	"github.com/labstack/echo/v4"
	"golang.org/x/time/rate"

	"github.com/checkoutlock/circulation"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
	"github.com/checkoutlock/serverkit"
)

// summaryLoanJSON is an open loan in schemas/circulation-patron-summary.json.
type summaryLoanJSON struct {
	ItemBarcode string `json:"itemBarcode"`
	Title       string `json:"title,omitempty"`
	DueDate     string `json:"dueDate,omitempty"`
	Overdue     bool   `json:"overdue"`
}

// reasonJSON is a reason a patron may not borrow.
type reasonJSON struct {
	Code          string `json:"code"`
	Message       string `json:"message"`
	PatronMessage string `json:"patronMessage,omitempty"`
}

// patronSummary is GET /circulation/patron-summary?userBarcode=: what a
// self-check machine shows a patron. A caller without
// PermissionPatronSummaryDetails (a self-check machine) gets the
// patron's name and loans only with the PIN the patron typed
// (X-Patron-Pin), and is held to PATRON_SUMMARY_RATE summaries a minute
// per sign-in (summaryRate), counted before anything is read.
func (s *Server) patronSummary(c echo.Context) error {
	barcode, err := requiredParam(c, "userBarcode")
	if err != nil {
		return err
	}
	access := s.patronAccess(c)
	if !access.Details {
		if err := s.summaries.take(c, s.cfg.Clients.Address(c.Request())); err != nil {
			return err
		}
	}
	sum, err := s.svc.Circulation.PatronSummary(c.Request().Context(), barcode, access)
	if err != nil {
		return err
	}
	type patronJSON struct {
		ID        string `json:"id,omitempty"`
		Barcode   string `json:"barcode"`
		Active    bool   `json:"active"`
		FirstName string `json:"firstName,omitempty"`
		LastName  string `json:"lastName,omitempty"`
	}
	p := sum.Patron
	type limitJSON struct {
		ItemLimit int    `json:"itemLimit"`
		OpenLoans int    `json:"openLoans"`
		Reached   bool   `json:"reached"`
		AllLoans  bool   `json:"allLoans"`
		Code      string `json:"code"`
		Message   string `json:"message"`
	}
	out := struct {
		View          string            `json:"view"`
		Patron        patronJSON        `json:"patron"`
		CanBorrow     bool              `json:"canBorrow"`
		Reasons       []reasonJSON      `json:"reasons"`
		OpenLoanCount int               `json:"openLoanCount"`
		OverdueCount  int               `json:"overdueCount"`
		AtItemLimit   bool              `json:"atItemLimit"`
		ItemLimits    []limitJSON       `json:"itemLimits"`
		OpenLoans     []summaryLoanJSON `json:"openLoans,omitempty"`
		ExcessiveFees bool              `json:"excessiveFees"`
		Balance       string            `json:"feeFineBalance,omitempty"`
		Currency      string            `json:"currency,omitempty"`
		FeeFineCount  *int              `json:"feeFineCount,omitempty"`
		FeesFines     []summaryFeeJSON  `json:"feesFines,omitempty"`
	}{View: "verdict", Patron: patronJSON{ID: p.ID, Barcode: p.Barcode, Active: p.ActiveAt(time.Now()), FirstName: p.FirstName, LastName: p.LastName},
		CanBorrow: sum.CanBorrow, Reasons: []reasonJSON{}, OpenLoanCount: sum.OpenLoanCount, OverdueCount: sum.OverdueCount,
		AtItemLimit: sum.AtItemLimit, ItemLimits: []limitJSON{}}
	for _, l := range sum.ItemLimits {
		e := circulation.ItemLimitReached(l.Limit, l.Match, "")
		out.ItemLimits = append(out.ItemLimits, limitJSON{ItemLimit: l.Limit, OpenLoans: l.OpenLoans, Reached: l.Reached, AllLoans: l.AllLoans(),
			Code: e.Code, Message: e.Message})
	}
	out.ExcessiveFees = sum.ExcessiveFees
	if sum.Full {
		out.View = "full"
		out.Balance, out.FeeFineCount = sum.FeeFineBalance, &sum.FeeFineCount
		if out.Currency, err = s.svc.Circulation.Currency(c.Request().Context()); err != nil {
			return err
		}
		for _, f := range sum.FeesFines {
			out.FeesFines = append(out.FeesFines, summaryFeeJSON{ID: f.ID, FeeFineType: f.FeeFineType, Amount: f.Amount,
				Remaining: f.Remaining, Title: f.Title, ItemBarcode: f.ItemBarcode, DateCreated: schemas.FormatTime(f.DateCreated)})
		}
	}
	for _, r := range sum.Reasons {
		j := reasonJSON{Code: r.Code, Message: r.Message}
		for _, param := range r.Parameters {
			if param.Key == "patronMessage" {
				j.PatronMessage = param.Value
			}
		}
		out.Reasons = append(out.Reasons, j)
	}
	for _, l := range sum.OpenLoans {
		out.OpenLoans = append(out.OpenLoans, summaryLoanJSON{ItemBarcode: l.ItemBarcode, Title: l.Title, Overdue: l.Overdue,
			DueDate: schemas.FormatTime(l.DueDate)})
	}
	return c.JSON(http.StatusOK, out)
}

// summaryFeeJSON is schemas/summary-fee-fine.json.
type summaryFeeJSON struct {
	ID          string `json:"id"`
	FeeFineType string `json:"feeFineType"`
	Amount      string `json:"amount"`
	Remaining   string `json:"remaining"`
	Title       string `json:"title,omitempty"`
	ItemBarcode string `json:"itemBarcode,omitempty"`
	DateCreated string `json:"dateCreated,omitempty"`
}

// patronAccess is what the caller may learn of a patron and do for them:
// everything when it holds PermissionPatronSummaryDetails (a librarian);
// otherwise (a self-check machine) what the PIN the patron typed
// (X-Patron-Pin), if right, opens.
func (s *Server) patronAccess(c echo.Context) circulation.PatronAccess {
	return circulation.PatronAccess{Details: s.holds(c, schemas.PermissionPatronSummaryDetails),
		Pin: c.Request().Header.Get(schemas.HeaderPatronPin)}
}

// summaryRate holds callers to a rate of patron summaries, per tenant,
// caller and sign-in (the client address for a token of none): a token
// bucket each (golang.org/x/time/rate)
// that holds a minute's summaries, taken from before the summary is read.
// The buckets are bounded in number and forgotten after two minutes
// unused (a forgotten one starts full, as it would be by then).
//
// An account's sign-ins together take also from the account's own bucket,
// accountSessions sign-ins' worth: opening sessions buys an account no
// more. The accounts' buckets are a table of their own, so that sessions
// opened and dropped never push an account's out.
type summaryRate struct {
	perMinute       int
	accountSessions int
	buckets         *expirable.LRU[string, *rate.Limiter]
	accounts        *expirable.LRU[string, *rate.Limiter]
	mu              sync.Mutex
}

func newSummaryRate(perMinute, accountSessions int) *summaryRate {
	return &summaryRate{perMinute: perMinute, accountSessions: max(accountSessions, 1),
		buckets:  expirable.NewLRU[string, *rate.Limiter](maxSummaryBuckets, nil, 2*time.Minute),
		accounts: expirable.NewLRU[string, *rate.Limiter](maxSummaryBuckets, nil, 2*time.Minute)}
}

// maxSummaryBuckets bounds the sign-ins, and the accounts, whose rate is
// remembered.
const maxSummaryBuckets = 10000

// bucket is the limiter under key in table, made full (perMinute a minute,
// as many at once) when there is none.
func (r *summaryRate) bucket(table *expirable.LRU[string, *rate.Limiter], key string, perMinute int) *rate.Limiter {
	r.mu.Lock()
	defer r.mu.Unlock()
	l, ok := table.Get(key)
	if !ok {
		l = rate.NewLimiter(rate.Every(time.Minute/time.Duration(perMinute)), perMinute)
		table.Add(key, l)
	}
	return l
}

// take takes one summary from the bucket of the caller's sign-in (of its
// address, for a token naming none) and from its account's, or refuses it
// (429 TOO_MANY_REQUESTS, with when to try again), taking from neither.
func (r *summaryRate) take(c echo.Context, address string) error {
	if r == nil || r.perMinute <= 0 {
		return nil
	}
	// A kiosk's sign-in is its own allowance: the kiosks of a branch share
	// an account and, behind its router, an address, and a day of honest
	// traffic from all of them must not read as one machine enumerating
	// patrons. Without a session (a gateway's token), the address.
	where := "address\x00" + address
	if claims := serverkit.Claims(c.Request().Context()); claims != nil && claims.SessionID != "" {
		where = "session\x00" + claims.SessionID
	}
	caller := serverkit.Caller(c.Request().Context())
	account := c.Request().Header.Get(schemas.HeaderTenant) + "\x00" + caller
	own := r.bucket(r.buckets, account+"\x00"+where, r.perMinute).Reserve()
	ownWait, sharedWait := own.Delay(), time.Duration(0)
	// The account's sign-ins share its allowance; a caller naming no
	// account (a gateway's without a user) has its own alone.
	var shared *rate.Reservation
	if caller != "" {
		shared = r.bucket(r.accounts, account, r.perMinute*r.accountSessions).Reserve()
		sharedWait = shared.Delay()
	}
	if wait := max(ownWait, sharedWait); wait > 0 {
		own.Cancel()
		if shared != nil {
			shared.Cancel()
		}
		e := errs.Errorf(errs.KindTooManyRequests, schemas.CodeTooManyRequests,
			"Too many patron summaries from this self-check machine: at most %d a minute", r.perMinute)
		if ownWait == 0 {
			e = errs.Errorf(errs.KindTooManyRequests, schemas.CodeTooManyRequests,
				"Too many patron summaries from this self-check account's machines together: at most %d a minute",
				r.perMinute*r.accountSessions)
		}
		e.RetryAfter = wait
		return e
	}
	return nil
}

// itemSummary is GET /circulation/item-summary?itemBarcode=: what a
// self-check machine shows of an item.
func (s *Server) itemSummary(c echo.Context) error {
	barcode, err := requiredParam(c, "itemBarcode")
	if err != nil {
		return err
	}
	sum, err := s.svc.Circulation.ItemSummary(c.Request().Context(), barcode)
	if err != nil {
		return err
	}
	out := struct {
		ID      string `json:"id"`
		Barcode string `json:"barcode"`
		Title   string `json:"title,omitempty"`
		Status  string `json:"status"`
		DueDate string `json:"dueDate,omitempty"`
	}{ID: sum.Item.ID, Barcode: sum.Item.Barcode, Title: sum.Item.Title, Status: sum.Item.Status,
		DueDate: schemas.FormatTime(sum.DueDate)}
	return c.JSON(http.StatusOK, out)
}

// requiredParam is the one query parameter a call takes, required.
func requiredParam(c echo.Context, name string) (string, error) {
	q, err := queryParams(c, name)
	if err != nil {
		return "", err
	}
	v := q.Get(name)
	if v == "" {
		return "", invalidParam(name, v, "is required")
	}
	return v, nil
}

// verifyPatronPin is POST /circulation/patron-pin/verify: 204 when the PIN
// matches; 422 PIN_INVALID, 429 PIN_LOCKED.
func (s *Server) verifyPatronPin(c echo.Context) error {
	var req struct {
		UserBarcode string `json:"userBarcode"`
		Pin         string `json:"pin"`
	}
	if err := s.bind(c, &req); err != nil {
		return err
	}
	if err := s.svc.Circulation.VerifyPatronPin(c.Request().Context(), req.UserBarcode, req.Pin); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
