// Package selfcheck is a tenant's self-check settings as stored in its
// selfCheck settings entry: the value's shape and how it is read. Storage
// checks every write of the entry with Decode, and circulation reads the
// entry with it, so that a value one refuses the other never meets as
// anything but unreadable. The SIP2 door's listeners name their own PIN
// rule in the same words.
package selfcheck

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/checkoutlock/schemas/text"
)

// The settings entry that holds a tenant's self-check settings, beside the
// check-out lock's.
const (
	Scope = "mod-circulation"
	Key   = "selfCheck"
)

// The values of patronPin, a tenant's and a SIP2 listener's: whether a
// self-check machine acts for a patron only with the patron's PIN.
const (
	PinOff      = "off"
	PinRequired = "required"
)

// The values of offlineLending: whether the library takes the check-outs
// a self-check machine made while the library system could not answer.
const (
	OfflineOn  = "on"
	OfflineOff = "off"
)

// Settings is the value of the selfCheck entry (self-check-settings.json).
type Settings struct {
	// PatronPin is PinRequired when a self-check machine renews a
	// patron's loan only with the patron's PIN; PinOff (or absent) when
	// the card alone will do.
	PatronPin string `json:"patronPin,omitempty"`
	// OfflineLending is OfflineOn (or absent: libraries expect it) when
	// the library takes check-outs its self-check machines made offline,
	// OfflineOff when it does not: a kiosk is then told not to lend
	// offline (SIP2's offline ok), and one sent later is refused.
	OfflineLending string `json:"offlineLending,omitempty"`
}

// OfflineTaken says whether the settings take check-outs made offline.
func (s Settings) OfflineTaken() bool { return s.OfflineLending != OfflineOff }

// PinRequired says whether the settings require the patron's PIN.
func (s Settings) PinRequired() bool { return s.PatronPin == PinRequired }

// Defaults are the settings of a tenant without an entry: PINs off,
// offline lending on.
var Defaults = Settings{PatronPin: PinOff, OfflineLending: OfflineOn}

// Decode reads a stored value: a JSON object holding nothing but
// patronPin, "off" or "required" (absent: "off"), and offlineLending,
// "on" or "off" (absent: "on"). Anything else is an error naming the
// field (Field "" for the value as a whole): storage refuses to store it,
// and circulation, meeting it all the same, requires PINs and takes no
// check-out made offline.
func Decode(raw json.RawMessage) (Settings, *FieldError) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return Settings{}, &FieldError{Message: "the value is not a JSON object", Value: clip(raw)}
	}
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		if _, known := fieldValues[name]; !known {
			return Settings{}, &FieldError{Field: name, Message: "is not a self-check setting", Value: clip(fields[name])}
		}
	}
	s := Defaults
	for _, name := range slices.Sorted(maps.Keys(fieldValues)) {
		v, ok := fields[name]
		if !ok {
			continue
		}
		values := fieldValues[name]
		// A null unmarshals as "", which is no value.
		var got string
		if err := json.Unmarshal(v, &got); err != nil || !slices.Contains(values, got) {
			return Settings{}, &FieldError{Field: name, Message: fmt.Sprintf("is %q or %q", values[0], values[1]), Value: clip(v)}
		}
		switch name {
		case fieldPatronPin:
			s.PatronPin = got
		case fieldOfflineLending:
			s.OfflineLending = got
		}
	}
	return s, nil
}

// The fields, by their JSON names, and the values each takes.
const (
	fieldPatronPin      = "patronPin"
	fieldOfflineLending = "offlineLending"
)

var fieldValues = map[string][]string{
	fieldPatronPin:      {PinOff, PinRequired},
	fieldOfflineLending: {OfflineOn, OfflineOff},
}

// FieldError is a stored value that cannot be used, and why.
type FieldError struct {
	Field   string
	Message string
	// Value is the offending value as JSON, cut to 100 characters.
	Value string
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.Message
	}
	return e.Field + ": " + e.Message
}

func clip(v json.RawMessage) string { return text.Echoed(string(v)) }
