package storage

import (
	"strings"
	"testing"
)

func TestParseTenant(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		code string // empty: valid
	}{
		{"diku", ""},
		{"a", ""},
		{"t_1", ""},
		{"a" + strings.Repeat("b", 30), ""},
		{"", CodeTenantMissing},
		{"a" + strings.Repeat("b", 31), CodeInvalidTenant},
		{"x;drop table", CodeInvalidTenant},
		{`A"b`, CodeInvalidTenant},
		{"Diku", CodeInvalidTenant},
		{"1diku", CodeInvalidTenant},
		{"_diku", CodeInvalidTenant},
		{"diku-x", CodeInvalidTenant},
		{"dikü", CodeInvalidTenant},
		{strings.Repeat("a", 100), CodeInvalidTenant},
	}
	for _, tt := range tests {
		got, err := ParseTenant(tt.in)
		if tt.code == "" {
			if err != nil || string(got) != tt.in {
				t.Errorf("ParseTenant(%q) = %q, %v; want valid", tt.in, got, err)
			}
			continue
		}
		e, ok := AsError(err)
		if !ok || e.Code != tt.code || e.Kind != KindBadRequest {
			t.Errorf("ParseTenant(%q) error = %v, want %s", tt.in, err, tt.code)
		}
	}
	if got := Tenant("diku").Schema(); got != "diku_mod_circulation_storage" {
		t.Errorf("Schema() = %q", got)
	}
	if n := len(Tenant("a" + strings.Repeat("b", 30)).Schema()); n > 63 {
		t.Errorf("longest schema name is %d bytes, over PostgreSQL's 63", n)
	}
}
