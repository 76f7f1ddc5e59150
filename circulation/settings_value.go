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
	// FromEnvironment is the environment's value (its variable, or the
	// service's default for it): a field the stored entry leaves out, or
	// holds as null, takes it.
	FromEnvironment Source = "environment"
	FromSettings    Source = "settings"
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
// holds stored, by one rule: each field the entry sets applies, and each
// it leaves out (or holds as null, or holds unusable) takes the
// environment's value. The waits may be stored in FOLIO's shape,
// noOfRetryAttempts waits of retryInterval ms; a missing half of that
// pair takes FOLIO's default for it (30 retries, 250 ms), there being no
// environment variable for either half alone.
func Resolve(env LockSettings, stored locksettings.Stored) LockSettings {
	out := env
	out.EnabledSource, out.LockTTLSource, out.RetrySource = FromEnvironment, FromEnvironment, FromEnvironment
	if stored.CheckOutLockFeatureEnabled != nil {
		out.Enabled, out.EnabledSource = *stored.CheckOutLockFeatureEnabled, FromSettings
	}
	if stored.LockTTL != nil {
		out.LockTTL, out.LockTTLSource = time.Duration(*stored.LockTTL)*time.Millisecond, FromSettings
	}
	if stored.RetryIntervalsMs != nil || stored.NoOfRetryAttempts != nil || stored.RetryInterval != nil {
		out.RetryIntervals, out.RetrySource = stored.RetryIntervals(), FromSettings
	}
	return out
}

// Environment returns the environment's settings: what a field the stored
// entry leaves out takes.
func (s *Settings) Environment() LockSettings { return s.environment() }

// environment is the environment's settings: circulation's lockTtl and
// waits, and storage's lock feature default (Storage.LockFeatureDefault).
func (s *Settings) environment() LockSettings {
	env := s.env
	env.Enabled = s.storage.LockFeatureDefault()
	return env
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
