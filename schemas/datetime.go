package schemas

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// The years a stored date may fall in, in UTC. Every record that stores a
// date (loans, requests, manual blocks, patrons' expiry, items' status
// dates) and every request that names one is held to them: PostgreSQL,
// which computes with the dates (overdue loans, blocks in force), knows no
// year 0, and a date a service cannot write back in RFC 3339 would break
// every later read of the record.
const (
	MinYear = 1900
	MaxYear = 9999
)

// LatestDate is the last instant of MaxYear, in UTC, to the millisecond
// (TimeFormat's precision): the latest date a record can store.
func LatestDate() time.Time {
	return time.Date(MaxYear, time.December, 31, 23, 59, 59, int(999*time.Millisecond), time.UTC)
}

// ParseDateTime reads a JSON Schema date-time (RFC 3339: a lowercase "t" or
// "z" is read as its capital; DateTimePattern) within MinYear to MaxYear
// once in UTC. It is the "date-time" format of every schema in the set and
// what the services decode dates with: the one home of what a date is. A
// leap second (":60") is refused rather than moved.
func ParseDateTime(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, strings.ToUpper(s))
	if err != nil {
		return time.Time{}, errors.New("is not an RFC 3339 date-time such as 2026-01-31T17:00:00Z")
	}
	if !dateTimeShape.MatchString(s) {
		return time.Time{}, errors.New("has an offset beyond ±18:00 or minutes beyond 59 in its offset")
	}
	if y := t.UTC().Year(); y < MinYear || y > MaxYear {
		return time.Time{}, fmt.Errorf("is outside the years %d to %d", MinYear, MaxYear)
	}
	return t, nil
}

// FormatTime writes t as every time goes on the wire: in UTC, in
// TimeFormat, to the millisecond. The zero time, a time not set, is "".
func FormatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(TimeFormat)
}

// WireTime is t as the wire holds it: in UTC, to the millisecond
// (TimeFormat's precision). A time a service computes from (a loan date,
// a renewal's now) is taken as WireTime first, so that what it computes
// is what a reader of the record computes from the same text.
func WireTime(t time.Time) time.Time { return t.UTC().Truncate(time.Millisecond) }

// DateTimePattern is the shape of a date-time, as a regular expression
// Go and PostgreSQL read alike (migration 22's stored_time matches stored
// dates against this very text): RFC 3339's, with the offset bounded to
// ±18:00, the bound ISO 8601's users keep (Java's ZoneOffset, PostgreSQL's
// own input), and its minutes 00 to 59. Go's parser alone takes +24:00 and
// +00:60; PostgreSQL's alone takes "now", "epoch" and dates without an
// offset.
const DateTimePattern = `^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}([.][0-9]+)?([Zz]|[+-]((0[0-9]|1[0-7]):[0-5][0-9]|18:00))$`

var dateTimeShape = regexp.MustCompile(DateTimePattern)

// dateTimeFormat is ParseDateTime as the validator's "date-time" format.
func dateTimeFormat(v any) error {
	s, ok := v.(string)
	if !ok {
		return nil // not a string: "type" says so
	}
	_, err := ParseDateTime(s)
	return err
}
