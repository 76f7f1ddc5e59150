//go:build unix

package postgres

import (
	"net"
	"syscall"

	"github.com/jackc/pgx/v5"
)

// closedByServer reports, without a round trip and without waiting,
// whether an idle connection was closed by the server: the server has
// sent something (the FATAL message of a terminated session) or the end of
// the stream. An idle connection of this package's pools receives nothing
// otherwise (they LISTEN to nothing). It peeks at the socket (MSG_PEEK,
// MSG_DONTWAIT): one system call, nothing consumed.
func closedByServer(c *pgx.Conn) bool {
	nc := c.PgConn().Conn()
	if t, ok := nc.(interface{ NetConn() net.Conn }); ok { // TLS
		nc = t.NetConn()
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	closed := false
	// Control, not Read: Read would wait for the socket's read lock, which
	// pgx's background reader may hold while it blocks on the socket.
	_ = raw.Control(func(fd uintptr) {
		var b [1]byte
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		closed = n > 0 || (n == 0 && err == nil)
	})
	return closed
}
