package harness

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// Ports for the processes a test starts come from below the kernel's
// ephemeral range. A port found free by listening on port 0 comes from
// that range, and between its release and the moment a process binds it
// (or binds it again, when a test restarts a node) any outgoing
// connection on the machine may take it as its local port: Patroni's
// REST API then dies with "Address already in use". Below the range no
// outgoing connection is ever given one.
//
// Each port is reserved for the life of the test that asked for it, in
// this process by a set and across processes (go test runs packages side
// by side) by an flock on a file named after it.
var ports = struct {
	sync.Mutex
	held map[int]*os.File
}{held: map[int]*os.File{}}

const (
	portsFloor = 20000 // the lowest port handed out
	portsDir   = "checkout-lock-ports"
)

// freeAddr is a loopback address whose port is free now, reserved for
// this test, and outside the ephemeral range.
func freeAddr(t testing.TB) string {
	t.Helper()
	lo, hi := portsFloor, ephemeralFloor()
	if hi-lo < 1000 { // no room below the range: let the kernel choose
		return kernelAddr(t)
	}
	dir := filepath.Join(os.TempDir(), portsDir)
	if err := os.MkdirAll(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	ports.Lock()
	defer ports.Unlock()
	for range 200 {
		port := lo + rand.IntN(hi-lo)
		if ports.held[port] != nil {
			continue
		}
		f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o666)
		if err != nil {
			t.Fatal(err)
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
			f.Close() // another test process holds it
			continue
		}
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			f.Close() // something outside the tests listens there
			continue
		}
		ln.Close()
		ports.held[port] = f
		t.Cleanup(func() {
			ports.Lock()
			defer ports.Unlock()
			delete(ports.held, port)
			f.Close()
		})
		return addr
	}
	t.Fatalf("no free port found in [%d, %d)", lo, hi)
	return ""
}

// ephemeralFloor is the first port of the kernel's ephemeral range.
func ephemeralFloor() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768 // Linux's default
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	n, err := strconv.Atoi(f[0])
	if err != nil {
		return 32768
	}
	return n
}

func kernelAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
