// Package harness runs the real products for end-to-end tests: it builds
// both binaries, creates a fresh PostgreSQL database, starts one
// circulation-storage and several circulation instances as OS processes on
// free ports, optionally behind fault-injecting TCP proxies, and stops
// everything when the test ends (also when it fails). Each process's log is
// kept in a file and printed when its test fails.
package harness

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/mod/modfile"

	"github.com/checkoutlock/serverkit/auth"
)

// Env is the test binary's shared state, set up once by Main.
type Env struct {
	// BinDir holds the freshly built binaries.
	BinDir string
	// DatabaseURL is a database created for this test run.
	DatabaseURL string
	// LogDir keeps the processes' logs.
	LogDir string
	// Secret signs the test run's tokens: every process runs in jwt mode
	// with it (AUTH_JWT_SECRET) unless a test asks for another mode.
	Secret string
	// ModuleKey and ModulePublicKey are circulation's module key pair for
	// the run (PEM files): circulation signs with the one
	// (AUTH_MODULE_KEY_FILE), storage trusts the other
	// (AUTH_TRUSTED_MODULES).
	ModuleKey, ModulePublicKey string
}

// Secret is the test run's token-signing secret.
func Secret() string { return envState().Secret }

// storageAuthEnv is the environment of a storage process in jwt mode
// with the run's secret, trusting circulation's module key; later entries
// of a test's own override it.
func storageAuthEnv() []string {
	e := envState()
	return []string{"AUTH_MODE=jwt", "AUTH_JWT_SECRET=" + e.Secret, "AUTH_TRUSTED_MODULES=circulation=" + e.ModulePublicKey}
}

// circulationAuthEnv is the environment of a circulation process in jwt
// mode with the run's secret and module key.
func circulationAuthEnv() []string {
	e := envState()
	return []string{"AUTH_MODE=jwt", "AUTH_JWT_SECRET=" + e.Secret, "AUTH_MODULE_KEY_FILE=" + e.ModuleKey}
}

// ModulePublicKey is the public half of circulation's module key for the
// run, which storage trusts.
func ModulePublicKey() string { return envState().ModulePublicKey }

// ModuleKey is circulation's module key for the run (a PEM file).
func ModuleKey() string { return envState().ModuleKey }

// writeModuleKeys makes a P-256 key pair in dir: the private key and its
// public half, as PEM files.
func writeModuleKeys(dir string) (private, public string, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return "", "", err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return "", "", err
	}
	private, public = filepath.Join(dir, "module-key.pem"), filepath.Join(dir, "module-key.pub.pem")
	if err := os.WriteFile(private, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return "", "", err
	}
	return private, public, os.WriteFile(public, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644)
}

var env Env

// Main builds the binaries and creates the database, runs the tests, and
// drops the database. Call it from TestMain.
func Main(m *testing.M) int {
	dir, err := os.MkdirTemp("", "checkout-lock-it-*")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if keep := os.Getenv("KEEP_LOGS"); keep != "" {
		// The processes' logs outlive the run: KEEP_LOGS=<dir>.
		defer func() {
			if err := os.CopyFS(keep, os.DirFS(env.LogDir)); err != nil {
				fmt.Fprintln(os.Stderr, "keep logs:", err)
			}
		}()
	}
	env.BinDir = filepath.Join(dir, "bin")
	env.LogDir = filepath.Join(dir, "logs")
	if err := os.MkdirAll(env.LogDir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if prebuilt := os.Getenv(BinDirVariable); prebuilt != "" {
		// make test builds the binaries once for every package it runs.
		env.BinDir = prebuilt
	} else if err := Build(env.BinDir); err != nil {
		fmt.Fprintln(os.Stderr, "build binaries:", err)
		return 1
	}
	name := "circ_it_" + randomSuffix()
	admin := serverURL()
	if err := adminExec(admin, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		fmt.Fprintf(os.Stderr, "create database on %s: %v\n", admin, err)
		return 1
	}
	defer func() {
		if err := adminExec(admin, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			fmt.Fprintln(os.Stderr, "drop database:", err)
		}
	}()
	env.DatabaseURL = withDatabase(admin, name)
	env.Secret = randomSuffix() + randomSuffix() + randomSuffix()
	if env.ModuleKey, env.ModulePublicKey, err = writeModuleKeys(dir); err != nil {
		fmt.Fprintln(os.Stderr, "module keys:", err)
		return 1
	}
	return m.Run()
}

// DatabaseURL is the database created for this test run.
func DatabaseURL() string { return envState().DatabaseURL }

// FreshDatabase creates a database of its own for t, dropped when t ends,
// and returns its URL: for a cluster of another release, whose schema
// must not meet this one's.
func FreshDatabase(t testing.TB) string {
	t.Helper()
	name := "circ_it_" + randomSuffix()
	admin := serverURL()
	if err := adminExec(admin, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("create database: %v", err)
	}
	t.Cleanup(func() {
		// FORCE ends the sessions there are; one a process still opening
		// as it stops makes the drop fail (55006): tried again, for a while.
		var err error
		Poll(10*time.Second, 100*time.Millisecond, func() bool {
			err = adminExec(admin, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
			return err == nil || !strings.Contains(err.Error(), "55006")
		})
		if err != nil {
			t.Errorf("drop database: %v", err)
		}
	})
	return withDatabase(admin, name)
}

// serverURL is the PostgreSQL server to use: TEST_DATABASE_URL's server, or
// the local one.
func serverURL() string {
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		return u
	}
	// Loopback: TLS would only cost CPU on both sides.
	return "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
}

func withDatabase(server, name string) string {
	u, err := url.Parse(server)
	if err != nil {
		panic(err)
	}
	u.Path = "/" + name
	return u.String()
}

func adminExec(server, sql string) error {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, server)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

// BinDirVariable names a directory holding the binaries build makes, built
// beforehand (make test builds them once for every package it runs, and
// the mutation checks once per mutation); unset, Main builds them itself.
const BinDirVariable = "CHECKOUT_LOCK_BIN_DIR"

// Binaries are the packages of the commands the tests run, each built to
// its base name.
var Binaries = []string{"circulation-storage/cmd/circulation-storage", "circulation/cmd/circulation", "serverkit/cmd/devtoken", "sip2/cmd/sip2", "circulation-storage/cmd/events"}

// NATSServerModule is the directory of the module pinning the NATS server
// the tests and make run start (outside the workspace: its dependencies are
// the server's, not the services'), and NATSServerPackage its command.
const (
	NATSServerModule  = "nats"
	NATSServerPackage = "github.com/nats-io/nats-server/v2"
)

// PinnedNATSVersion is the NATS server release NATSServerModule's go.mod
// requires ("v2.15.3"): what Build builds and the tests and make run start.
func PinnedNATSVersion(t testing.TB) string {
	t.Helper()
	mod, err := os.ReadFile(filepath.Join(repoRoot(), NATSServerModule, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := modfile.ParseLax(NATSServerModule+"/go.mod", mod, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range f.Require {
		if r.Mod.Path == NATSServerPackage {
			return r.Mod.Version
		}
	}
	t.Fatalf("%s/go.mod requires no %s", NATSServerModule, NATSServerPackage)
	return ""
}

// Build compiles the Binaries into dir from the workspace this module
// belongs to, in one go build, and the NATS server of NATSServerModule
// beside them.
func Build(dir string) error {
	root := repoRoot()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = "/usr/local/go/bin/go"
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	args := []string{"build", "-o", dir + string(filepath.Separator)}
	for _, pkg := range Binaries {
		args = append(args, "./"+pkg)
	}
	cmd := exec.Command(goBin, args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %v\n%s", err, out)
	}
	if err := BuildNATSServer(dir); err != nil {
		return err
	}
	return BuildMailpit(dir)
}

// MailpitBinary is the SMTP server's name in a directory of binaries;
// MailpitModule the directory of the module pinning it, MailpitPackage
// its command.
const (
	MailpitBinary  = "mailpit"
	MailpitModule  = "mailpit"
	MailpitPackage = "github.com/axllent/mailpit"
)

// BuildMailpit builds the SMTP server MailpitModule pins into dir, as
// MailpitBinary.
func BuildMailpit(dir string) error {
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = "/usr/local/go/bin/go"
	}
	cmd := exec.Command(goBin, "build", "-o", filepath.Join(dir, MailpitBinary), MailpitPackage)
	cmd.Dir = filepath.Join(repoRoot(), MailpitModule)
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", MailpitPackage, err, out)
	}
	return nil
}

// NATSServerBinary is the NATS server's name in a directory of binaries.
const NATSServerBinary = "nats-server"

// BuildNATSServer builds the NATS server NATSServerModule pins into dir,
// as NATSServerBinary.
func BuildNATSServer(dir string) error {
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = "/usr/local/go/bin/go"
	}
	nats := exec.Command(goBin, "build", "-o", filepath.Join(dir, NATSServerBinary), NATSServerPackage)
	nats.Dir = filepath.Join(repoRoot(), NATSServerModule)
	nats.Env = append(os.Environ(), "GOWORK=off")
	if out, err := nats.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", NATSServerPackage, err, out)
	}
	return nil
}

// BinDir is where the binaries the tests run were built: the services and
// devtoken, as make build puts them into bin/.
func BinDir() string { return envState().BinDir }

// RepoRoot is the repository's top directory.
func RepoRoot() string { return repoRoot() }

// repoRoot is the repository's top directory: the one holding go.work,
// from the working directory up (a test runs in its package's directory).
// It is found from there, not from this file's name, because the tests
// are built with -trimpath (make test), which leaves no directory in it.
var repoRoot = sync.OnceValue(func() string {
	d, err := os.Getwd()
	if err != nil {
		panic(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(d, "go.work")); err == nil {
			return d
		}
		up := filepath.Dir(d)
		if up == d {
			panic("harness: no go.work in the working directory or above it: run from inside the repository")
		}
		d = up
	}
})

func randomSuffix() string {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// TenantID returns a tenant id no other test uses.
func TenantID() string { return "it" + randomSuffix() }

// schemaOf is the PostgreSQL schema of a tenant.
func schemaOf(tenant string) string { return tenant + "_mod_circulation_storage" }

// logs is every log file handed out in this run of the tests.
var logs struct {
	sync.Mutex
	taken map[string]bool
}

// logPath is the log file of a process named name in t, one no other
// process of the run writes: the test's name and the process's, and a
// number after them from the second of that name on (two doors of a
// test both named sip2, or a test run again with -count). A process
// restarted keeps its file, and appends to it.
func logPath(t testing.TB, name string) string {
	base := sanitizeName(t.Name()) + "-" + sanitizeName(name)
	logs.Lock()
	defer logs.Unlock()
	if logs.taken == nil {
		logs.taken = map[string]bool{}
	}
	file := base + ".log"
	for n := 2; logs.taken[file]; n++ {
		file = fmt.Sprintf("%s.%d.log", base, n)
	}
	logs.taken[file] = true
	return filepath.Join(envState().LogDir, file)
}

// sanitizeName turns a test name into a file name.
func sanitizeName(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, s)
}

// RoleUser is the user a role's token (Token) acts for: one per role.
func RoleUser(role string) string {
	return "aaaaaaaa-aaaa-4aaa-8aaa-" + fmt.Sprintf("%012d", len(role))
}

// Token is a token for tenant holding role (see schemas.PermissionSets),
// signed with the run's secret, valid for an hour.
func Token(t testing.TB, tenant, role string) string {
	t.Helper()
	claims, err := auth.RoleClaims(role, tenant, RoleUser(role))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := auth.Mint(envState().Secret, claims, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}
