package postgres

// nullable is nil for "", so an absent filter is SQL NULL.
func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// deref is *s, or "" for nil.
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
