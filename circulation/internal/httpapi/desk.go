package httpapi

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/checkoutlock/circulation"
	"github.com/checkoutlock/schemas"
	"github.com/labstack/echo/v4"
	"golang.org/x/sync/errgroup"
)

// The circulation desk's page (/ui/loans.html) finds a patron and acts on
// their open loans: renew, claim returned, declare lost, check in, each
// through circulation's own route and its permission.

// deskLoan is an open loan as the desk's page shows it.
type deskLoan struct {
	ID           string `json:"id"`
	ItemID       string `json:"itemId"`
	ItemBarcode  string `json:"itemBarcode,omitempty"`
	Title        string `json:"title,omitempty"`
	DueDate      string `json:"dueDate,omitempty"`
	RenewalCount int    `json:"renewalCount"`
	Action       string `json:"action,omitempty"`
	ItemStatus   string `json:"itemStatus,omitempty"`
	// Offline says, in words, that the loan was made at a self-check
	// machine offline and what rules it broke ("lent offline past the
	// item limit"); empty for a loan made live.
	Offline string `json:"offline,omitempty"`
	// LoanPolicyName is the policy a renewal would renew under now;
	// Renewable whether it renews, RenewalsLeft how many more times (a
	// number, or "unlimited").
	LoanPolicyName string `json:"loanPolicyName,omitempty"`
	Renewable      bool   `json:"renewable"`
	RenewalsLeft   any    `json:"renewalsLeft"`
	// Actions are the desk's actions (schemas.LoanActions), each allowed
	// or not and why: what the route would answer if called now.
	Actions map[string]deskAction `json:"actions"`
}

// deskAction says whether a desk action would be done, and when not, why,
// in the words of the refusal its route answers; a renewal refused only
// for what an override lifts says how it would be overridden.
type deskAction struct {
	Allowed  bool          `json:"allowed"`
	Reason   string        `json:"reason,omitempty"`
	Override *deskOverride `json:"override,omitempty"`
	// Resolutions are a check-in's of an item whose claim stands: how
	// the claim may be resolved (FOLIO's claimedReturnedResolution),
	// one of which the page asks.
	Resolutions []string `json:"resolutions,omitempty"`
}

// deskOverride is a refused renewal's override (FOLIO's overrideBlocks):
// the blocks to send, as the refusals name them (overridableBlock);
// whether the librarian must give the due date
// (renewalDueDateRequiredBlock); and whether the caller holds every
// block's permission, and when not, who does.
type deskOverride struct {
	Blocks          []string `json:"blocks"`
	DueDateRequired bool     `json:"dueDateRequired"`
	Allowed         bool     `json:"allowed"`
	Reason          string   `json:"reason,omitempty"`
}

// deskJudged is how many loans' renewals are judged at once: each is a
// read of storage.
const deskJudged = 4

// deskPatron is a patron found, with their open loans and what they
// owe: the balance and their open fees/fines, oldest first (a patron
// without a barcode, whose summary cannot be read by it, shows none).
type deskPatron struct {
	ID        string           `json:"id"`
	Barcode   string           `json:"barcode,omitempty"`
	Name      string           `json:"name,omitempty"`
	Loans     []deskLoan       `json:"loans"`
	Balance   string           `json:"feeFineBalance,omitempty"`
	FeesFines []summaryFeeJSON `json:"feesFines"`
}

// The desk's answer: at most deskPatrons patrons, deskLoans loans each.
const (
	deskPatrons = 10
	deskLoans   = 100
)

// patronLoans is GET /circulation/patron-loans?patron=: the patrons whose
// barcode is patron, or whose names hold each of its words (at most ten),
// each with their open loans and each loan's item; and the tenant's
// service points, at which the desk checks items in and declares them
// lost; each patron's fees/fines and balance, in the tenant's currency,
// with the ways a payment is taken.
func (s *Server) patronLoans(c echo.Context) error {
	text := strings.TrimSpace(c.QueryParam("patron"))
	if text == "" {
		return invalidParam("patron", text, "is required: a barcode or a name")
	}
	ctx := c.Request().Context()
	found, err := s.patronsNamed(ctx, text)
	if err != nil {
		return err
	}
	out := struct {
		Patrons       []deskPatron `json:"patrons"`
		ServicePoints []struct {
			ID   string `json:"id"`
			Name string `json:"name"`
		} `json:"servicePoints"`
		// Currency is the tenant's, which amounts are in; PaymentMethods
		// the names of the ways a fee/fine is paid here.
		Currency       string   `json:"currency"`
		PaymentMethods []string `json:"paymentMethods"`
	}{Patrons: []deskPatron{}, PaymentMethods: []string{}}
	for _, f := range found[:min(len(found), deskPatrons)] {
		p := deskPatron{ID: f.ID, Barcode: f.Barcode, Name: fullName(f.Personal, ""), Loans: []deskLoan{}, FeesFines: []summaryFeeJSON{}}
		if p.Loans, err = s.openLoans(ctx, f.ID); err != nil {
			return err
		}
		if err := s.judgeLoans(ctx, p.ID, p.Loans, s.overrideLacks(c)); err != nil {
			return err
		}
		if p.Barcode != "" {
			sum, err := s.svc.Circulation.PatronSummary(ctx, p.Barcode, circulation.PatronAccess{Details: true})
			if err != nil {
				return err
			}
			p.Balance = sum.FeeFineBalance
			for _, fee := range sum.FeesFines {
				p.FeesFines = append(p.FeesFines, summaryFeeJSON{ID: fee.ID, FeeFineType: fee.FeeFineType, Amount: fee.Amount,
					Remaining: fee.Remaining, Title: fee.Title, ItemBarcode: fee.ItemBarcode})
			}
		}
		out.Patrons = append(out.Patrons, p)
	}
	if out.Currency, err = s.svc.Circulation.Currency(ctx); err != nil {
		return err
	}
	var methods struct {
		Payments []struct {
			NameMethod string `json:"nameMethod"`
		} `json:"payments"`
	}
	if err := s.svc.Console.GetJSON(ctx, "/payments?limit=100", &methods); err != nil {
		return err
	}
	for _, m := range methods.Payments {
		if !slices.Contains(out.PaymentMethods, m.NameMethod) {
			out.PaymentMethods = append(out.PaymentMethods, m.NameMethod)
		}
	}
	var points struct {
		ServicePoints []struct {
			ID   string `json:"id"`
			Name string `json:"name"`
		} `json:"servicepoints"`
	}
	if err := s.svc.Console.GetJSON(ctx, "/service-points?limit=100", &points); err != nil {
		return err
	}
	out.ServicePoints = points.ServicePoints
	return c.JSON(http.StatusOK, out)
}

// openLoans is a patron's open loans, the earliest due first, each with
// its item's barcode, title and status: two reads of storage.
func (s *Server) openLoans(ctx context.Context, userID string) ([]deskLoan, error) {
	var page struct {
		Loans []struct {
			ID           string `json:"id"`
			ItemID       string `json:"itemId"`
			DueDate      string `json:"dueDate"`
			RenewalCount int    `json:"renewalCount"`
			Action       string `json:"action"`
			Offline      *struct {
				BrokenRules []string `json:"brokenRules"`
			} `json:"offline"`
		} `json:"loans"`
	}
	q := url.Values{"query": {"userId==" + cqlTerm(userID) + ` and status.name==` + cqlTerm(schemas.LoanOpen) + ` sortBy dueDate`}, "limit": {strconv.Itoa(deskLoans)}}
	if err := s.svc.Console.GetJSON(ctx, "/loan-storage/loans?"+q.Encode(), &page); err != nil {
		return nil, err
	}
	// The loans' items, in one read.
	var ids []string
	for _, l := range page.Loans {
		if s.Schemas().ValidUUID(l.ItemID) {
			ids = append(ids, cqlTerm(l.ItemID))
		}
	}
	type item struct {
		ID      string `json:"id"`
		Barcode string `json:"barcode"`
		Title   string `json:"title"`
		Status  struct {
			Name string `json:"name"`
		} `json:"status"`
	}
	var found struct {
		Items []item `json:"items"`
	}
	if len(ids) > 0 {
		q := url.Values{"query": {"id==(" + strings.Join(ids, " or ") + ")"}, "limit": {strconv.Itoa(len(ids))}}
		if err := s.svc.Console.GetJSON(ctx, "/item-storage/items?"+q.Encode(), &found); err != nil {
			return nil, err
		}
	}
	items := map[string]item{}
	for _, it := range found.Items {
		items[strings.ToLower(it.ID)] = it
	}
	loans := make([]deskLoan, 0, len(page.Loans))
	for _, l := range page.Loans {
		it := items[strings.ToLower(l.ItemID)]
		d := deskLoan{ID: l.ID, ItemID: l.ItemID, DueDate: l.DueDate, RenewalCount: l.RenewalCount, Action: l.Action,
			ItemBarcode: it.Barcode, Title: it.Title, ItemStatus: it.Status.Name}
		if l.Offline != nil {
			d.Offline = schemas.OfflineWords(l.Offline.BrokenRules)
		}
		loans = append(loans, d)
	}
	return loans, nil
}

// overrideOf is how an override would renew a loan refused for o's
// refusals: nil unless every refusal names the block that lifts it, as
// FOLIO's Users app offers an override only then. The due date is asked
// where the override of the policy's refusals would need it, and sent in
// renewalDueDateRequiredBlock, the block that carries it.
func overrideOf(o circulation.RenewalOutlook, lacks func(block string) []string) *deskOverride {
	out := &deskOverride{Blocks: []string{}, Allowed: true}
	policys := false
	for _, e := range o.Refusals {
		block := schemas.RenewalOverridableBlock(e.Code)
		if block == "" {
			return nil
		}
		if !slices.Contains(out.Blocks, block) {
			out.Blocks = append(out.Blocks, block)
		}
		policys = policys || block != schemas.OverridePatronBlock
	}
	out.DueDateRequired = policys && o.OverrideNeedsDueDate
	if out.DueDateRequired && !slices.Contains(out.Blocks, schemas.OverrideRenewalDueDateRequiredBlock) {
		out.Blocks = append(out.Blocks, schemas.OverrideRenewalDueDateRequiredBlock)
	}
	var who []string
	for _, block := range out.Blocks {
		for _, p := range lacks(block) {
			if r := schemas.RolesHolding(p); !slices.Contains(who, r) {
				who = append(who, r)
			}
		}
	}
	if len(who) > 0 {
		out.Allowed, out.Reason = false, "Overriding this needs "+strings.Join(who, " and ")
	}
	return out
}

// judgeLoans says what each of a patron's open loans may do: change its
// due date, claim, declare lost and check in by the item's status
// (schemas' table of loan actions, the one the routes refuse by; a
// check-in, by barcode, needs the item's); renew
// as RenewByID would judge it now, from the same read, so a renewal
// offered is one the route does and a renewal refused is refused in the
// route's words; where an override lifts every refusal, how
// (deskOverride), with the permissions the caller lacks for it (lacks).
func (s *Server) judgeLoans(ctx context.Context, patronID string, loans []deskLoan, lacks func(block string) []string) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(deskJudged)
	for i := range loans {
		l := &loans[i]
		l.Actions = map[string]deskAction{}
		for _, a := range schemas.LoanActions {
			if r, refused := schemas.LoanActionRefused(a, l.ItemStatus); refused {
				l.Actions[a] = deskAction{Reason: r.Message}
			} else {
				l.Actions[a] = deskAction{Allowed: true}
			}
		}
		if in := l.Actions[schemas.LoanActionCheckIn]; in.Allowed && l.ItemBarcode == "" {
			// Checked in by barcode, as FOLIO's check-in is: an item
			// without one is not.
			l.Actions[schemas.LoanActionCheckIn] = deskAction{Reason: "a check-in needs the item's barcode"}
		} else if in.Allowed {
			in.Resolutions = schemas.ClaimResolutions(l.ItemStatus)
			l.Actions[schemas.LoanActionCheckIn] = in
		}
		l.RenewalsLeft = 0
		g.Go(func() error {
			o, err := s.svc.Circulation.RenewalOutlook(ctx, l.ItemID, patronID)
			if err != nil {
				return err
			}
			l.LoanPolicyName, l.Renewable = o.PolicyName, o.Renewable
			if o.Unlimited && o.Renewable {
				l.RenewalsLeft = "unlimited"
			} else {
				l.RenewalsLeft = o.Left
			}
			if len(o.Refusals) > 0 {
				// Worded as the page words a refusal: FOLIO's messages, joined.
				words := make([]string, len(o.Refusals))
				for i, e := range o.Refusals {
					words[i] = e.Message
				}
				l.Actions[schemas.LoanActionRenew] = deskAction{Reason: strings.Join(words, "; "), Override: overrideOf(o, lacks)}
			}
			return nil
		})
	}
	return g.Wait()
}
