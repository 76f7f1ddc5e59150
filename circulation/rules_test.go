package circulation

import (
	"testing"

	"github.com/checkoutlock/schemas"
)

// TestCirculationJudgesEveryCheckOutRule: validation has a judge for each
// of schemas.CheckOutRules and none for a rule the table does not have.
func TestCirculationJudgesEveryCheckOutRule(t *testing.T) {
	if missing, unknown := schemas.SameRules(judges); len(missing)+len(unknown) > 0 {
		t.Fatalf("circulation judges no %v, and judges %v, which are no check-out rules", missing, unknown)
	}
}
