package config

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/x509"
	_ "embed"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"
)

// The development keys published in this repository, for docker-compose:
// the HS256 secret in auth.env and circulation's module key pair in
// dev-keys/. Anyone who reads the repository holds them, so a service
// refuses to start with one unless AUTH_ALLOW_DEVELOPMENT_KEYS=true says
// the setup is a developer's, and then warns on /admin/health.
var (
	//go:embed auth.env
	authEnv []byte
	//go:embed dev-keys/circulation-module.pub.pem
	devModulePublicKey []byte
)

// publishedSecret is AUTH_JWT_SECRET as auth.env publishes it.
var publishedSecret = func() string {
	sc := bufio.NewScanner(bytes.NewReader(authEnv))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "AUTH_JWT_SECRET="); ok {
			return v
		}
	}
	panic("config: auth.env sets no AUTH_JWT_SECRET")
}()

// DevelopmentWarning is what /admin/health says while a published
// development key is in use.
const DevelopmentWarning = "a development key published in this repository is in use (AUTH_ALLOW_DEVELOPMENT_KEYS=true): " +
	"anyone can mint tokens this service accepts; never expose it"

// errDevelopmentKey is a published key used without saying so.
func errDevelopmentKey(variable string) error {
	return fmt.Errorf("%s is a development key published in this repository: anyone could mint tokens with it. "+
		"Set your own, or AUTH_ALLOW_DEVELOPMENT_KEYS=true for a development setup", variable)
}

// publicKeyOfFile reads a PEM file holding an EC public key, or a private
// key (whose public half is returned).
func publicKeyOfFile(file string) (*ecdsa.PublicKey, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	return publicKeyOfPEM(data)
}

// publicKeyOfPEM is the EC public key a PEM block holds, itself or as the
// public half of a private key.
func publicKeyOfPEM(data []byte) (*ecdsa.PublicKey, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("not a PEM file")
	}
	if k, err := x509.ParsePKIXPublicKey(block.Bytes); err == nil {
		if ec, ok := k.(*ecdsa.PublicKey); ok {
			return ec, nil
		}
	}
	if k, err := x509.ParsePKCS8PrivateKey(block.Bytes); err == nil {
		if ec, ok := k.(*ecdsa.PrivateKey); ok {
			return &ec.PublicKey, nil
		}
	}
	if k, err := x509.ParseECPrivateKey(block.Bytes); err == nil {
		return &k.PublicKey, nil
	}
	return nil, errors.New("not an EC key")
}

// isDevelopmentModuleKey reports whether file holds the published module
// key pair's public or private half.
func isDevelopmentModuleKey(file string) bool {
	k, err := publicKeyOfFile(file)
	if err != nil {
		return false
	}
	dev, err := publicKeyOfPEM(devModulePublicKey)
	return err == nil && k.Equal(dev)
}

// ModuleKey is a module and the file of its public key, as
// AUTH_TRUSTED_MODULES names them.
type ModuleKey struct{ Module, File string }

// ParseModuleKeys reads AUTH_TRUSTED_MODULES ("name=file[,name=file…]"),
// or says which part is not name=file.
func ParseModuleKeys(spec string) ([]ModuleKey, error) {
	var keys []ModuleKey
	for _, part := range strings.Split(spec, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, file, ok := strings.Cut(part, "=")
		if !ok || name == "" || file == "" {
			return nil, fmt.Errorf("AUTH_TRUSTED_MODULES: %q is not module=public-key-file", part)
		}
		keys = append(keys, ModuleKey{Module: name, File: file})
	}
	return keys, nil
}
