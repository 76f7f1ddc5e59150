package lending

import (
	"context"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/checkoutlock/circulation-storage/internal/dbtest"
	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/circulation-storage/internal/sample"
	"github.com/google/uuid"

	storage "github.com/checkoutlock/circulation-storage"
)

// BenchmarkCheckOutWriteEvents is what recording its events costs a
// check-out's write in the database: the same write, committed, with the
// session's events off and on, on one connection, in turns (an op is one
// of each). It reports the server process's CPU per write each way and the
// difference (events-backend-µs/op), read from that process's CPU clock
// (the database on this machine): go test -run '^$' -bench
// CheckOutWriteEvents ./circulation-storage/internal/postgres.
func BenchmarkCheckOutWriteEvents(b *testing.B) {
	f := dbtest.SetupLibrary(b, sample.LoadData)
	lib := newLibrary(f.DB, testPolicy)
	ctx := storage.WithCaller(context.Background(), storage.Caller{User: "kiosk-1", Module: "circulation"})
	conn, err := f.DB.Pool.Acquire(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Release()
	var pid int
	if err := conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		b.Fatal(err)
	}
	user, item := sample.ID("1001"), sample.ID("book-061")
	version := 1
	// Write checks out the item with the session's events on or off, and
	// returns the server's CPU for the write; then puts the loan away with
	// the events off (the item stays at its next version).
	write := func(on bool) time.Duration {
		setting := "off"
		if on {
			setting = ""
		}
		if _, err := conn.Exec(ctx, `SELECT set_config('checkoutlock.outbox', $1, false)`, setting); err != nil {
			b.Fatal(err)
		}
		w := storage.CheckOutWrite{LoanID: uuid.NewString(), UserID: user, Loan: loanDoc(user, item), ItemVersion: version}
		batch, r := lib.checkOutBatch(ctx, f.Tenant, w, false, nil)
		c0 := backendCPU(pid)
		if err := conn.SendBatch(ctx, batch).Close(); err != nil {
			b.Fatal(err)
		}
		cpu := backendCPU(pid) - c0
		if r.Stored == nil {
			b.Fatalf("nothing written: %+v", r)
		}
		version++
		if _, err := conn.Exec(ctx, `SELECT set_config('checkoutlock.outbox', 'off', false)`); err != nil {
			b.Fatal(err)
		}
		if _, err := conn.Exec(ctx, postgres.WithTables(`DELETE FROM %s WHERE id = $1`, postgres.TableLoan), w.LoanID); err != nil {
			b.Fatal(err)
		}
		return cpu
	}
	// Warm up: the statement prepared and planned both ways.
	for i := range 20 {
		write(i%2 == 0)
	}
	var off, on time.Duration
	for i := 0; b.Loop(); i++ {
		// In turns, each first every other time.
		if i%2 == 0 {
			off += write(false)
			on += write(true)
		} else {
			on += write(true)
			off += write(false)
		}
	}
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 / float64(b.N) }
	b.ReportMetric(us(off), "off-backend-µs/op")
	b.ReportMetric(us(on), "on-backend-µs/op")
	b.ReportMetric(us(on-off), "events-backend-µs/op")
}

// backendCPU is a process's CPU time so far: its CPU clock
// (clock_getcpuclockid(3)'s, MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED) of
// the kernel's posix-timers.h), 0 where it cannot be read.
func backendCPU(pid int) time.Duration {
	clock := ^int32(pid)<<3 | 2
	var ts syscall.Timespec
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, uintptr(clock), uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		return 0
	}
	return time.Duration(ts.Nano())
}
