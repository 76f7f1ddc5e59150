package harness

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"
)

// Postgres is a PostgreSQL server of a test's own, made with initdb in a
// temporary directory and run with pg_ctl on a free loopback port, so the
// test can crash it without touching anyone else's database. It is stopped
// and removed when the test ends, and when the test's process is killed
// before its cleanup runs (reapIfKilled).
type Postgres struct {
	t       testing.TB
	dir     string
	bin     string
	addr    string
	options string
	cred    *syscall.Credential
}

// StartPostgres makes and starts a server with the given settings
// ("name=value", passed as -c options).
func StartPostgres(t testing.TB, settings ...string) *Postgres {
	t.Helper()
	bin, err := postgresBinDir()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "checkout-lock-pg-*")
	if err != nil {
		t.Fatal(err)
	}
	p := &Postgres{t: t, dir: dir, bin: bin, addr: freeAddr(t)}
	p.cred = postgresOwner(t, dir)
	// pg_ctl starts the server in a session of its own: a test process
	// killed before its cleanup would leave it running. The watcher is
	// told "done" after the cleanup below has stopped the server (cleanups
	// run last registered first).
	reapIfKilled(t, p.cred, `"$1" -D "$2/data" stop -m immediate >/dev/null 2>&1; rm -rf "$2"`, filepath.Join(bin, "pg_ctl"), dir)
	t.Cleanup(func() {
		_ = p.pgctl("stop", "-m", "fast")
		os.RemoveAll(dir)
	})
	if out, err := p.command(filepath.Join(bin, "initdb"), "-D", p.data(), "-U", "postgres", "--auth=trust", "--no-sync").
		CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	_, port, _ := strings.Cut(p.addr, ":")
	opts := []string{"-p " + port, "-k " + dir, "-c listen_addresses=127.0.0.1", "-c max_connections=200"}
	for _, s := range settings {
		opts = append(opts, "-c "+s)
	}
	p.options = strings.Join(opts, " ")
	p.Start()
	return p
}

func (p *Postgres) data() string { return filepath.Join(p.dir, "data") }

// postmasterPIDIn is the postmaster's process id in the data directory's
// postmaster.pid, 0 when there is none.
func postmasterPIDIn(data string) int {
	b, err := os.ReadFile(filepath.Join(data, "postmaster.pid"))
	if err != nil {
		return 0
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, _ := strconv.Atoi(strings.TrimSpace(first))
	// A standalone backend (postgres --single, as crash recovery and
	// pg_rewind run it) writes its pid negated.
	return max(pid, -pid)
}

func (p *Postgres) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Dir = p.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred}
	return cmd
}

func (p *Postgres) pgctl(args ...string) error {
	args = append([]string{"-D", p.data(), "-w", "-t", "60"}, args...)
	out, err := p.command(filepath.Join(p.bin, "pg_ctl"), args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("pg_ctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// Start starts the server (again, after Crash) and waits until it accepts
// connections.
func (p *Postgres) Start() {
	p.t.Helper()
	if err := p.pgctl("-l", filepath.Join(p.dir, "server.log"), "-o", p.options, "start"); err != nil {
		log, _ := os.ReadFile(filepath.Join(p.dir, "server.log"))
		p.t.Fatalf("%v\n%s", err, tail(log, 30))
	}
}

// Crash stops the server the way a power cut would, as far as the
// database can tell: every process ends at once, without a checkpoint and
// without flushing what was not yet flushed; the next start recovers from
// the WAL.
func (p *Postgres) Crash() {
	p.t.Helper()
	if err := p.pgctl("stop", "-m", "immediate"); err != nil {
		p.t.Fatal(err)
	}
}

// Restart stops the server as an operator's restart does (pg_ctl stop
// -m fast: every session ended, a checkpoint written) and starts it again,
// waiting until it accepts connections.
func (p *Postgres) Restart() {
	p.t.Helper()
	if err := p.pgctl("stop", "-m", "fast"); err != nil {
		p.t.Fatal(err)
	}
	p.Start()
}

// CreateDatabase creates database on the server and returns its URL.
func (p *Postgres) CreateDatabase(database string) string {
	p.t.Helper()
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, p.URL("postgres"))
	if err != nil {
		p.t.Fatal(err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{database}.Sanitize()); err != nil {
		p.t.Fatal(err)
	}
	return p.URL(database)
}

// URL is a connection string for database on the server.
func (p *Postgres) URL(database string) string {
	return "postgres://postgres@" + p.addr + "/" + database
}
