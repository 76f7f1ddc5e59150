package circulation

import (
	"testing"

	"github.com/checkoutlock/schemas"
)

// TestCirculationJudgesEveryCheckOutRule: validation has a judge for each
// of schemas.CheckOutRules and none for a rule the table does not have.
func TestCirculationJudgesEveryCheckOutRule(t *testing.T) {
	var names []string
	for name := range judges {
		names = append(names, name)
	}
	if missing, unknown := schemas.SameRules(names); len(missing)+len(unknown) > 0 {
		t.Fatalf("circulation judges no %v, and judges %v, which are no check-out rules", missing, unknown)
	}
}
