package schemas

import (
	"strings"
	"testing"
	"time"
)

// TestDatesThisServiceCanComputeWith: the one rule of a date, as the
// schemas assert it and the services decode it.
func TestDatesThisServiceCanComputeWith(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"2026-01-31T17:00:00Z", true},
		{"2026-01-31t17:00:00.123z", true},
		{"1900-01-01T00:00:00Z", true},
		{"9999-12-31T23:59:59.999Z", true},
		{"1900-01-01T00:30:00+01:00", false}, // 1899 in UTC
		{"9999-12-31T23:00:00-02:00", false}, // year 10000 in UTC
		{"0000-01-01T00:00:00Z", false},
		{"0001-01-01T00:00:00Z", false},
		{"1899-12-31T23:59:59Z", false},
		{"2026-02-30T00:00:00Z", false},
		{"2026-01-31T23:59:60Z", false},
		{"2026-01-31", false},
		{"2026-01-31T17:00:00", false},
		{"2026-01-31T17:00:00+18:00", true},
		{"2026-01-31T17:00:00-18:00", true},
		{"2026-01-31T17:00:00+05:45", true},
		{"2026-01-31T17:00:00+24:00", false},
		{"2026-01-31T17:00:00-24:00", false},
		{"2026-01-31T17:00:00+18:01", false},
		{"2026-01-31T17:00:00+00:60", false},
		{"2026-01-31T17:00:00.5-19:00", false},
	} {
		_, err := ParseDateTime(tc.in)
		if (err == nil) != tc.ok {
			t.Errorf("ParseDateTime(%q): error %v, want ok=%v", tc.in, err, tc.ok)
		}
	}
}

// TestOutOfRangeDatesNameTheirField: a record whose date is out of range is
// refused by its schema, naming the field.
func TestOutOfRangeDatesNameTheirField(t *testing.T) {
	set := MustLoad()
	for _, tc := range []struct{ schema, doc, field string }{
		{"manualblock.json", `{"userId":"0b8d1c2e-2f55-4b1e-9d3f-6d6f7f0a9a11","desc":"x","borrowing":true,"expirationDate":"0000-01-01T00:00:00Z"}`, "expirationDate"},
		{"user.json", `{"active":true,"patronGroup":"0b8d1c2e-2f55-4b1e-9d3f-6d6f7f0a9a11","personal":{"lastName":"A"},"expirationDate":"0000-01-01T00:00:00Z"}`, "expirationDate"},
		{"check-out-by-barcode-request.json", `{"itemBarcode":"i","userBarcode":"u","servicePointId":"0b8d1c2e-2f55-4b1e-9d3f-6d6f7f0a9a11","loanDate":"0001-01-01T00:00:00Z"}`, "loanDate"},
	} {
		err := set.ValidateJSON(tc.schema, []byte(tc.doc))
		verr, ok := err.(*ValidationError)
		if !ok || len(verr.Violations) != 1 || verr.Violations[0].Field != tc.field || !strings.Contains(verr.Violations[0].Message, "1900 to 9999") {
			t.Errorf("%s: %v, want one violation of %s naming the years", tc.schema, err, tc.field)
		}
	}
}

// FuzzDateTimeIsTheSchemas: whatever the text, the schemas' date-time and
// ParseDateTime give the same answer, and a date accepted is within the
// years and reads back as itself once written as the services write dates.
func FuzzDateTimeIsTheSchemas(f *testing.F) {
	for _, s := range []string{"2026-01-31T17:00:00Z", "0000-01-01T00:00:00Z", "1900-01-01T00:30:00+01:00",
		"9999-12-31T23:59:59.999999999Z", "2026-02-30T00:00:00Z", "2026-01-31t17:00:00z", "", "x",
		"2026-01-31T17:00:00+24:00", "2026-01-31T17:00:00+00:60", "2026-01-31T17:00:00-18:00"} {
		f.Add(s)
	}
	set := MustLoad()
	f.Fuzz(func(t *testing.T, s string) {
		parsed, err := ParseDateTime(s)
		doc := map[string]any{"userId": "0b8d1c2e-2f55-4b1e-9d3f-6d6f7f0a9a11", "desc": "x", "expirationDate": s}
		if verr := set.Validate("manualblock.json", doc); (verr == nil) != (err == nil) {
			t.Fatalf("%q: schema %v, ParseDateTime %v", s, verr, err)
		}
		if err != nil {
			return
		}
		if y := parsed.UTC().Year(); y < MinYear || y > MaxYear {
			t.Fatalf("%q accepted in year %d", s, y)
		}
		again, err := ParseDateTime(FormatTime(parsed))
		if err != nil || !again.Equal(parsed.Truncate(time.Millisecond)) {
			t.Fatalf("%q written as %s reads back as %v, %v", s, FormatTime(parsed), again, err)
		}
	})
}

// TestTimesGoOnTheWireInUTCToTheMillisecond: the one way a time is
// written, whatever zone it was read in; a time not set is written as
// nothing.
func TestTimesGoOnTheWireInUTCToTheMillisecond(t *testing.T) {
	for _, tc := range []struct {
		in, want string
	}{
		{"2026-02-01T01:00:00+02:00", "2026-01-31T23:00:00.000Z"},
		{"2026-01-31T17:00:00.123456789Z", "2026-01-31T17:00:00.123Z"},
		{"2026-01-31T17:00:00.9999-05:45", "2026-01-31T22:45:00.999Z"},
		{"9999-12-31T23:59:59.999Z", "9999-12-31T23:59:59.999Z"},
	} {
		in, err := ParseDateTime(tc.in)
		if err != nil {
			t.Fatalf("ParseDateTime(%q): %v", tc.in, err)
		}
		if got := FormatTime(in); got != tc.want {
			t.Errorf("FormatTime(%s) = %q, want %q", tc.in, got, tc.want)
		}
		// What a service computes from is what a reader of the text reads.
		read, err := ParseDateTime(tc.want)
		if w := WireTime(in); err != nil || !w.Equal(read) || w.Location() != time.UTC {
			t.Errorf("WireTime(%s) = %v, want %s in UTC (%v)", tc.in, w, tc.want, err)
		}
	}
	if got := FormatTime(time.Time{}); got != "" {
		t.Errorf("FormatTime of the zero time = %q, want \"\"", got)
	}
	if got := FormatTime(LatestDate()); got != "9999-12-31T23:59:59.999Z" {
		t.Errorf("FormatTime(LatestDate()) = %q", got)
	}
}
