// Command devtoken prints development tokens for jwt mode, signed with an
// HS256 secret: one per role (self-check, librarian, operator, tenant
// administrator), as shell exports. make run uses it; never use such
// tokens, or a secret on a developer's disk, in production.
//
//	devtoken -secret-file .run/jwt-secret -tenant diku
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/auth"
)

func main() {
	secretFile := flag.String("secret-file", "", "file holding the HS256 secret (AUTH_JWT_SECRET)")
	tenant := flag.String("tenant", "diku", "the tenant the tokens are for")
	ttl := flag.Duration("ttl", 7*24*time.Hour, "how long the tokens are valid")
	flag.Parse()
	secret, err := os.ReadFile(*secretFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "devtoken:", err)
		os.Exit(2)
	}
	roles := []struct{ name, role, user string }{
		{"SELF_CHECK_TOKEN", schemas.RoleSelfCheck, "5e1fc4ec-0000-4000-8000-000000000001"},
		{"LIBRARIAN_TOKEN", schemas.RoleLibrarian, "11b1a1a1-0000-4000-8000-000000000002"},
		{"OPERATOR_TOKEN", schemas.RoleOperator, "0be1a1a1-0000-4000-8000-000000000003"},
		{"ADMIN_TOKEN", schemas.RoleTenantAdmin, "ad111111-0000-4000-8000-000000000004"},
	}
	for _, r := range roles {
		claims, err := auth.RoleClaims(r.role, *tenant, r.user)
		if err != nil {
			fmt.Fprintln(os.Stderr, "devtoken:", err)
			os.Exit(1)
		}
		token, err := auth.Mint(strings.TrimSpace(string(secret)), claims, *ttl)
		if err != nil {
			fmt.Fprintln(os.Stderr, "devtoken:", err)
			os.Exit(1)
		}
		fmt.Printf("export %s=%s\n", r.name, token)
	}
}
