package config

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPublishedDevelopmentKeysNeedSayingSo: each service refuses to start
// with a key this repository publishes (auth.env's secret, the module key
// pair in dev-keys/) unless AUTH_ALLOW_DEVELOPMENT_KEYS=true, and then
// warns; its own keys start without a warning.
func TestPublishedDevelopmentKeysNeedSayingSo(t *testing.T) {
	t.Parallel()
	own := strings.Repeat("o", 32)
	dir := t.TempDir()
	ownKey := writeOwnKey(t, dir)
	for _, c := range []struct {
		name    string
		env     map[string]string
		storage bool
		refused string
	}{
		{"storage with the published secret", map[string]string{"AUTH_JWT_SECRET": publishedSecret}, true, "AUTH_JWT_SECRET is a development key"},
		{"storage trusting the published module key", map[string]string{"AUTH_JWT_SECRET": own,
			"AUTH_TRUSTED_MODULES": "circulation=dev-keys/circulation-module.pub.pem"}, true, "AUTH_TRUSTED_MODULES (dev-keys/circulation-module.pub.pem) is a development key"},
		{"circulation with the published secret", map[string]string{"AUTH_JWT_SECRET": publishedSecret, "AUTH_MODULE_KEY_FILE": ownKey}, false,
			"AUTH_JWT_SECRET is a development key"},
		{"circulation signing with the published module key", map[string]string{"AUTH_JWT_SECRET": own,
			"AUTH_MODULE_KEY_FILE": "dev-keys/circulation-module.pem"}, false, "AUTH_MODULE_KEY_FILE is a development key"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			env := map[string]string{"AUTH_MODE": "jwt"}
			for k, v := range c.env {
				env[k] = v
			}
			load := func() ([]string, error) {
				if c.storage {
					cfg, err := LoadStorage(env)
					return cfg.Warnings(), err
				}
				cfg, err := LoadCirculation(env)
				return cfg.Warnings(), err
			}
			if _, err := load(); err == nil || !strings.Contains(err.Error(), c.refused) {
				t.Fatalf("without AUTH_ALLOW_DEVELOPMENT_KEYS: %v, want it refused saying %q", err, c.refused)
			}
			env["AUTH_ALLOW_DEVELOPMENT_KEYS"] = "true"
			warnings, err := load()
			if err != nil {
				t.Fatalf("with AUTH_ALLOW_DEVELOPMENT_KEYS=true: %v", err)
			}
			if len(warnings) != 1 || warnings[0] != DevelopmentWarning {
				t.Errorf("warnings %q, want the development warning", warnings)
			}
		})
	}
	c, err := LoadCirculation(map[string]string{"AUTH_MODE": "jwt", "AUTH_JWT_SECRET": own, "AUTH_MODULE_KEY_FILE": ownKey})
	if err != nil || len(c.Warnings()) != 0 {
		t.Errorf("own keys: %v, warnings %q; want neither", err, c.Warnings())
	}
}

// TestDevelopmentKeyPairIsAPair: the published private key's public half
// is the published public key, so docker-compose's two services agree.
func TestDevelopmentKeyPairIsAPair(t *testing.T) {
	t.Parallel()
	if !isDevelopmentModuleKey("dev-keys/circulation-module.pem") || !isDevelopmentModuleKey("dev-keys/circulation-module.pub.pem") {
		t.Error("dev-keys/ does not hold one key pair")
	}
}

// writeOwnKey writes a fresh P-256 private key into dir.
func writeOwnKey(t *testing.T, dir string) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "own.pem")
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}
