package storage

import "testing"

func TestRulesMatch(t *testing.T) {
	t.Parallel()
	const (
		pg, otherPG = "pg", "pg2"
		mt, otherMT = "mt", "mt2"
		lt, otherLT = "lt", "lt2"
	)
	rules := CirculationRules{
		FallbackLoanPolicyID: "fallback",
		Rules: []CirculationRule{
			{PatronGroupID: pg, LoanPolicyID: "by-group"},                                           // 0
			{MaterialTypeID: mt, LoanPolicyID: "by-material"},                                       // 1
			{LoanTypeID: lt, LoanPolicyID: "by-loan-type"},                                          // 2
			{PatronGroupID: pg, MaterialTypeID: mt, LoanPolicyID: "group+mat"},                      // 3
			{MaterialTypeID: mt, LoanTypeID: lt, LoanPolicyID: "mat+loan"},                          // 4
			{PatronGroupID: pg, LoanTypeID: lt, LoanPolicyID: "group+loan"},                         // 5
			{MaterialTypeID: otherMT, LoanPolicyID: "other-material"},                               // 6
			{MaterialTypeID: otherMT, LoanPolicyID: "other-material-later"},                         // 7
			{PatronGroupID: otherPG, MaterialTypeID: mt, LoanTypeID: lt, LoanPolicyID: "all-three"}, // 8
		},
	}
	tests := []struct {
		name       string
		pg, mt, lt string
		want       PolicyMatch
	}{
		{"nothing matches: fallback", "x", "x", "x", PolicyMatch{LoanPolicyID: "fallback", RuleIndex: -1}},
		{"one criterion", pg, "x", "x", PolicyMatch{LoanPolicyID: "by-group", PatronGroupMatch: true, RuleIndex: 0}},
		{"loan type beats material type beats group among singles", "x", mt, lt,
			PolicyMatch{LoanPolicyID: "mat+loan", MaterialTypeMatch: true, LoanTypeMatch: true, RuleIndex: 4}},
		{"two criteria beat one", pg, mt, "x", PolicyMatch{LoanPolicyID: "group+mat", PatronGroupMatch: true, MaterialTypeMatch: true, RuleIndex: 3}},
		{"among pairs, loan type + material type beats the rest", pg, mt, lt,
			PolicyMatch{LoanPolicyID: "mat+loan", MaterialTypeMatch: true, LoanTypeMatch: true, RuleIndex: 4}},
		{"three criteria beat two", otherPG, mt, lt,
			PolicyMatch{LoanPolicyID: "all-three", PatronGroupMatch: true, MaterialTypeMatch: true, LoanTypeMatch: true, RuleIndex: 8}},
		{"loan type alone beats material type alone", "x", otherMT, lt, PolicyMatch{LoanPolicyID: "by-loan-type", LoanTypeMatch: true, RuleIndex: 2}},
		{"material type alone beats group alone", pg, otherMT, "x", PolicyMatch{LoanPolicyID: "other-material", MaterialTypeMatch: true, RuleIndex: 6}},
		{"equal rules: the earlier wins", "x", otherMT, "x", PolicyMatch{LoanPolicyID: "other-material", MaterialTypeMatch: true, RuleIndex: 6}},
		{"empty inputs match only empty criteria", "", "", "", PolicyMatch{LoanPolicyID: "fallback", RuleIndex: -1}},
	}
	for _, tt := range tests {
		if got := rules.Match(tt.pg, tt.mt, tt.lt); got != tt.want {
			t.Errorf("%s: Match(%s, %s, %s) = %+v, want %+v", tt.name, tt.pg, tt.mt, tt.lt, got, tt.want)
		}
	}
	if got := (CirculationRules{FallbackLoanPolicyID: "f"}).Match(pg, mt, lt); got.LoanPolicyID != "f" || got.RuleIndex != -1 {
		t.Errorf("no rules: %+v, want the fallback", got)
	}
}
