package storage

import (
	"strings"
	"testing"

	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
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
		{"", schemas.CodeTenantMissing},
		{"a" + strings.Repeat("b", 31), schemas.CodeInvalidTenant},
		{"x;drop table", schemas.CodeInvalidTenant},
		{`A"b`, schemas.CodeInvalidTenant},
		{"Diku", schemas.CodeInvalidTenant},
		{"1diku", schemas.CodeInvalidTenant},
		{"_diku", schemas.CodeInvalidTenant},
		{"diku-x", schemas.CodeInvalidTenant},
		{"dikü", schemas.CodeInvalidTenant},
		{strings.Repeat("a", 100), schemas.CodeInvalidTenant},
	}
	for _, tt := range tests {
		got, err := ParseTenant(tt.in)
		if tt.code == "" {
			if err != nil || string(got) != tt.in {
				t.Errorf("ParseTenant(%q) = %q, %v; want valid", tt.in, got, err)
			}
			continue
		}
		e, ok := errs.As(err)
		if !ok || e.Code != tt.code || e.Kind != errs.KindBadRequest {
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
