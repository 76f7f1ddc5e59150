package lending

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/checkoutlock/circulation-storage/internal/dbtest"
	"github.com/checkoutlock/schemas/errs"
	"github.com/google/uuid"

	storage "github.com/checkoutlock/circulation-storage"
)

// TestRulesMatch holds policyMatchSQL, the one place the rules choose a
// loan policy, to FOLIO's priority, on a real tenant: the most criteria
// win, then the loan type over the material type over the patron group,
// then the earlier rule; nothing matching, the fallback.
func TestRulesMatch(t *testing.T) {
	t.Parallel()
	f := dbtest.Setup(t)
	ctx := context.Background()
	lib := newLibrary(f.DB, testPolicy)
	create := func(r storage.Resource, doc string) string {
		t.Helper()
		id := uuid.NewString()
		if _, err := lib.Create(ctx, f.Tenant, r, id, json.RawMessage(doc)); err != nil {
			t.Fatalf("create %s: %v", r.Name, err)
		}
		return id
	}
	named := func(r storage.Resource, field, name string) string {
		return create(r, fmt.Sprintf(`{%q:%q}`, field, name))
	}
	pg, otherPG := named(storage.PatronGroups, "group", "pg"), named(storage.PatronGroups, "group", "pg2")
	mt, otherMT := named(storage.MaterialTypes, "name", "mt"), named(storage.MaterialTypes, "name", "mt2")
	lt := named(storage.LoanTypes, "name", "lt")
	policies := map[string]string{}
	policy := func(name string) string {
		if id, ok := policies[name]; ok {
			return id
		}
		policies[name] = create(storage.LoanPolicies, fmt.Sprintf(`{"name":%q,"loanable":true}`, name))
		return policies[name]
	}
	rules := storage.CirculationRules{
		FallbackLoanPolicyID: policy("fallback"),
		Rules: []storage.CirculationRule{
			{PatronGroupID: pg, LoanPolicyID: policy("by-group")},                                           // 0
			{MaterialTypeID: mt, LoanPolicyID: policy("by-material")},                                       // 1
			{LoanTypeID: lt, LoanPolicyID: policy("by-loan-type")},                                          // 2
			{PatronGroupID: pg, MaterialTypeID: mt, LoanPolicyID: policy("group+mat")},                      // 3
			{MaterialTypeID: mt, LoanTypeID: lt, LoanPolicyID: policy("mat+loan")},                          // 4
			{PatronGroupID: pg, LoanTypeID: lt, LoanPolicyID: policy("group+loan")},                         // 5
			{MaterialTypeID: otherMT, LoanPolicyID: policy("other-material")},                               // 6
			{MaterialTypeID: otherMT, LoanPolicyID: policy("other-material-later")},                         // 7
			{PatronGroupID: otherPG, MaterialTypeID: mt, LoanTypeID: lt, LoanPolicyID: policy("all-three")}, // 8
		},
	}
	service := NewRules(f.DB, testPolicy)
	if _, err := service.MatchLoanPolicy(ctx, f.Tenant, pg, mt, lt); !errs.IsKind(err, errs.KindNotFound) {
		t.Errorf("no rules set: %v, want not found", err)
	}
	if err := service.SetRules(ctx, f.Tenant, rules); err != nil {
		t.Fatal(err)
	}
	x := uuid.NewString() // matches no rule
	tests := []struct {
		name       string
		pg, mt, lt string
		want       storage.PolicyMatch
	}{
		{"nothing matches: fallback", x, x, x, storage.PolicyMatch{LoanPolicyID: policy("fallback"), RuleIndex: -1}},
		{"one criterion", pg, x, x, storage.PolicyMatch{LoanPolicyID: policy("by-group"), PatronGroupMatch: true, RuleIndex: 0}},
		{"loan type beats material type beats group among singles", x, mt, lt,
			storage.PolicyMatch{LoanPolicyID: policy("mat+loan"), MaterialTypeMatch: true, LoanTypeMatch: true, RuleIndex: 4}},
		{"two criteria beat one", pg, mt, x,
			storage.PolicyMatch{LoanPolicyID: policy("group+mat"), PatronGroupMatch: true, MaterialTypeMatch: true, RuleIndex: 3}},
		{"among pairs, loan type + material type beats the rest", pg, mt, lt,
			storage.PolicyMatch{LoanPolicyID: policy("mat+loan"), MaterialTypeMatch: true, LoanTypeMatch: true, RuleIndex: 4}},
		{"three criteria beat two", otherPG, mt, lt,
			storage.PolicyMatch{LoanPolicyID: policy("all-three"), PatronGroupMatch: true, MaterialTypeMatch: true, LoanTypeMatch: true, RuleIndex: 8}},
		{"loan type alone beats material type alone", x, otherMT, lt,
			storage.PolicyMatch{LoanPolicyID: policy("by-loan-type"), LoanTypeMatch: true, RuleIndex: 2}},
		{"material type alone beats group alone", pg, otherMT, x,
			storage.PolicyMatch{LoanPolicyID: policy("other-material"), MaterialTypeMatch: true, RuleIndex: 6}},
		{"equal rules: the earlier wins", x, otherMT, x,
			storage.PolicyMatch{LoanPolicyID: policy("other-material"), MaterialTypeMatch: true, RuleIndex: 6}},
		{"empty inputs match only empty criteria", "", "", "", storage.PolicyMatch{LoanPolicyID: policy("fallback"), RuleIndex: -1}},
	}
	for _, tt := range tests {
		got, err := service.MatchLoanPolicy(ctx, f.Tenant, tt.pg, tt.mt, tt.lt)
		if err != nil || got != tt.want {
			t.Errorf("%s: %+v (%v), want %+v", tt.name, got, err, tt.want)
		}
	}
}
