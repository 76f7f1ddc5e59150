package integration

import (
	"net"
	"os/exec"
	"strings"
	"testing"
)

// TestMakeRunRefusesTakenPorts: with either port taken (a second make run,
// or another program), scripts/run.sh stops before starting anything, says
// which variable moves the port, and prints no banner.
func TestMakeRunRefusesTakenPorts(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	freeAddr := freeAddr(t)
	for _, c := range []struct{ storage, circulation, names string }{
		{taken.Addr().String(), freeAddr, "STORAGE_ADDR"},
		{freeAddr, taken.Addr().String(), "CIRCULATION_ADDR"},
	} {
		cmd := exec.Command("bash", "../scripts/run.sh")
		cmd.Env = append(cmd.Environ(), "STORAGE_ADDR="+c.storage, "CIRCULATION_ADDR="+c.circulation)
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
			t.Fatalf("run.sh with %s taken: %v\n%s", c.names, err, out)
		}
		got := string(out)
		if !strings.Contains(got, "is already in use") || !strings.Contains(got, "("+c.names+")") ||
			!strings.Contains(got, "CIRCULATION_ADDR=127.0.0.1:9080") || strings.Contains(got, "circulation-storage  http") {
			t.Errorf("run.sh with %s taken said:\n%s", c.names, got)
		}
	}
}
