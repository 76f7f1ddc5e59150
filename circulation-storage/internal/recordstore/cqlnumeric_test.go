package recordstore

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/checkoutlock/circulation-storage/internal/dbtest"
	"github.com/checkoutlock/circulation-storage/internal/sample"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/circulation-storage/cql"
)

// TestCQLNumericComparisons: <, >, <= and >= compare a number as a number,
// not as the string it is written as: _version>9 finds _version 10 ("10"
// sorts before "9" as text) and _version<9 does not. A quoted string is
// still compared as a string. (mutations.txt: cql-numeric-as-text.)
func TestCQLNumericComparisons(t *testing.T) {
	t.Parallel()
	f := dbtest.SetupLibrary(t, sample.LoadData)
	ctx := context.Background()
	// book-001 at _version 10, book-002 at 9, book-003 at 2; the other
	// book-00x stay at 1.
	for barcode, version := range map[string]int{"book-001": 10, "book-002": 9, "book-003": 2} {
		f.Exec(t, `UPDATE `+dbtest.View(f.Tenant, "item")+` SET jsonb = jsonb_set(jsonb, '{_version}', to_jsonb($2::integer)) WHERE id = $1`,
			sample.ID(barcode), version)
	}
	records := NewRecords(f.DB)
	ones := []string{"book-004", "book-005", "book-006", "book-007", "book-008", "book-009"}
	for _, c := range []struct {
		query string
		want  []string
	}{
		{`_version>9`, []string{"book-001"}},
		{`_version>=10`, []string{"book-001"}},
		{`_version>=9`, []string{"book-001", "book-002"}},
		{`_version>"9"`, []string{"book-001"}}, // a number quoted is still a number
		{`_version>9.5`, []string{"book-001"}},
		{`_version<9`, append([]string{"book-003"}, ones...)},
		{`_version<=2`, append([]string{"book-003"}, ones...)},
		{`_version>1 and _version<10`, []string{"book-002", "book-003"}},
		{`_version>-1 and _version<1e1`, append([]string{"book-002", "book-003"}, ones...)},
		{`barcode>"book-008"`, []string{"book-009"}}, // strings as strings
	} {
		text := `barcode=="book-00?" and ` + c.query
		q, err := cql.Parse(text)
		if err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		docs, total, err := records.List(ctx, f.Tenant, storage.Items, storage.RecordFilter{Query: q, QueryText: text, Limit: 100})
		if err != nil {
			t.Errorf("%s: %v", c.query, err)
			continue
		}
		var got []string
		for _, d := range docs {
			var item struct{ Barcode string }
			if err := json.Unmarshal(d, &item); err != nil {
				t.Fatal(err)
			}
			got = append(got, item.Barcode)
		}
		slices.Sort(got)
		want := slices.Sorted(slices.Values(c.want))
		if !slices.Equal(got, want) || total != len(want) {
			t.Errorf("%s: %v (total %d), want %v", c.query, got, total, want)
		}
	}
}
