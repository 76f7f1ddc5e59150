package httpapi

import (
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
	if err := s.bind(c, "circulation-rules.json", &rules); err != nil {
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
	rules, err := s.svc.Rules.Rules(c.Request().Context(), tenantOf(c))
	if err != nil {
		return err
	}
	m := rules.Match(ids[0], ids[1], ids[2])
	var out policyMatchJSON
	out.LoanPolicyID = m.LoanPolicyID
	out.AppliedRuleConditions.PatronGroupMatch = m.PatronGroupMatch
	out.AppliedRuleConditions.MaterialTypeMatch = m.MaterialTypeMatch
	out.AppliedRuleConditions.LoanTypeMatch = m.LoanTypeMatch
	if m.RuleIndex >= 0 {
		out.RuleIndex = &m.RuleIndex
	}
	return c.JSON(http.StatusOK, out)
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
