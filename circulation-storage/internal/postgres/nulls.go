package postgres

import (
	"encoding/json"

	storage "github.com/checkoutlock/circulation-storage"
)

// Nullable is nil for "", so an absent filter is SQL NULL.
func Nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// Deref is *s, or "" for nil.
func Deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// HolderValue is a lock's holder as the statements take it: JSON (pgx
// passes bytes to a jsonb parameter as they are), or NULL when nothing is
// known.
func HolderValue(h storage.Holder) any {
	if h.IsZero() {
		return nil
	}
	b, _ := json.Marshal(h)
	return b
}
