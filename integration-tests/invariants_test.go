package integration

import (
	"context"
	"regexp"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/checkoutlock/integration-tests/harness"
)

// TestInvariantsSeeABrokenItem: the invariants every workload ends on can
// fail. An item made Available behind its open loan's back, and another
// made Checked out without a loan, are each reported with the item and its
// loans as stored, so a failed run shows what happened to them.
func TestInvariantsSeeABrokenItem(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true})
	lib := c.SetupLibrary(1, 2, 5)
	lent, kept := lib.Items[0][0], lib.Items[0][1]
	c.CheckOut(0, lent, lib.Patrons[0]).Want(t, 201)
	if v := c.Violations(harness.Invariants{ItemLimit: 5}); len(v) != 0 {
		t.Fatalf("violations before anything was broken: %q", v)
	}

	item := pgx.Identifier{c.Schema, "item"}.Sanitize()
	for barcode, status := range map[string]string{lent: "Available", kept: "Checked out"} {
		if _, err := c.DB.Exec(context.Background(), `UPDATE `+item+
			` SET jsonb = jsonb_set(jsonb, '{status,name}', to_jsonb($2::text)) WHERE barcode = $1`, barcode, status); err != nil {
			t.Fatal(err)
		}
	}
	v := c.Violations(harness.Invariants{ItemLimit: 5})
	if len(v) != 2 {
		t.Fatalf("violations %q, want one for each broken item", v)
	}
	want := []*regexp.Regexp{
		regexp.MustCompile(`^item Checked out without an open loan: ` + kept +
			`\n      item \{.*"name": "Checked out".*"barcode": "` + kept + `".*\}$`),
		regexp.MustCompile(`^item with an open loan but not Checked out: ` + lent + ` is Available` +
			`\n      item \{.*"name": "Available".*"barcode": "` + lent + `".*\}` +
			`\n      loan \{.*"action": "checkedout".*"status": \{"name": "Open"\}.*\}$`),
	}
	for i, re := range want {
		if !re.MatchString(v[i]) {
			t.Errorf("violation %d:\n%s\nwant it to match %s", i, v[i], re)
		}
	}
}
