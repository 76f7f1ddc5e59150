package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/checkoutlock/schemas"
)

var secret = strings.Repeat("k", 32)

func claims(tenant string, perms ...string) Claims {
	return Claims{Tenant: tenant, UserID: "u-1", Permissions: perms}
}

func header(tenant, token string) http.Header {
	return http.Header{schemas.HeaderTenant: {tenant}, schemas.HeaderToken: {token}}
}

// TestAuthorizeOutcomes: what a jwt-mode route answers each kind of token.
func TestAuthorizeOutcomes(t *testing.T) {
	t.Parallel()
	v, err := NewVerifier(context.Background(), KeyConfig{Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	good, _ := Mint(secret, claims("diku", "p.get"), time.Hour)
	noPerm, _ := Mint(secret, claims("diku", "other"), time.Hour)
	expired, _ := Mint(secret, claims("diku", "p.get"), -time.Second)
	wrongKey, _ := Mint(strings.Repeat("x", 32), claims("diku", "p.get"), time.Hour)
	other, _ := Mint(secret, claims("other", "p.get"), time.Hour)
	hs384, _ := jwt.NewWithClaims(jwt.SigningMethodHS384, Claims{Tenant: "diku", Permissions: []string{"p.get"},
		RegisteredClaims: jwt.RegisteredClaims{ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))}}).SignedString([]byte(secret))
	noExp, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, claims("diku", "p.get")).SignedString([]byte(secret))
	enc := base64.RawURLEncoding.EncodeToString
	unsigned := enc([]byte(`{"alg":"none"}`)) + "." + enc([]byte(`{"tenant":"diku","permissions":["p.get"],"exp":9999999999}`)) + "."
	for _, c := range []struct {
		name   string
		h      http.Header
		status int
		code   string
	}{
		{"good", header("diku", good), 0, ""},
		{"bearer", http.Header{schemas.HeaderTenant: {"diku"}, "Authorization": {"Bearer " + good}}, 0, ""},
		{"no token", http.Header{schemas.HeaderTenant: {"diku"}}, 401, CodeAuthRequired},
		{"without the permission", header("diku", noPerm), 403, CodeForbidden},
		{"expired", header("diku", expired), 401, CodeInvalidToken},
		{"wrong key", header("diku", wrongKey), 401, CodeInvalidToken},
		{"another tenant's", header("diku", other), 401, CodeInvalidToken},
		{"another algorithm", header("diku", hs384), 401, CodeInvalidToken},
		{"no expiry", header("diku", noExp), 401, CodeInvalidToken},
		{"alg none", header("diku", unsigned), 401, CodeInvalidToken},
		{"garbage", header("diku", "x.y.z"), 401, CodeInvalidToken},
		// A page's sign-in cookie: only with the tenant header (which no
		// cross-site form can send) and from the same origin.
		{"cookie", http.Header{schemas.HeaderTenant: {"diku"}, "Cookie": {AccessCookie + "=" + good}}, 0, ""},
		{"cookie, same origin", http.Header{schemas.HeaderTenant: {"diku"}, "Sec-Fetch-Site": {"same-origin"},
			"Cookie": {"other=1; " + AccessCookie + "=" + good}}, 0, ""},
		{"cookie without the tenant header", http.Header{"Cookie": {AccessCookie + "=" + good}}, 401, CodeAuthRequired},
		{"cookie from another site", http.Header{schemas.HeaderTenant: {"diku"}, "Sec-Fetch-Site": {"cross-site"},
			"Cookie": {AccessCookie + "=" + good}}, 401, CodeAuthRequired},
		{"cookie from a sibling site", http.Header{schemas.HeaderTenant: {"diku"}, "Sec-Fetch-Site": {"same-site"},
			"Cookie": {AccessCookie + "=" + good}}, 401, CodeAuthRequired},
		{"an expired cookie", http.Header{schemas.HeaderTenant: {"diku"}, "Cookie": {AccessCookie + "=" + expired}}, 401, CodeInvalidToken},
		// A header's token speaks for the caller, whatever the cookie says.
		{"header over cookie", http.Header{schemas.HeaderTenant: {"diku"}, schemas.HeaderToken: {noPerm},
			"Cookie": {AccessCookie + "=" + good}}, 403, CodeForbidden},
		// A malformed tenant is the service's to refuse (400), not auth's.
		{"malformed tenant", header("Bad Tenant", good), 0, ""},
	} {
		_, err := v.Authorize(c.h, "p.get")
		f, isRefusal := failure(err)
		switch {
		case c.status == 0 && err != nil:
			t.Errorf("%s: %v, want accepted", c.name, err)
		case c.status != 0 && (!isRefusal || f.Status != c.status || f.Code != c.code):
			t.Errorf("%s: %v, want %d %s", c.name, err, c.status, c.code)
		}
	}
}

// TestPublicKeysAndJWKS: RS256 and ES256 tokens verify against a PEM file
// and against a JWKS URL, and an HS256 token signed with the public key
// (the old confusion attack) does not.
func TestPublicKeysAndJWKS(t *testing.T) {
	t.Parallel()
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writePEM := func(name string, key any) string {
		der, err := x509.MarshalPKIXPublicKey(key)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	sign := func(method jwt.SigningMethod, key any, kid string) string {
		tok := jwt.NewWithClaims(method, Claims{Tenant: "diku", Permissions: []string{"p.get"},
			RegisteredClaims: jwt.RegisteredClaims{ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))}})
		tok.Header["kid"] = kid
		s, err := tok.SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	rsaPEM, ecPEM := writePEM("rsa.pem", &rsaKey.PublicKey), writePEM("ec.pem", &ecKey.PublicKey)
	rsaToken, ecToken := sign(jwt.SigningMethodRS256, rsaKey, "r1"), sign(jwt.SigningMethodES256, ecKey, "e1")
	pemBytes, _ := os.ReadFile(rsaPEM)
	confused := sign(jwt.SigningMethodHS256, pemBytes, "r1")

	for _, c := range []struct {
		file, token string
		ok          bool
	}{{rsaPEM, rsaToken, true}, {ecPEM, ecToken, true}, {rsaPEM, ecToken, false}, {rsaPEM, confused, false}} {
		v, err := NewVerifier(context.Background(), KeyConfig{PublicKeyFile: c.file})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := v.Verify(c.token); (err == nil) != c.ok {
			t.Errorf("%s: %v, want ok %v", filepath.Base(c.file), err, c.ok)
		}
	}

	b64 := func(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }
	jwks, _ := json.Marshal(map[string]any{"keys": []map[string]string{{
		"kty": "RSA", "kid": "r1", "alg": "RS256", "use": "sig",
		"n": b64(rsaKey.N.Bytes()), "e": b64(big.NewInt(int64(rsaKey.E)).Bytes()),
	}}})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(jwks)
	}))
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	v, err := NewVerifier(ctx, KeyConfig{JWKSURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(rsaToken); err != nil {
		t.Errorf("RS256 token against the JWKS: %v", err)
	}
	if _, err := v.Verify(confused); err == nil {
		t.Error("an HS256 token accepted against the JWKS")
	}
}

// TestRolesHoldTheirPermissions: a role's token names the role and, once
// verified, holds exactly the role's permissions: every one of its set,
// none of another role's that it lacks. A token naming every role is small
// enough for a cookie.
func TestRolesHoldTheirPermissions(t *testing.T) {
	t.Parallel()
	v, err := NewVerifier(context.Background(), KeyConfig{Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	var every []string
	for _, s := range schemas.PermissionSets {
		every = append(every, s.Name)
		c, err := RoleClaims(s.Name, "diku", "u")
		if err != nil || len(c.Permissions) != 1 || c.Permissions[0] != s.Name || c.Tenant != "diku" {
			t.Fatalf("%s: %+v %v", s.Name, c, err)
		}
		token, err := Mint(secret, c, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		got, err := v.Verify(token)
		if err != nil {
			t.Fatal(err)
		}
		for _, other := range schemas.PermissionSets {
			for _, p := range other.Permissions {
				if want := slices.Contains(s.Permissions, p); got.Has(p) != want {
					t.Errorf("%s's token holds %s: %v, want %v", s.Name, p, got.Has(p), want)
				}
			}
		}
		if held := got.Held(); len(held) != len(s.Permissions)+1 || held[0] != s.Name {
			t.Errorf("%s's token's permissions expanded: %v", s.Name, held)
		}
	}
	all, _ := Mint(secret, claims("diku", every...), time.Hour)
	if len(all) > 1024 {
		t.Errorf("a token naming every role is %d bytes", len(all))
	}
	if _, err := RoleClaims("circulation.role.nobody", "diku", "u"); err == nil {
		t.Error("an unknown role was minted")
	}
}
