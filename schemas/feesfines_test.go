package schemas

import (
	"encoding/json"
	"testing"
)

// TestAmountsAreExactDecimals: an action's amount is read as a decimal of
// two places, as typed, never through a float; what is not one, or is
// zero, is refused in FOLIO's words.
func TestAmountsAreExactDecimals(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"5": "5.00", "5.0": "5.00", " 7.5 ": "7.50", "0.10": "0.10", "0010.01": "10.01",
		"99999999.99": "99999999.99", "0.3": "0.30"} {
		if got, refused := ParseAmount(in); got != want || refused != "" {
			t.Errorf("ParseAmount(%q) = %q, %q; want %q", in, got, refused, want)
		}
	}
	for in, want := range map[string]string{"": "Invalid amount entered", "1.001": "Invalid amount entered", "-1": "Invalid amount entered",
		"1e2": "Invalid amount entered", "1,00": "Invalid amount entered", "123456789": "Invalid amount entered", ".5": "Invalid amount entered",
		"0": "Amount must be positive", "0.00": "Amount must be positive"} {
		if got, refused := ParseAmount(in); got != "" || refused != want {
			t.Errorf("ParseAmount(%q) = %q, %q; want refused %q", in, got, refused, want)
		}
	}
}

// TestTheTenantsCurrency: the currency a tenant's locale settings name,
// when it is an ISO 4217 code; USD otherwise.
func TestTheTenantsCurrency(t *testing.T) {
	t.Parallel()
	for value, want := range map[string]string{`{"locale":"de-DE","currency":"EUR"}`: "EUR", `{"currency":"eur"}`: DefaultCurrency,
		`{"locale":"en-US"}`: DefaultCurrency, `"EUR"`: DefaultCurrency, ``: DefaultCurrency} {
		if got := Currency(json.RawMessage(value)); got != want {
			t.Errorf("Currency(%s) = %q, want %q", value, got, want)
		}
	}
}

// TestNoFeeFineTypeIsNamedAsAnAction: a fee/fine type named as what an
// action writes (every one of ActionWords) is refused, naming the field;
// FOLIO's types and an owner's own are taken.
func TestNoFeeFineTypeIsNamedAsAnAction(t *testing.T) {
	t.Parallel()
	set := MustLoad()
	for _, name := range ActionWords() {
		err := set.Validate("fee-fine-type.json", map[string]any{"feeFineType": name, "automatic": false})
		verr, ok := err.(*ValidationError)
		if !ok || len(verr.Violations) != 1 || verr.Violations[0].Field != "feeFineType" {
			t.Errorf("a fee/fine type named %q: %v, want refused for its feeFineType", name, err)
		}
	}
	for _, name := range []string{FeeFineOverdueFine, FeeFineLostItemFee, "Damaged book", "paid fully"} {
		if err := set.Validate("fee-fine-type.json", map[string]any{"feeFineType": name, "automatic": false}); err != nil {
			t.Errorf("a fee/fine type named %q: %v, want it taken", name, err)
		}
	}
	if got := len(ActionWords()); got != 10 {
		t.Errorf("%d action words, want FOLIO's 10: %q", got, ActionWords())
	}
}

// TestADefaultAmountInAStringIsAnAmount: fee-fine-type.json holds a
// default amount sent in a string to AmountPattern, the pattern an
// action's amount is read by (ParseAmount).
func TestADefaultAmountInAStringIsAnAmount(t *testing.T) {
	t.Parallel()
	b, err := files.ReadFile("fee-fine-type.json")
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Properties struct {
			DefaultAmount struct {
				AnyOf []struct{ Type, Pattern string }
			}
		}
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	var patterns []string
	for _, a := range s.Properties.DefaultAmount.AnyOf {
		if a.Type == "string" {
			patterns = append(patterns, a.Pattern)
		}
	}
	if len(patterns) != 1 || patterns[0] != AmountPattern {
		t.Errorf("defaultAmount's string patterns %q, want AmountPattern %q", patterns, AmountPattern)
	}
}
