// Command devtoken prints development tokens for jwt mode, signed with an
// HS256 secret: one per role (self-check, librarian, operator, tenant
// administrator), as shell exports, each with the id of the user it names
// (<ROLE>_USER_ID: make run's demo accounts take these ids, so the pages
// name whoever acts with a token). With -module-key it first makes
// circulation's module key pair, when the file does not exist yet: the
// private key (AUTH_MODULE_KEY_FILE) and its public half beside it, file
// name ending .pub.pem (AUTH_TRUSTED_MODULES). make run uses it; never use
// such tokens, or keys on a developer's disk, in production.
//
//	devtoken -secret-file .run/jwt-secret -tenant diku -module-key .run/module-key.pem
package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/serverkit/auth"
)

func main() {
	secretFile := flag.String("secret-file", "", "file holding the HS256 secret (AUTH_JWT_SECRET)")
	tenant := flag.String("tenant", "diku", "the tenant the tokens are for")
	ttl := flag.Duration("ttl", 7*24*time.Hour, "how long the tokens are valid")
	moduleKey := flag.String("module-key", "", "make circulation's module key pair here (and <name>.pub.pem) if missing")
	flag.Parse()
	if *moduleKey != "" {
		if err := ensureModuleKey(*moduleKey); err != nil {
			fmt.Fprintln(os.Stderr, "devtoken:", err)
			os.Exit(1)
		}
	}
	secret, err := os.ReadFile(*secretFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "devtoken:", err)
		os.Exit(2)
	}
	roles := []struct{ name, role, user string }{
		{"SELF_CHECK", schemas.RoleSelfCheck, "5e1fc4ec-0000-4000-8000-000000000001"},
		{"LIBRARIAN", schemas.RoleLibrarian, "11b1a1a1-0000-4000-8000-000000000002"},
		{"OPERATOR", schemas.RoleOperator, "0be1a1a1-0000-4000-8000-000000000003"},
		{"ADMIN", schemas.RoleTenantAdmin, "ad111111-0000-4000-8000-000000000004"},
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
		fmt.Printf("export %s_TOKEN=%s\nexport %s_USER_ID=%s\n", r.name, token, r.name, r.user)
	}
}

// ensureModuleKey writes a P-256 private key to file, and its public half
// to file's name with .pub.pem for .pem, unless file exists.
func ensureModuleKey(file string) error {
	if _, err := os.Stat(file); err == nil {
		return nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return err
	}
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return err
	}
	return os.WriteFile(strings.TrimSuffix(file, ".pem")+".pub.pem", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644)
}
