package harness

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// reapIfKilled runs the shell script, with args as $1, $2, …, if this test
// process ends before t's cleanups run: killed (a mutation's test run is
// killed whole when it hangs) or ended by go test's timeout, which runs no
// cleanup. It is for what a test starts that outlives the process: a
// server pg_ctl starts is in a session of its own, out of reach of the
// signal that ends the test's process group, and would run on. A watcher
// of its own (sh, in a session of its own, as cred when not nil) reads a
// pipe only this process holds: the end of the file, when the process is
// gone, runs the script; t's cleanup says "done" first and it exits.
func reapIfKilled(t testing.TB, cred *syscall.Credential, script string, args ...string) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sh", append([]string{"-c", `read -r word; [ "$word" = done ] && exit 0; ` + script, "reaper"}, args...)...)
	cmd.Stdin = r
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: cred}
	err = cmd.Start()
	r.Close()
	if err != nil {
		w.Close()
		t.Fatalf("start the watcher of what the test leaves running: %v", err)
	}
	t.Cleanup(func() {
		fmt.Fprintln(w, "done")
		w.Close()
		_ = cmd.Wait()
	})
}
