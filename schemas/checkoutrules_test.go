package schemas

import (
	"slices"
	"testing"
)

// TestCheckOutRulesAreOneTable: each rule's name is its own; whose it is
// is the patron's, the item's or the policy's, in that order; its
// override is one a check-out can carry; rules refused with one code say
// one thing of a loan made offline.
func TestCheckOutRulesAreOneTable(t *testing.T) {
	order := []string{RuleOfPatron, RuleOfItem, RuleOfPolicy}
	seen := map[string]bool{}
	words := map[string]string{}
	last := 0
	for _, r := range CheckOutRules {
		if seen[r.Name] || r.Name == "" {
			t.Errorf("rule %q twice or unnamed", r.Name)
		}
		seen[r.Name] = true
		at := slices.Index(order, r.Of)
		if at < last {
			t.Errorf("rule %s is the %q's, out of order %v", r.Name, r.Of, order)
		}
		last = at
		if !slices.Contains([]string{"", OverridePatronBlock, OverrideItemLimit, OverrideItemNotLoanable}, r.Lifted) {
			t.Errorf("rule %s is lifted by %q, which no check-out carries", r.Name, r.Lifted)
		}
		if w, ok := words[r.Code]; ok && w != r.Words {
			t.Errorf("rules refused with %s say %q and %q of a loan made offline", r.Code, w, r.Words)
		}
		words[r.Code] = r.Words
		if r.Code == "" || r.Says == "" || r.Words == "" {
			t.Errorf("rule %s has no code, message or words", r.Name)
		}
	}
	if missing, unknown := SameRules(map[string]bool{RuleBlockedManually: true}); len(missing) != len(CheckOutRules)-1 || len(unknown) != 0 {
		t.Errorf("SameRules of one rule: missing %v, unknown %v", missing, unknown)
	}
	every := map[string]bool{"other": true}
	for _, r := range CheckOutRules {
		every[r.Name] = true
	}
	if missing, unknown := SameRules(every); len(missing) != 0 || !slices.Equal(unknown, []string{"other"}) {
		t.Errorf("SameRules of every rule and another: missing %v, unknown %v", missing, unknown)
	}
	if got := (Overrides{ItemLimit: true}).Lifted(); !slices.Equal(got, []string{RuleItemLimit}) {
		t.Errorf("the item limit's override lifts %v", got)
	}
}
