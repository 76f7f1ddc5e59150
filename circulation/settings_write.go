package circulation

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"

	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"

	"github.com/checkoutlock/schemas/locksettings"
)

// Put replaces a tenant's stored settings with stored, the whole document:
// fields it leaves out fall back to the environment. It answers the new
// effective settings, in effect here at once and on other instances within
// the cache period. Values out of bounds are refused, every one named, and
// nothing is written.
func (s *Settings) Put(ctx context.Context, stored locksettings.Stored) (LockSettings, error) {
	if _, errs := s.bounds.Check(stored); len(errs) > 0 {
		return LockSettings{}, invalidSettings(errs)
	}
	return s.write(ctx, "replace", func(locksettings.Stored, []locksettings.FieldError) (locksettings.Stored, error) {
		return stored, nil
	})
}

// Patch changes only the fields patch names, a JSON merge patch (RFC 7386)
// over the stored settings: a field set to null is removed, so the
// environment's value applies to it again. The result must keep to the
// bounds, or nothing is written. A field already stored that is invalid
// (written straight into the settings entry) must be named in the patch,
// with a value or null: a patch that leaves one as it is is refused, naming
// it, rather than drop it unseen.
func (s *Settings) Patch(ctx context.Context, patch json.RawMessage) (LockSettings, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(patch, &fields); err != nil || fields == nil {
		return LockSettings{}, invalidSettings([]locksettings.FieldError{{Message: "a patch must be a JSON object", Value: string(patch)}})
	}
	return s.write(ctx, "patch", func(cur locksettings.Stored, invalid []locksettings.FieldError) (locksettings.Stored, error) {
		next := cur
		var errs []locksettings.FieldError
		for _, e := range invalid {
			if _, named := fields[e.Field]; !named {
				e.Message = "the stored value is invalid (" + e.Message + "): set it, or set it to null, in this patch"
				errs = append(errs, e)
			}
		}
		for name, v := range fields {
			if bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
				locksettings.ClearField(&next, name)
				continue
			}
			locksettings.ClearField(&next, name)
			if err := locksettings.DecodeField(&next, name, v); err != nil {
				errs = append(errs, *err)
			}
		}
		if len(errs) == 0 {
			_, errs = s.bounds.Check(next)
		}
		if len(errs) > 0 {
			return locksettings.Stored{}, invalidSettings(errs)
		}
		return next, nil
	})
}

// maxWriteAttempts bounds the read-merge-write rounds of one change when
// other writers keep changing the entry in between.
const maxWriteAttempts = 3

// write reads the stored settings, builds the new ones from them, and
// writes them at the version read, again from the start if another write
// came first. The change is logged with who made it.
//
// build is given the stored settings' valid fields and what was invalid
// in the others.
func (s *Settings) write(ctx context.Context, op string, build func(cur locksettings.Stored, invalid []locksettings.FieldError) (locksettings.Stored, error)) (LockSettings, error) {
	for range maxWriteAttempts {
		entry, found, err := s.storage.Setting(ctx, locksettings.Scope, locksettings.Key)
		if err != nil {
			return LockSettings{}, err
		}
		var cur locksettings.Stored
		var invalid []locksettings.FieldError
		var prev *SettingEntry
		if found {
			cur, invalid = s.readStored(entry.Value)
			prev = &entry
		}
		next, err := build(cur, invalid)
		if err != nil {
			return LockSettings{}, err
		}
		raw, err := locksettings.Value(next)
		if err != nil {
			return LockSettings{}, err
		}
		start := s.writes.Add(1)
		err = s.storage.PutSetting(ctx, locksettings.Scope, locksettings.Key, raw, prev)
		if errs.IsKind(err, errs.KindConflict) || errs.IsCode(err, schemas.CodeAlreadyExists) {
			continue // someone else wrote first: read theirs and build again
		}
		if err != nil {
			return LockSettings{}, err
		}
		// What was just written is what applies: a fetch started before
		// the write must not bring the old value back.
		effective := Resolve(s.environment(), next)
		if user := OkapiFrom(ctx).UserID; user != "" {
			effective.ChangedBy, effective.ChangedAt = user, schemas.FormatTime(s.now())
		}
		tenant := OkapiFrom(ctx).Tenant
		s.flight.Forget(tenant)
		s.mu.Lock()
		s.cache.Add(tenant, cachedSettings{settings: effective, expires: s.now().Add(s.ttl), read: true, write: start})
		s.mu.Unlock()
		old := json.RawMessage("null")
		if found {
			old = locksettings.Unwrap(entry.Value)
		}
		s.logger.InfoContext(ctx, "check-out lock settings changed", slog.String("change", op),
			slog.String("user_id", OkapiFrom(ctx).UserID), slog.Any("old", old), slog.Any("new", locksettings.Unwrap(raw)))
		return effective, nil
	}
	return LockSettings{}, errs.Errorf(errs.KindConflict, schemas.CodeConflict, "The settings were changed by someone else meanwhile; try again")
}
