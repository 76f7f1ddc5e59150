package storage

import (
	"context"
	"encoding/json"

	"golang.org/x/sync/errgroup"
)

// CheckOutRecords is everything validating a check-out by barcode reads,
// gathered in one call: the patron, the item, the item's open loan, the
// loan policy the circulation rules choose and the patron's open loans
// counted the way that policy's item limit counts them. A record that does
// not exist is nil; the caller decides what its absence means.
type CheckOutRecords struct {
	User, Item, OpenLoan json.RawMessage
	// Match and LoanPolicy are set when the patron and the item exist and
	// the rules are set; RulesSet says whether they are.
	RulesSet   bool
	Match      *PolicyMatch
	LoanPolicy json.RawMessage
	// OpenLoans counts the patron's open loans (not those of items Claimed
	// returned) of the item's material type when the rule named one, and of
	// its loan type when the rule named one: the item limit's count.
	OpenLoans int
}

// CheckOutReader reads a check-out's records from the services that keep
// them.
type CheckOutReader struct {
	Records RecordService
	Rules   RulesService
	Counter LoanCounter
}

// Read gathers the records for a check-out of itemBarcode to userBarcode:
// the patron and the item at once, then the item's open loan at once with
// the rules, the policy and the count.
func (r CheckOutReader) Read(ctx context.Context, t Tenant, itemBarcode, userBarcode string) (CheckOutRecords, error) {
	var out CheckOutRecords
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() (err error) {
		out.User, err = r.first(gctx, t, Patrons, map[string]string{"barcode": userBarcode})
		return err
	})
	g.Go(func() (err error) {
		out.Item, err = r.first(gctx, t, Items, map[string]string{"barcode": itemBarcode})
		return err
	})
	if err := g.Wait(); err != nil {
		return CheckOutRecords{}, err
	}
	if out.Item == nil {
		return out, nil
	}
	var item struct {
		ID                  string `json:"id"`
		MaterialTypeID      string `json:"materialTypeId"`
		PermanentLoanTypeID string `json:"permanentLoanTypeId"`
		TemporaryLoanTypeID string `json:"temporaryLoanTypeId"`
	}
	if err := json.Unmarshal(out.Item, &item); err != nil {
		return CheckOutRecords{}, err
	}
	loanType := item.PermanentLoanTypeID
	if item.TemporaryLoanTypeID != "" {
		loanType = item.TemporaryLoanTypeID
	}
	g, gctx = errgroup.WithContext(ctx)
	g.Go(func() (err error) {
		out.OpenLoan, err = r.first(gctx, t, Loans, map[string]string{"itemId": item.ID, "status": "Open"})
		return err
	})
	if out.User != nil {
		g.Go(func() error {
			var user struct {
				ID          string `json:"id"`
				PatronGroup string `json:"patronGroup"`
			}
			if err := json.Unmarshal(out.User, &user); err != nil {
				return err
			}
			rules, err := r.Rules.Rules(gctx, t)
			if IsKind(err, KindNotFound) {
				return nil
			}
			if err != nil {
				return err
			}
			out.RulesSet = true
			m := rules.Match(user.PatronGroup, item.MaterialTypeID, loanType)
			out.Match = &m
			g2, g2ctx := errgroup.WithContext(gctx)
			g2.Go(func() (err error) {
				out.LoanPolicy, err = r.Records.Get(g2ctx, t, LoanPolicies, m.LoanPolicyID)
				return err
			})
			g2.Go(func() (err error) {
				var mt, lt string
				if m.MaterialTypeMatch {
					mt = item.MaterialTypeID
				}
				if m.LoanTypeMatch {
					lt = loanType
				}
				out.OpenLoans, err = r.Counter.CountOpenLoans(g2ctx, t, user.ID, mt, lt)
				return err
			})
			return g2.Wait()
		})
	}
	if err := g.Wait(); err != nil {
		return CheckOutRecords{}, err
	}
	return out, nil
}

// first is the first record of r matching params, or nil.
func (r CheckOutReader) first(ctx context.Context, t Tenant, res Resource, params map[string]string) (json.RawMessage, error) {
	docs, _, err := r.Records.List(ctx, t, res, RecordFilter{Params: params, Limit: 1})
	if err != nil || len(docs) == 0 {
		return nil, err
	}
	return docs[0], nil
}
