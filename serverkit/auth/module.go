package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/hashicorp/golang-lru/v2/expirable"

	"github.com/checkoutlock/schemas"
)

// Module identity: a service calls another as itself, FOLIO's
// modulePermissions in jwt mode. The calling module signs a short-lived
// token with a private key of its own (ES256); the called service trusts
// that module's public key, and accepts its tokens only for what the module
// declared (schemas.ModulePermissionsOf), for one tenant, addressed to
// itself, and for a short lifetime: a stolen module key mints no tenant
// administrator. The token names the user the module acts for (user_id),
// for audit only.

// MaxModuleTokenLifetime is the longest a module token may live (its exp
// after its iat); a longer one is refused.
const MaxModuleTokenLifetime = 5 * time.Minute

// ModuleSigner mints a module's tokens. Minted tokens are reused for half
// their lifetime: a self-check machine's scans, each a request, then cost
// one signature a minute instead of one each.
type ModuleSigner struct {
	module   string
	audience string
	key      *ecdsa.PrivateKey
	ttl      time.Duration
	now      func() time.Time
	minted   *expirable.LRU[string, string]
}

// mintedMax bounds the tokens a signer remembers (one per tenant, user and
// route in use).
const mintedMax = 10000

// NewModuleSigner returns the signer of module's tokens for audience (the
// service called), with the P-256 private key in the PEM file keyFile;
// tokens live ttl (10 s to MaxModuleTokenLifetime).
func NewModuleSigner(module, audience, keyFile string, ttl time.Duration) (*ModuleSigner, error) {
	pem, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("AUTH_MODULE_KEY_FILE: %w", err)
	}
	key, err := jwt.ParseECPrivateKeyFromPEM(pem)
	if err != nil || key.Curve != elliptic.P256() {
		return nil, fmt.Errorf("AUTH_MODULE_KEY_FILE %s: not a PEM P-256 (ES256) private key", keyFile)
	}
	return NewModuleSignerKey(module, audience, key, ttl)
}

// NewModuleSignerKey is NewModuleSigner with the key itself.
func NewModuleSignerKey(module, audience string, key *ecdsa.PrivateKey, ttl time.Duration) (*ModuleSigner, error) {
	if ttl < 10*time.Second || ttl > MaxModuleTokenLifetime {
		return nil, fmt.Errorf("a module token must live from 10s to %s, not %s", MaxModuleTokenLifetime, ttl)
	}
	return &ModuleSigner{module: module, audience: audience, key: key, ttl: ttl, now: time.Now,
		minted: expirable.NewLRU[string, string](mintedMax, nil, ttl/2)}, nil
}

// PublicKey is the key the called service must trust.
func (s *ModuleSigner) PublicKey() crypto.PublicKey { return &s.key.PublicKey }

// Token is a module token for tenant, acting for user (may be ""), holding
// permissions; route names the permission set (the calling handler's
// route), so that a token minted for one handler is reused for it alone.
func (s *ModuleSigner) Token(tenant, user, route string, permissions []string) (string, error) {
	key := tenant + "\x00" + user + "\x00" + route
	if t, ok := s.minted.Get(key); ok {
		return t, nil
	}
	now := s.now()
	c := Claims{Tenant: tenant, UserID: user, Permissions: permissions, RegisteredClaims: jwt.RegisteredClaims{
		Issuer: s.module, Subject: s.module, Audience: jwt.ClaimStrings{s.audience},
		IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(s.ttl)),
	}}
	t, err := jwt.NewWithClaims(jwt.SigningMethodES256, c).SignedString(s.key)
	if err != nil {
		return "", fmt.Errorf("sign module token: %w", err)
	}
	s.minted.Add(key, t)
	return t, nil
}

// TrustedModule is a module whose tokens a service accepts: its name (the
// tokens' issuer), its public key and what it declared it may do.
type TrustedModule struct {
	Name        string
	Key         crypto.PublicKey
	Permissions []string
}

// LoadTrustedModule reads module's P-256 public key from the PEM file,
// with permissions giving its declared permissions.
func LoadTrustedModule(module, file string, permissions func(module string) []string) (TrustedModule, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return TrustedModule{}, fmt.Errorf("AUTH_TRUSTED_MODULES: %w", err)
	}
	key, err := jwt.ParseECPublicKeyFromPEM(pem)
	if err != nil || key.Curve != elliptic.P256() {
		return TrustedModule{}, fmt.Errorf("AUTH_TRUSTED_MODULES: %s is not a PEM P-256 (ES256) public key", file)
	}
	perms := permissions(module)
	if len(perms) == 0 {
		return TrustedModule{}, fmt.Errorf("AUTH_TRUSTED_MODULES: module %q declares no module permissions", module)
	}
	return TrustedModule{Name: module, Key: key, Permissions: perms}, nil
}

// trusted is a TrustedModule as the verifier keeps it.
type trusted struct {
	key     crypto.PublicKey
	allowed map[string]struct{}
}

// moduleKeyfunc picks the key a token is verified with: a trusted module's
// when the token names it as its issuer (ES256 only), else the users' keys
// with their own algorithms. A user token cannot pass as a module's, nor
// the other way round: each verifies only with its own key.
func (v *Verifier) moduleKeyfunc(t *jwt.Token) (any, error) {
	c, _ := t.Claims.(*Claims)
	if c != nil {
		if m, ok := v.modules[c.Issuer]; ok {
			if t.Method.Alg() != jwt.SigningMethodES256.Alg() {
				return nil, fmt.Errorf("module token signed with %s, want ES256", t.Method.Alg())
			}
			return m.key, nil
		}
	}
	if !slices.Contains(v.userMethods, t.Method.Alg()) {
		return nil, fmt.Errorf("signing method %s is not accepted", t.Method.Alg())
	}
	return v.keyfunc(t)
}

// checkModule holds a verified module token to its module's promises:
// addressed to this service, within the lifetime a module token may have,
// for one tenant, and holding nothing its module did not declare.
func (v *Verifier) checkModule(c *Claims) error {
	m := v.modules[c.Issuer]
	if !slices.Contains(c.Audience, v.audience) {
		return fmt.Errorf("module token for audience %v, not %s", []string(c.Audience), v.audience)
	}
	if c.IssuedAt == nil || c.ExpiresAt == nil || c.ExpiresAt.Sub(c.IssuedAt.Time) > MaxModuleTokenLifetime {
		return fmt.Errorf("module token lives longer than %s", MaxModuleTokenLifetime)
	}
	if c.IssuedAt.After(time.Now().Add(time.Minute)) {
		return errors.New("module token issued in the future")
	}
	if c.Tenant == "" {
		return errors.New("module token names no tenant")
	}
	for _, p := range c.Permissions {
		// A role is never a module's: its token names permissions only.
		_, role := schemas.PermissionSetNamed(p)
		if _, ok := m.allowed[p]; !ok || role {
			return &undeclared{permission: p}
		}
	}
	c.Module = c.Issuer
	return nil
}

// undeclared is a module token holding a permission its module did not
// declare: refused with 403, naming it.
type undeclared struct{ permission string }

func (u *undeclared) Error() string {
	return "module token holds " + u.permission + ", which its module does not declare"
}
