// Package locksettings is the check-out lock's runtime settings as stored
// in the tenant's checkoutLockFeature settings entry: the value's shape,
// how it is read (field by field, never half-way), and the bounds every
// stored value keeps to. Circulation reads and writes the entry with it,
// and storage checks every write of the entry with it, so that a value
// refused by one is refused by the other.
package locksettings

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/checkoutlock/schemas/text"
)

// The settings entry that holds a tenant's check-out lock settings, where
// FOLIO keeps it.
const (
	Scope = "mod-circulation"
	Key   = "checkoutLockFeature"
)

// Stored is the value of the checkoutLockFeature entry: FOLIO's
// shape, plus retryIntervalsMs for the seed design's per-retry waits. Absent
// fields fall back to the environment. retryIntervalsMs, when present, wins
// over noOfRetryAttempts × retryInterval.
type Stored struct {
	CheckOutLockFeatureEnabled *bool  `json:"checkOutLockFeatureEnabled,omitempty"`
	NoOfRetryAttempts          *int   `json:"noOfRetryAttempts,omitempty"`
	RetryInterval              *int   `json:"retryInterval,omitempty"`
	LockTTL                    *int   `json:"lockTtl,omitempty"`
	RetryIntervalsMs           *[]int `json:"retryIntervalsMs,omitempty"`
}

// The stored fields, by their JSON names.
const (
	fieldEnabled   = "checkOutLockFeatureEnabled"
	fieldAttempts  = "noOfRetryAttempts"
	fieldInterval  = "retryInterval"
	fieldTTL       = "lockTtl"
	fieldIntervals = "retryIntervalsMs"
)

// Bounds are the ranges a tenant's runtime settings must keep to, so that
// no value a librarian (or a client writing the settings entry directly)
// stores can stop check-outs from working: a lock that expires before a
// check-out can write makes every check-out fail LOCK_LOST; retries with no
// wait between them hammer storage; waits adding up past the request's
// deadline turn "unable to acquire lock" into a timeout.
type Bounds struct {
	MinLockTTL, MaxLockTTL     time.Duration
	MinRetryWait, MaxRetryWait time.Duration
	MaxRetries                 int
	// MaxTotalWait bounds the sum of the retry waits.
	MaxTotalWait time.Duration
}

// The bounds of the check-out lock, written here once: every lock's
// lifetime and every retry wait, wherever it comes from (the environment,
// a tenant's settings, an acquisition's ttlMs and waitMs), keeps to them,
// and the JSON Schemas that carry them are checked against them.
// Operators may narrow them (storage's LOCK_MAX_TTL_MS, LOCK_MAX_WAIT_MS);
// nothing widens them. Each refuses only what would stop check-outs, and
// FOLIO's own values pass (its settings fixture: lockTtl 500,
// retryInterval 5, noOfRetryAttempts 10): a lock lives 100 ms to 10 min
// (it must outlive the check-out's write under it, p99 25 ms at c = 4 in
// BENCHMARKS.md; a longer one only delays a crashed holder's successor), a
// retry waits 1 ms to 60 s (never a loop without a wait), at most 50
// retries (the calls one check-out may make), and an acquisition waits at
// storage at most 10 min.
const (
	MinLockTTL   = 100 * time.Millisecond
	MaxLockTTL   = 10 * time.Minute
	MinRetryWait = time.Millisecond
	MaxRetryWait = time.Minute
	MaxRetries   = 50
	MaxWait      = 10 * time.Minute
)

// DefaultBounds are the bounds every stored value keeps to, their waits
// adding up to at most maxTotalWait (no limit when it is 0): circulation
// passes a second less than its request timeout, storage the longest it
// lets an acquisition wait. Narrow narrows them further.
func DefaultBounds(maxTotalWait time.Duration) Bounds {
	b := Bounds{
		MinLockTTL: MinLockTTL, MaxLockTTL: MaxLockTTL,
		MinRetryWait: MinRetryWait, MaxRetryWait: MaxRetryWait,
		MaxRetries: MaxRetries, MaxTotalWait: time.Duration(math.MaxInt64),
	}
	if maxTotalWait > 0 {
		b.MaxTotalWait = maxTotalWait
	}
	return b
}

// Narrow is b with locks living at most maxLockTTL (an operator's
// LOCK_MAX_TTL_MS), when that is shorter.
func (b Bounds) Narrow(maxLockTTL time.Duration) Bounds {
	if maxLockTTL > 0 && maxLockTTL < b.MaxLockTTL {
		b.MaxLockTTL = maxLockTTL
	}
	return b
}

// InBounds checks that an environment variable's duration d keeps to
// [min, max], in milliseconds, naming the variable and, as why, what
// keeps to the same bounds.
func InBounds(variable string, d, min, max time.Duration, why string) error {
	if d < min || d > max {
		return fmt.Errorf("%s must be from %d to %d ms (%s), got %d", variable, min.Milliseconds(), max.Milliseconds(), why, d.Milliseconds())
	}
	return nil
}

// Total is the sum of waits.
func Total(waits []time.Duration) time.Duration {
	var sum time.Duration
	for _, w := range waits {
		sum += w
	}
	return sum
}

// FieldError is one settings field that cannot be used, and why.
type FieldError struct {
	Field   string
	Message string
	// Value is the offending value as JSON, cut to 100 characters.
	Value string
}

func (e FieldError) String() string {
	if e.Field == "" {
		return e.Message
	}
	return e.Field + ": " + e.Message
}

func fieldError(field string, value json.RawMessage, format string, args ...any) FieldError {
	return FieldError{Field: field, Message: fmt.Sprintf(format, args...), Value: text.Echoed(string(value))}
}

// decodeStored reads a stored value field by field: each field of the wrong
// type (or null) is left out and reported, never decoded half-way, so one
// bad field can neither throw away the others nor stand in for its own
// value with a zero (a string "true" must not read as false).
//
// The value may be the object itself or, as FOLIO stores it, a string
// holding the object.
func Decode(raw json.RawMessage) (Stored, []FieldError) {
	raw = Unwrap(raw)
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return Stored{}, []FieldError{fieldError("", raw, "the value is neither a JSON object nor a string holding one")}
	}
	if e := ambiguous(raw); e != nil {
		return Stored{}, []FieldError{*e}
	}
	var s Stored
	var errs []FieldError
	for _, name := range []string{fieldEnabled, fieldAttempts, fieldInterval, fieldTTL, fieldIntervals} {
		v, ok := fields[name]
		if !ok {
			continue
		}
		if err := DecodeField(&s, name, v); err != nil {
			errs = append(errs, *err)
		}
	}
	return s, errs
}

// ambiguous says why an object (raw) could be read two ways, or nil: a
// key given twice (a reader may take either), or a field's name as a key
// of a nested object (a reader may look there). Such a value is refused
// whole: no two readers of it could then disagree.
func ambiguous(raw json.RawMessage) *FieldError {
	known := map[string]bool{fieldEnabled: true, fieldAttempts: true, fieldInterval: true, fieldTTL: true, fieldIntervals: true}
	d := json.NewDecoder(bytes.NewReader(raw))
	seen := map[string]bool{}
	// stack holds, for each open container, whether it is an object and
	// whether its next token is a key.
	type open struct{ object, key bool }
	var stack []open
	for {
		tok, err := d.Token()
		if err != nil {
			return nil // the end, or what json.Unmarshal already refused
		}
		top := len(stack) - 1
		if key, isKey := tok.(string); isKey && top >= 0 && stack[top].object && stack[top].key {
			stack[top].key = false
			switch {
			case top == 0 && seen[key]:
				e := fieldError(key, raw, "is given twice")
				return &e
			case top == 0:
				seen[key] = true
			case known[key]:
				e := fieldError(key, raw, "may be given only at the top of the value, not inside another field")
				return &e
			}
			continue
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, open{object: true, key: true})
			continue
		case json.Delim('['):
			stack = append(stack, open{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:top]
		}
		// A value ended (or a container closed): the enclosing object's
		// next token is a key.
		if n := len(stack) - 1; n >= 0 && stack[n].object {
			stack[n].key = true
		}
	}
}

// decodeField decodes one stored field into s, or says why it cannot.
func DecodeField(s *Stored, name string, v json.RawMessage) *FieldError {
	if bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
		e := fieldError(name, v, "must not be null")
		return &e
	}
	switch name {
	case fieldEnabled:
		var b bool
		if err := json.Unmarshal(v, &b); err != nil {
			e := fieldError(name, v, "must be true or false, got %s", v)
			return &e
		}
		s.CheckOutLockFeatureEnabled = &b
	case fieldIntervals:
		var items []json.RawMessage
		if err := json.Unmarshal(v, &items); err != nil || items == nil {
			e := fieldError(name, v, "must be an array of integers, got %s", v)
			return &e
		}
		waits := make([]int, len(items))
		for i, item := range items {
			n, ok := integer(item)
			if !ok {
				e := fieldError(name, v, "must be an array of integers, got %s at index %d", item, i)
				return &e
			}
			waits[i] = n
		}
		s.RetryIntervalsMs = &waits
	default:
		n, ok := integer(v)
		if !ok {
			e := fieldError(name, v, "must be an integer, got %s", v)
			return &e
		}
		switch name {
		case fieldAttempts:
			s.NoOfRetryAttempts = &n
		case fieldInterval:
			s.RetryInterval = &n
		case fieldTTL:
			s.LockTTL = &n
		}
	}
	return nil
}

// integer reads a JSON number that is a whole number a 32-bit integer
// holds (3000 and 3000.0 and 3e3 alike); anything else, strings included,
// is not one.
func integer(v json.RawMessage) (int, bool) {
	d := json.NewDecoder(bytes.NewReader(v))
	d.UseNumber()
	var x any
	if err := d.Decode(&x); err != nil {
		return 0, false
	}
	n, ok := x.(json.Number)
	if !ok {
		return 0, false
	}
	f, err := n.Float64()
	if err != nil || f != math.Trunc(f) || f < math.MinInt32 || f > math.MaxInt32 {
		return 0, false
	}
	return int(f), true
}

// check applies the bounds to s: the fields out of range are reported and
// left out of the returned settings, which the environment then fills.
func (b Bounds) Check(s Stored) (Stored, []FieldError) {
	var errs []FieldError
	ms := func(d time.Duration) int64 { return d.Milliseconds() }
	if s.LockTTL != nil && (*s.LockTTL < int(ms(b.MinLockTTL)) || *s.LockTTL > int(ms(b.MaxLockTTL))) {
		errs = append(errs, fieldError(fieldTTL, jsonOf(*s.LockTTL), "must be from %d to %d ms, got %d",
			ms(b.MinLockTTL), ms(b.MaxLockTTL), *s.LockTTL))
		s.LockTTL = nil
	}
	if s.RetryInterval != nil && (*s.RetryInterval < int(ms(b.MinRetryWait)) || *s.RetryInterval > int(ms(b.MaxRetryWait))) {
		errs = append(errs, fieldError(fieldInterval, jsonOf(*s.RetryInterval), "must be from %d to %d ms, got %d",
			ms(b.MinRetryWait), ms(b.MaxRetryWait), *s.RetryInterval))
		s.RetryInterval = nil
	}
	if s.NoOfRetryAttempts != nil && (*s.NoOfRetryAttempts < 0 || *s.NoOfRetryAttempts > b.MaxRetries) {
		errs = append(errs, fieldError(fieldAttempts, jsonOf(*s.NoOfRetryAttempts), "must be from 0 to %d, got %d",
			b.MaxRetries, *s.NoOfRetryAttempts))
		s.NoOfRetryAttempts = nil
	}
	if s.RetryIntervalsMs != nil {
		waits := *s.RetryIntervalsMs
		if len(waits) > b.MaxRetries {
			errs = append(errs, fieldError(fieldIntervals, jsonOf(waits), "may hold at most %d waits, got %d", b.MaxRetries, len(waits)))
			s.RetryIntervalsMs = nil
		} else {
			for _, w := range waits {
				if w < int(ms(b.MinRetryWait)) || w > int(ms(b.MaxRetryWait)) {
					errs = append(errs, fieldError(fieldIntervals, jsonOf(waits), "waits must be from %d to %d ms, got %d",
						ms(b.MinRetryWait), ms(b.MaxRetryWait), w))
					s.RetryIntervalsMs = nil
					break
				}
			}
		}
	}
	// The retry schedule as a whole, in each of its forms: the per-retry
	// list, which this service follows, and FOLIO's pair, which FOLIO's
	// modules reading the same entry follow whether a list is there or
	// not. A form too long is dropped.
	tooLong := func(sum time.Duration, field string, v any) {
		errs = append(errs, fieldError(field, jsonOf(v), "makes the retry waits add up to %d ms, more than the %d ms a check-out may wait",
			sum.Milliseconds(), b.MaxTotalWait.Milliseconds()))
	}
	if s.RetryIntervalsMs != nil {
		if sum := Total(s.RetryIntervals()); sum > b.MaxTotalWait {
			tooLong(sum, fieldIntervals, *s.RetryIntervalsMs)
			s.RetryIntervalsMs = nil
		}
	}
	pair := Stored{NoOfRetryAttempts: s.NoOfRetryAttempts, RetryInterval: s.RetryInterval}
	if sum := Total(pair.RetryIntervals()); sum > b.MaxTotalWait {
		if s.NoOfRetryAttempts != nil {
			tooLong(sum, fieldAttempts, *s.NoOfRetryAttempts)
		}
		if s.RetryInterval != nil {
			tooLong(sum, fieldInterval, *s.RetryInterval)
		}
		s.NoOfRetryAttempts, s.RetryInterval = nil, nil
	}
	return s, errs
}

func jsonOf(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// FOLIO's values for the retries of a stored entry that names a retry
// interval or a number of attempts and not both (mod-circulation's
// CheckoutLockConfiguration): 30 retries 250 ms apart.
const (
	DefaultNoOfRetryAttempts = 30
	DefaultRetryIntervalMs   = 250
)

// The check-out lock's defaults where neither a tenant's settings nor the
// environment say otherwise, written once: circulation's LOCK_TTL_MS and
// RETRY_INTERVAL_MS and storage's LOCK_DEFAULT_TTL_MS default to them
// (package config), and the module descriptors' launch environments name
// them (schemas.Descriptor); config's TestTheLockDefaultsAreOne ties
// them. A lock lives 3 s, and a held one is waited for up to 2 s, in
// three retries.
const (
	DefaultTTLMs            = 3000
	DefaultRetryIntervalsMs = "500|500|1000"
)

func ClearField(s *Stored, name string) {
	switch name {
	case fieldEnabled:
		s.CheckOutLockFeatureEnabled = nil
	case fieldAttempts:
		s.NoOfRetryAttempts = nil
	case fieldInterval:
		s.RetryInterval = nil
	case fieldTTL:
		s.LockTTL = nil
	case fieldIntervals:
		s.RetryIntervalsMs = nil
	}
}

// unwrapString is the JSON a string value holds, when it holds JSON, and
// raw itself otherwise.
func Unwrap(raw json.RawMessage) json.RawMessage {
	var text string
	if json.Unmarshal(raw, &text) == nil && json.Valid([]byte(text)) {
		return json.RawMessage(text)
	}
	return raw
}

// storedValue is the settings entry's value for s as FOLIO stores it: a
// JSON string holding the object, which mod-circulation parses.
func Value(s Stored) (json.RawMessage, error) {
	object, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	return json.Marshal(string(object))
}

// RetryIntervals are the waits the stored value gives: retryIntervalsMs
// when set, else noOfRetryAttempts waits of retryInterval, a missing half
// taking FOLIO's default.
func (s Stored) RetryIntervals() []time.Duration {
	if s.RetryIntervalsMs != nil {
		out := make([]time.Duration, len(*s.RetryIntervalsMs))
		for i, ms := range *s.RetryIntervalsMs {
			out[i] = time.Duration(ms) * time.Millisecond
		}
		return out
	}
	n, wait := DefaultNoOfRetryAttempts, DefaultRetryIntervalMs*time.Millisecond
	if s.NoOfRetryAttempts != nil {
		n = *s.NoOfRetryAttempts
	}
	if s.RetryInterval != nil {
		wait = time.Duration(*s.RetryInterval) * time.Millisecond
	}
	out := make([]time.Duration, max(n, 0))
	for i := range out {
		out[i] = wait
	}
	return out
}

// Validate reads a value to be stored strictly: every field of the wrong
// type and every value out of bounds is reported.
func (b Bounds) Validate(raw json.RawMessage) []FieldError {
	s, errs := Decode(raw)
	if len(errs) > 0 {
		return errs
	}
	_, errs = b.Check(s)
	return errs
}
