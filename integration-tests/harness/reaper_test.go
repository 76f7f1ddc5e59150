package harness

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestAPostgresOfAKilledTestIsStopped: a test process killed before its
// cleanup runs (as a hanging mutation's test run is) leaves no server of
// its own running, nor its directory. The test runs itself again as the
// test to kill, which starts a server, says its postmaster and directory,
// and waits to be killed.
func TestAPostgresOfAKilledTestIsStopped(t *testing.T) {
	if os.Getenv("HARNESS_KILLED_TEST") == "1" {
		p := StartPostgres(t)
		pid := postmasterPIDIn(p.data())
		if pid == 0 {
			t.Fatal("no postmaster.pid")
		}
		os.Stdout.WriteString("postmaster " + strconv.Itoa(pid) + " " + p.dir + "\n")
		// Killed here: the parent holds stdin open until it kills this
		// process (and if the parent goes first, the end of stdin ends
		// this process too, its server with it).
		_, _ = io.Copy(io.Discard, os.Stdin)
		t.Fatal("stdin closed before the kill")
	}
	if testing.Short() {
		t.Skip("starts a PostgreSQL server of its own")
	}
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run=^TestAPostgresOfAKilledTestIsStopped$", "-test.v", "-test.timeout=5m")
	cmd.Env = append(os.Environ(), "HARNESS_KILLED_TEST=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	hold, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Close()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var pid int
	var dir string
	lines := bufio.NewScanner(out)
	for pid == 0 && lines.Scan() {
		if rest, ok := strings.CutPrefix(lines.Text(), "postmaster "); ok {
			pidText, d, _ := strings.Cut(rest, " ")
			pid, _ = strconv.Atoi(pidText)
			dir = d
		}
	}
	if pid == 0 {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatal("the test to kill did not say its postmaster")
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped { // what a failed run leaves behind
			_ = syscall.Kill(pid, syscall.SIGKILL)
			_ = os.RemoveAll(dir)
		}
	})
	if !running(pid) {
		t.Fatalf("postmaster %d is not running before the kill", pid)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); !strings.Contains(fmt.Sprint(err), "killed") {
		t.Fatalf("the test to kill ended by itself (%v), not by the kill", err)
	}
	const within = 60 * time.Second
	deadline := time.Now().Add(within)
	for {
		alive := running(pid)
		_, statErr := os.Stat(dir)
		if !alive && errors.Is(statErr, os.ErrNotExist) {
			stopped = true
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s after the test's process was killed: postmaster %d running: %t, its directory %s there (%v)", within, pid, alive, dir, statErr)
		}
		time.Sleep(50 * time.Millisecond) // polling with a deadline
	}
}
