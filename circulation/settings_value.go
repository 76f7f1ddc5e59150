package circulation

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"

	"github.com/checkoutlock/schemas/locksettings"
)

// Source says where an effective setting came from.
type Source string

// The sources of a setting.
const (
	FromEnvironment Source = "environment"
	FromSettings    Source = "settings"
	// FromDefault is FOLIO's default for a field the stored entry leaves
	// out (see Resolve).
	FromDefault Source = "default"
)

// LockSettings are the check-out lock settings in effect for a tenant.
type LockSettings struct {
	Enabled bool
	LockTTL time.Duration
	// RetryIntervals are the waits before each retry of a held lock: with
	// n intervals a check-out makes up to n+1 attempts.
	RetryIntervals []time.Duration
	// Sources names where each of the three came from.
	EnabledSource, LockTTLSource, RetrySource Source
	// SettingsError says why some or all of the stored settings are not in
	// effect, if so; the environment's values apply for those.
	SettingsError string
	// ChangedBy and ChangedAt are the stored settings' last change, when
	// known: the user (an id) and the time (RFC 3339).
	ChangedBy, ChangedAt string
}

// Resolve gives the settings in effect when a tenant's settings entry
// exists and holds stored. Fields the entry leaves out take FOLIO's
// defaults (DefaultNoOfRetryAttempts, DefaultRetryIntervalMs,
// DefaultLockTTLMs), as mod-circulation reading the same entry would,
// except the feature flag: an entry that does not say
// checkOutLockFeatureEnabled keeps the environment's (FOLIO reads it as
// false, and no field left out may switch the lock off). When no entry
// exists the environment's settings apply whole.
func Resolve(env LockSettings, stored locksettings.Stored) LockSettings {
	out := env
	out.EnabledSource = FromEnvironment
	if stored.CheckOutLockFeatureEnabled != nil {
		out.Enabled, out.EnabledSource = *stored.CheckOutLockFeatureEnabled, FromSettings
	}
	out.LockTTL, out.LockTTLSource = locksettings.DefaultLockTTLMs*time.Millisecond, FromDefault
	if stored.LockTTL != nil {
		out.LockTTL, out.LockTTLSource = time.Duration(*stored.LockTTL)*time.Millisecond, FromSettings
	}
	// The waits: the stored list, else FOLIO's shape, n retries each
	// after the same wait, a missing half taking FOLIO's default.
	out.RetryIntervals, out.RetrySource = stored.RetryIntervals(), FromDefault
	if stored.RetryIntervalsMs != nil || stored.NoOfRetryAttempts != nil || stored.RetryInterval != nil {
		out.RetrySource = FromSettings
	}
	return out
}

// Bounds returns the bounds runtime settings must keep to.
func (s *Settings) Bounds() locksettings.Bounds { return s.bounds }

// readStored decodes a stored value leniently: what is of the wrong type or
// out of bounds is left out and reported.
func (s *Settings) readStored(raw json.RawMessage) (locksettings.Stored, []locksettings.FieldError) {
	stored, errs := locksettings.Decode(raw)
	stored, rangeErrs := s.bounds.Check(stored)
	return stored, append(errs, rangeErrs...)
}

func joinFieldErrors(errs []locksettings.FieldError) string {
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.String()
	}
	return strings.Join(msgs, "; ")
}

// invalidSettings is the refusal of settings out of bounds, one entry per
// field.
func invalidSettings(fields []locksettings.FieldError) error {
	r := &errs.Refusal{}
	for _, e := range fields {
		err := errs.Errorf(errs.KindInvalid, schemas.CodeValidation, "%s", e.String())
		if e.Field != "" {
			err.With(e.Field, e.Value)
		}
		r.Errors = append(r.Errors, err)
	}
	return r
}
