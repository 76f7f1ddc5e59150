package harness

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Process is one running service binary.
type Process struct {
	t       testing.TB
	Name    string
	bin     string
	env     []string
	Addr    string // host:port it listens on
	logPath string
	cmd     *exec.Cmd
	exited  chan struct{}
	// Client reaches it: over HTTPS, trusting its certificate's CA, for a
	// process started with StartBinaryTLS; nil for plain HTTP.
	Client *http.Client
}

// StartBinaryTLS is StartBinary for a process serving HTTPS (its
// TLS_CERT_FILE and TLS_KEY_FILE in env), whose certificate roots
// signed.
func StartBinaryTLS(t testing.TB, name, bin string, roots *x509.CertPool, env ...string) *Process {
	t.Helper()
	p := newProcess(t, freeAddr(t), name, bin, env...)
	p.Client = &http.Client{Timeout: 30 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}}
	p.Start()
	return p
}

// startProcess starts bin with env on a free port and waits until it answers
// /admin/health. It is stopped when the test ends; its log is printed if the
// test failed.
func startProcess(t testing.TB, name, bin string, env ...string) *Process {
	t.Helper()
	return startProcessAt(t, freeAddr(t), name, bin, env...)
}

// startProcessAt is startProcess on addr.
func startProcessAt(t testing.TB, addr, name, bin string, env ...string) *Process {
	t.Helper()
	p := newProcess(t, addr, name, bin, env...)
	p.Start()
	return p
}

// newProcess is a process of the test, not started yet: stopped when the
// test ends, its log printed if the test failed.
func newProcess(t testing.TB, addr, name, bin string, env ...string) *Process {
	t.Helper()
	p := &Process{t: t, Name: name, bin: bin, env: env, Addr: addr,
		logPath: logPath(t, name)}
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			if b, err := os.ReadFile(p.logPath); err == nil {
				t.Logf("---- log of %s ----\n%s", name, tail(b, 200))
			}
		}
	})
	return p
}

// Log is what the process has logged so far.
func (p *Process) Log() string {
	b, _ := os.ReadFile(p.logPath)
	return string(b)
}

// ProfileAddr is where the process serves Go's profiles, as it logged
// at start-up (PROFILE_ADDR set; "127.0.0.1:0" takes a free port); ""
// when it logged none.
func (p *Process) ProfileAddr() string {
	addr := ""
	for _, line := range strings.Split(p.Log(), "\n") {
		var l struct{ Msg, Addr string }
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "serving profiles" {
			addr = l.Addr
		}
	}
	return addr
}

// PID is the process id of the running process.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// URL is the process's base URL.
func (p *Process) URL() string {
	if p.Client != nil {
		return "https://" + p.Addr
	}
	return "http://" + p.Addr
}

// Start starts (or restarts) the process on its port.
func (p *Process) Start() {
	p.t.Helper()
	p.launch()
	p.waitHealthy()
}

// launch starts the process without waiting for it to answer.
func (p *Process) launch() {
	p.t.Helper()
	log, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		p.t.Fatal(err)
	}
	cmd := exec.Command(p.bin)
	cmd.SysProcAttr = diesWithTheTests()
	cmd.Env = append(os.Environ(), append([]string{"HTTP_ADDR=" + p.Addr}, p.env...)...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		p.t.Fatalf("start %s: %v", p.Name, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		log.Close()
		close(exited)
	}()
	p.cmd, p.exited = cmd, exited
}

// waitHealthy polls /admin/health until it answers 200, with a deadline.
func (p *Process) waitHealthy() {
	p.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.URL()+"/admin/health", nil)
		client := http.DefaultClient
		if p.Client != nil {
			client = p.Client
		}
		res, err := client.Do(req)
		cancel()
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-p.exited:
			b, _ := os.ReadFile(p.logPath)
			p.t.Fatalf("%s exited while starting:\n%s", p.Name, tail(b, 50))
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%s not healthy at %s after 15s", p.Name, p.URL())
		}
	}
}

// Stop sends SIGTERM and waits for a graceful exit (SIGKILL after 15 s).
func (p *Process) Stop() {
	if p.cmd == nil {
		return
	}
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	// A stopped process acts on SIGTERM only once it goes on.
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	select {
	case <-p.exited:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// WaitExit waits up to d for the process to end by itself, and says
// whether it did, with its exit code.
func (p *Process) WaitExit(d time.Duration) (code int, exited bool) {
	select {
	case <-p.exited:
		return p.cmd.ProcessState.ExitCode(), true
	case <-time.After(d):
		return 0, false
	}
}

// Freeze stops the process (SIGSTOP) as a paused VM, a hung process or a
// swap storm would: it keeps its sockets open and answers nothing until
// Thaw. The test's end thaws it, so that it can be stopped.
func (p *Process) Freeze() {
	p.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		p.t.Fatalf("freeze %s: %v", p.Name, err)
	}
	p.t.Cleanup(p.Thaw)
}

// Thaw lets a frozen process go on (SIGCONT).
func (p *Process) Thaw() { _ = p.cmd.Process.Signal(syscall.SIGCONT) }

// Frozen reports whether the process is stopped by a signal (by Freeze,
// or by itself).
func (p *Process) Frozen() bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.PID()))
	if err != nil {
		return false
	}
	// The state follows the command's name in parentheses.
	rest := stat[bytes.LastIndexByte(stat, ')')+1:]
	state := bytes.TrimSpace(rest)
	return len(state) > 0 && (state[0] == 'T' || state[0] == 't')
}

// Kill ends the process with SIGKILL: no cleanup, no lock released.
func (p *Process) Kill() {
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// Restart stops the process gracefully and starts it again on its port.
func (p *Process) Restart() {
	p.t.Helper()
	p.Stop()
	p.Start()
}

// FreeAddr is a loopback address whose port is free now.
func FreeAddr(t testing.TB) string { return freeAddr(t) }

func tail(b []byte, lines int) string {
	n := 0
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == '\n' {
			n++
			if n > lines {
				return string(b[i+1:])
			}
		}
	}
	return string(b)
}

func envState() Env {
	if env.BinDir == "" {
		panic("harness: call harness.Main from TestMain")
	}
	return env
}

// diesWithTheTests makes a process the tests start end when the test
// binary does, however it ends: a test binary killed by go test's timeout
// runs no cleanup, and its services would run on.
func diesWithTheTests() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
