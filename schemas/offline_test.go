package schemas

import (
	"encoding/json"
	"slices"
	"testing"
)

// TestOfflineRulesAreTheLoansBrokenRules: the rules a check-out made
// offline is recorded past are the codes loan.json's offline.brokenRules
// takes, in the same order, and each has words of its own.
func TestOfflineRulesAreTheLoansBrokenRules(t *testing.T) {
	t.Parallel()
	data, err := files.ReadFile("loan.json")
	if err != nil {
		t.Fatal(err)
	}
	var loan struct {
		Properties struct {
			Offline struct {
				Properties struct {
					BrokenRules struct {
						Items struct {
							Enum []string `json:"enum"`
						} `json:"items"`
					} `json:"brokenRules"`
				} `json:"properties"`
			} `json:"offline"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(data, &loan); err != nil {
		t.Fatal(err)
	}
	var codes, words []string
	for _, r := range OfflineRules {
		codes = append(codes, r.Code)
		if r.Words == "" || slices.Contains(words, r.Words) {
			t.Errorf("%s: words %q empty or said of another rule", r.Code, r.Words)
		}
		words = append(words, r.Words)
	}
	if got := loan.Properties.Offline.Properties.BrokenRules.Items.Enum; !slices.Equal(got, codes) {
		t.Errorf("loan.json's offline.brokenRules takes %v; OfflineRules are %v", got, codes)
	}
	for _, tc := range []struct {
		codes []string
		want  string
	}{
		{nil, "lent offline"},
		{[]string{CodeItemLimitReached}, "lent offline past the item limit"},
		{[]string{CodeItemLimitReached, CodeUserBlockedManually}, "lent offline to a patron blocked from borrowing, past the item limit"},
		{[]string{"NOT_A_RULE"}, "lent offline"},
	} {
		if got := OfflineWords(tc.codes); got != tc.want {
			t.Errorf("OfflineWords(%v) = %q, want %q", tc.codes, got, tc.want)
		}
	}
}
