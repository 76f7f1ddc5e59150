package postgres

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
