package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"github.com/checkoutlock/schemas/errs"
	"github.com/checkoutlock/schemas/errs/errhttp"
	"net/http"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/checkoutlock/schemas"
)

// moduleVerifier is a verifier of users' tokens (the shared secret) that
// trusts module "circulation" with key's public half for declared.
func moduleVerifier(t *testing.T, key *ecdsa.PrivateKey, declared ...string) *Verifier {
	t.Helper()
	v, err := NewVerifier(context.Background(), KeyConfig{Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	v.TrustModules("circulation-storage", []TrustedModule{{Name: "circulation", Key: &key.PublicKey, Permissions: declared}})
	return v
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestModuleTokens: what a service trusting circulation's key answers
// each kind of module token, and user tokens passing as one.
func TestModuleTokens(t *testing.T) {
	t.Parallel()
	key, stranger := newKey(t), newKey(t)
	v := moduleVerifier(t, key, "p.get", "q.get")
	signer, err := NewModuleSignerKey("circulation", "circulation-storage", key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	good, _ := signer.Token("diku", "u-1", "GET /x", []string{"p.get"})
	beyond, _ := signer.Token("diku", "u-1", "GET /y", []string{"p.get", "admin.everything"})
	other, _ := signer.Token("other", "u-1", "GET /x", []string{"p.get"})
	// A role the module was even told it may hold is not a module's.
	roleV := moduleVerifier(t, key, "p.get", schemas.RoleTenantAdmin)
	role, _ := signer.Token("diku", "u-1", "GET /z", []string{"p.get", schemas.RoleTenantAdmin})
	if _, err := roleV.Authorize(header("diku", role), "p.get"); err == nil {
		t.Error("a module token naming a role was accepted")
	}
	craft := func(k any, method jwt.SigningMethod, iss, aud string, iat, exp time.Time) string {
		tok, err := jwt.NewWithClaims(method, Claims{Tenant: "diku", Permissions: []string{"p.get"}, RegisteredClaims: jwt.RegisteredClaims{
			Issuer: iss, Audience: jwt.ClaimStrings{aud}, IssuedAt: jwt.NewNumericDate(iat), ExpiresAt: jwt.NewNumericDate(exp)}}).SignedString(k)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	now := time.Now()
	for _, c := range []struct {
		name   string
		token  string
		status int
	}{
		{"good", good, 0},
		{"holding an undeclared permission", beyond, http.StatusForbidden},
		{"for another tenant", other, http.StatusUnauthorized},
		{"expired", craft(key, jwt.SigningMethodES256, "circulation", "circulation-storage", now.Add(-time.Hour), now.Add(-time.Minute)), http.StatusUnauthorized},
		{"living too long", craft(key, jwt.SigningMethodES256, "circulation", "circulation-storage", now, now.Add(time.Hour)), http.StatusUnauthorized},
		{"without iat", craft(key, jwt.SigningMethodES256, "circulation", "circulation-storage", time.Time{}, now.Add(time.Minute)), http.StatusUnauthorized},
		{"addressed elsewhere", craft(key, jwt.SigningMethodES256, "circulation", "mod-users", now, now.Add(time.Minute)), http.StatusUnauthorized},
		{"signed by an untrusted key", craft(stranger, jwt.SigningMethodES256, "circulation", "circulation-storage", now, now.Add(time.Minute)), http.StatusUnauthorized},
		{"a user's token naming the module as issuer", craft([]byte(secret), jwt.SigningMethodHS256, "circulation", "circulation-storage", now, now.Add(time.Minute)),
			http.StatusUnauthorized},
		{"a module-signed token naming no module", craft(key, jwt.SigningMethodES256, "", "circulation-storage", now, now.Add(time.Minute)), http.StatusUnauthorized},
	} {
		claims, err := v.Authorize(header("diku", c.token), "p.get")
		if c.status == 0 {
			if err != nil || claims.Module != "circulation" || claims.Caller() != "u-1" {
				t.Errorf("%s: %+v %v, want accepted as circulation acting for u-1", c.name, claims, err)
			}
			continue
		}
		f, ok := failure(err)
		if !ok || f.Status != c.status {
			t.Errorf("%s: %v, want %d", c.name, err, c.status)
		}
	}
}

// TestModuleSignerReusesTokens: a token is reused for its handler, user
// and tenant while it has half its life left, and never shared between
// them.
func TestModuleSignerReusesTokens(t *testing.T) {
	t.Parallel()
	signer, err := NewModuleSignerKey("circulation", "circulation-storage", newKey(t), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := signer.Token("diku", "u-1", "GET /x", []string{"p"})
	b, _ := signer.Token("diku", "u-1", "GET /x", []string{"p"})
	c, _ := signer.Token("diku", "u-2", "GET /x", []string{"p"})
	d, _ := signer.Token("diku", "u-1", "GET /y", []string{"p", "q"})
	if a != b || a == c || a == d || c == d {
		t.Errorf("tokens reused wrongly: same call %v, other user %v, other handler %v", a == b, a == c, a == d)
	}
	if _, err := NewModuleSignerKey("circulation", "circulation-storage", newKey(t), time.Hour); err == nil {
		t.Error("a signer of hour-long tokens was made")
	}
}

// TestTwoTokensAreRefused: X-Okapi-Token and Authorization carrying
// different tokens: 401, whichever is good; the same token twice is fine.
func TestTwoTokensAreRefused(t *testing.T) {
	t.Parallel()
	v, err := NewVerifier(context.Background(), KeyConfig{Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	good, _ := Mint(secret, claims("diku", "p.get"), time.Hour)
	other, _ := Mint(secret, claims("diku", "p.get", "more"), time.Hour)
	h := header("diku", good)
	h.Set("Authorization", "Bearer "+good)
	if _, err := v.Authorize(h, "p.get"); err != nil {
		t.Errorf("the same token twice: %v", err)
	}
	h.Set("Authorization", "Bearer "+other)
	if f, ok := err2Failure(v.Authorize(h, "p.get")); !ok || f.Status != http.StatusUnauthorized || f.Code != CodeInvalidToken {
		t.Errorf("two different tokens: %+v, want 401 INVALID_TOKEN", f)
	}
}

func err2Failure(_ *Claims, err error) (refusal, bool) {
	return failure(err)
}

// refusal is how a refused request is answered: its status and code.
type refusal struct {
	Status int
	Code   string
}

// failure is err's status and code, when err is a refusal (an
// *errs.Error).
func failure(err error) (refusal, bool) {
	e, ok := errs.As(err)
	if !ok {
		return refusal{}, false
	}
	return refusal{Status: errhttp.Status(e.Kind), Code: e.Code}, true
}
