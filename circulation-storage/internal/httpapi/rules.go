package httpapi

import (
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"

	storage "github.com/checkoutlock/circulation-storage"
)

func (s *Server) getRules(c echo.Context) error {
	rules, err := s.svc.Rules.Rules(c.Request().Context(), tenantOf(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, rules)
}

func (s *Server) putRules(c echo.Context) error {
	var rules storage.CirculationRules
	if err := s.bind(c, &rules); err != nil {
		return err
	}
	if err := s.svc.Rules.SetRules(c.Request().Context(), tenantOf(c), rules); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// policyMatchJSON is schemas/loan-policy-match.json.
type policyMatchJSON struct {
	LoanPolicyID          string `json:"loanPolicyId"`
	AppliedRuleConditions struct {
		PatronGroupMatch  bool `json:"patronGroupMatch"`
		MaterialTypeMatch bool `json:"materialTypeMatch"`
		LoanTypeMatch     bool `json:"loanTypeMatch"`
	} `json:"appliedRuleConditions"`
	RuleIndex *int `json:"ruleIndex,omitempty"`
}

// matchLoanPolicy answers which loan policy applies to a patron group,
// material type and loan type, and which criteria the chosen rule named.
func (s *Server) matchLoanPolicy(c echo.Context) error {
	var ids [3]string
	for i, name := range []string{"patronGroupId", "materialTypeId", "loanTypeId"} {
		v, err := s.queryUUID(c, name)
		if err != nil {
			return err
		}
		ids[i] = v
	}
	m, err := s.svc.Rules.MatchLoanPolicy(c.Request().Context(), tenantOf(c), ids[0], ids[1], ids[2])
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, matchJSON(m))
}

// allowedServicePoints answers, for each request type the requester may
// place for the item, the pickup service points a request of it may name
// (schemas/allowed-service-points-response.json), ignoring the item's
// status when ignoreItemStatus is true (a request replaced, FOLIO's).
func (s *Server) allowedServicePoints(c echo.Context) error {
	var ids [2]string
	for i, name := range []string{"requesterId", "itemId"} {
		v, err := s.queryUUID(c, name)
		if err != nil {
			return err
		}
		if v == "" {
			return invalidParam(name, "", "is required")
		}
		ids[i] = v
	}
	ignore, given, err := queryParam(c, "ignoreItemStatus")
	if err != nil {
		return err
	}
	if given && ignore != "true" && ignore != "false" {
		return invalidParam("ignoreItemStatus", ignore, "must be true or false")
	}
	points, err := s.svc.Rules.AllowedServicePoints(c.Request().Context(), tenantOf(c), ids[0], ids[1], ignore == "true")
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, points)
}

func matchJSON(m storage.PolicyMatch) policyMatchJSON {
	var out policyMatchJSON
	out.LoanPolicyID = m.LoanPolicyID
	out.AppliedRuleConditions.PatronGroupMatch = m.PatronGroupMatch
	out.AppliedRuleConditions.MaterialTypeMatch = m.MaterialTypeMatch
	out.AppliedRuleConditions.LoanTypeMatch = m.LoanTypeMatch
	if m.RuleIndex >= 0 {
		out.RuleIndex = &m.RuleIndex
	}
	return out
}

// checkOutValidationJSON is schemas/check-out-validation.json.
type checkOutValidationJSON struct {
	User          json.RawMessage  `json:"user,omitempty"`
	Item          json.RawMessage  `json:"item,omitempty"`
	MaterialType  json.RawMessage  `json:"materialType,omitempty"`
	ManualBlocks  json.RawMessage  `json:"manualBlocks,omitempty"`
	Automated     json.RawMessage  `json:"automatedPatronBlocks,omitempty"`
	QueueHead     json.RawMessage  `json:"requestQueueHead,omitempty"`
	OpenLoan      json.RawMessage  `json:"openLoan,omitempty"`
	OpenRecall    bool             `json:"openRecall,omitempty"`
	RulesSet      bool             `json:"circulationRulesSet"`
	Match         *policyMatchJSON `json:"loanPolicyMatch,omitempty"`
	LoanPolicy    json.RawMessage  `json:"loanPolicy,omitempty"`
	OpenLoanCount *int             `json:"openLoanCount,omitempty"`
	ItemLimit     *itemLimitJSON   `json:"itemLimit,omitempty"`
	LockSettings  lockSettingsJSON `json:"lockSettings"`
}

// lockSettingsJSON is the tenant's check-out lock settings entry, as
// stored, absent when there is none.
type lockSettingsJSON struct {
	Entry json.RawMessage `json:"entry,omitempty"`
}

// itemLimitJSON is the item limit storage enforces on the check-out's
// write, and the loans it counts.
type itemLimitJSON struct {
	Limit          int    `json:"limit"`
	OpenLoans      int    `json:"openLoans"`
	MaterialTypeID string `json:"materialTypeId,omitempty"`
	LoanTypeID     string `json:"loanTypeId,omitempty"`
	Reached        bool   `json:"reached"`
}

// validateCheckOut answers, in one call, everything validating a check-out
// or a renewal reads: the patron, the item, the item's open loan, the loan
// policy the rules choose with the chosen rule's criteria, and the
// patron's open loans counted as that policy's item limit counts them. The
// item and the patron are named by their barcodes (itemBarcode,
// userBarcode) or by their ids (itemId, userId, as a renewal by id names
// them), one pair or the other.
func (s *Server) validateCheckOut(c echo.Context) error {
	byID, err := s.validationByID(c)
	if err != nil {
		return err
	}
	kind, params := storage.FilterText, [2]string{"itemBarcode", "userBarcode"}
	if byID {
		kind, params = storage.FilterUUID, [2]string{"itemId", "userId"}
	}
	var named [2]string
	for i, name := range params {
		v, ok, err := s.filterParam(c, storage.Filter{Param: name, Kind: kind})
		if err != nil {
			return err
		}
		if !ok || v == "" {
			return invalidParam(name, v, "is required")
		}
		named[i] = v
	}
	read := s.svc.CheckOuts.ReadForCheckOut
	if byID {
		read = s.svc.CheckOuts.ReadForCheckOutByID
	}
	recs, err := read(c.Request().Context(), tenantOf(c), named[0], named[1])
	if err != nil {
		return err
	}
	out := checkOutValidationJSON{User: recs.User, Item: recs.Item, MaterialType: recs.MaterialType, ManualBlocks: recs.ManualBlocks, Automated: recs.AutomatedBlocks, QueueHead: recs.QueueHead, OpenLoan: recs.OpenLoan, OpenRecall: recs.OpenRecall, RulesSet: recs.RulesSet,
		LoanPolicy: recs.LoanPolicy, LockSettings: lockSettingsJSON{Entry: recs.LockSetting}}
	if recs.Match != nil {
		m := matchJSON(*recs.Match)
		out.Match = &m
		out.OpenLoanCount = &recs.OpenLoans
	}
	if l := recs.Limit; l != nil {
		out.ItemLimit = &itemLimitJSON{Limit: l.Limit, OpenLoans: recs.OpenLoans, MaterialTypeID: l.MaterialTypeID, LoanTypeID: l.LoanTypeID,
			Reached: l.Reached}
	}
	return c.JSON(http.StatusOK, out)
}

// validationByID says whether a validation's read names its item and
// patron by id: when either id is given, and then no barcode may be.
func (s *Server) validationByID(c echo.Context) (bool, error) {
	q := c.QueryParams()
	byID := q.Has("itemId") || q.Has("userId")
	if byID {
		for _, name := range []string{"itemBarcode", "userBarcode"} {
			if q.Has(name) {
				return false, invalidParam(name, q.Get(name), "cannot be given with itemId or userId: name the item and the patron by barcodes or by ids")
			}
		}
	}
	return byID, nil
}

// patronSummaryJSON is schemas/patron-summary.json.
type patronSummaryJSON struct {
	User          json.RawMessage `json:"user,omitempty"`
	OpenLoanCount int             `json:"openLoanCount"`
	OverdueCount  int             `json:"overdueCount"`
	OpenLoans     json.RawMessage `json:"openLoans,omitempty"`
	ItemLimits    json.RawMessage `json:"itemLimits,omitempty"`
	Unlimited     bool            `json:"unlimited"`
	ManualBlocks  json.RawMessage `json:"manualBlocks,omitempty"`
	Automated     json.RawMessage `json:"automatedPatronBlocks,omitempty"`
	Balance       string          `json:"feeFineBalance"`
	FeeFineCount  int             `json:"feeFineCount"`
	FeesFines     json.RawMessage `json:"feesFines,omitempty"`
}

// patronSummary answers, in one call, what a self-check machine shows a
// patron: who, their loans out, the item limits that apply to them and
// their blocks.
func (s *Server) patronSummary(c echo.Context) error {
	barcode, ok, err := s.filterParam(c, storage.Filter{Param: "userBarcode", Kind: storage.FilterText})
	if err != nil {
		return err
	}
	if !ok || barcode == "" {
		return invalidParam("userBarcode", barcode, "is required")
	}
	sum, err := s.svc.CheckOuts.ReadPatronSummary(c.Request().Context(), tenantOf(c), barcode)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, patronSummaryJSON{User: sum.User, OpenLoanCount: sum.OpenLoanCount, OverdueCount: sum.OverdueCount,
		OpenLoans: sum.OpenLoans, ItemLimits: sum.ItemLimits, Unlimited: sum.Unlimited, ManualBlocks: sum.ManualBlocks, Automated: sum.AutomatedBlocks,
		Balance: sum.FeeFineBalance, FeeFineCount: sum.FeeFineCount, FeesFines: sum.FeesFines})
}

// countOpenLoans answers the item-limit count: {"totalRecords": N}.
func (s *Server) countOpenLoans(c echo.Context) error {
	userID, err := s.queryUUID(c, "userId")
	if err != nil {
		return err
	}
	if userID == "" {
		return invalidParam("userId", "", "is required")
	}
	materialTypeID, err := s.queryUUID(c, "materialTypeId")
	if err != nil {
		return err
	}
	loanTypeID, err := s.queryUUID(c, "loanTypeId")
	if err != nil {
		return err
	}
	n, err := s.svc.Counter.CountOpenLoans(c.Request().Context(), tenantOf(c), userID, materialTypeID, loanTypeID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]int{"totalRecords": n})
}
