package postgres

import (
	"encoding/json"

	"github.com/checkoutlock/schemas/locksettings"
)

// LockFeature is what a settings entry (doc) says of the check-out lock
// feature, decoded by the one decoder both services use
// (locksettings.Decode): "on", "off" or "unset"; "" for an entry that is
// not the lock's. A value whose flag cannot be read says nothing.
func LockFeature(doc json.RawMessage) string {
	var e struct {
		Scope string          `json:"scope"`
		Key   string          `json:"key"`
		Value json.RawMessage `json:"value"`
	}
	if json.Unmarshal(doc, &e) != nil || e.Scope != locksettings.Scope || e.Key != locksettings.Key {
		return ""
	}
	stored, _ := locksettings.Decode(e.Value)
	switch {
	case stored.CheckOutLockFeatureEnabled == nil:
		return "unset"
	case *stored.CheckOutLockFeatureEnabled:
		return "on"
	}
	return "off"
}
