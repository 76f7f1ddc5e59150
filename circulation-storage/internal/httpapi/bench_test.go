package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
)

// BenchmarkLockCycle is one acquire and release over real HTTP against a
// real PostgreSQL, in parallel: the cost per cycle of the HTTP client and the
// service together (both run in this process), reported as cpu-µs/op, for
// profiling (go test -run X -bench LockCycle -cpuprofile cpu.out).
func BenchmarkLockCycle(b *testing.B) {
	f := setup(b)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	before := cpuTime(b)
	defer func() { b.ReportMetric(float64((cpuTime(b)-before).Microseconds())/float64(b.N), "cpu-µs/op") }()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req, _ := http.NewRequest("POST", f.url+"/check-out-lock-storage", strings.NewReader(`{"userId":"`+uuid.NewString()+`"}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set(TenantHeader, f.tenant)
			res, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			var l lockJSON
			if err := json.NewDecoder(res.Body).Decode(&l); err != nil || res.StatusCode != http.StatusCreated {
				b.Fatalf("acquire: %d %v", res.StatusCode, err)
			}
			res.Body.Close()
			req, _ = http.NewRequest("DELETE", f.url+"/check-out-lock-storage/"+l.ID, nil)
			req.Header.Set(TenantHeader, f.tenant)
			res, err = client.Do(req)
			if err != nil || res.StatusCode != http.StatusNoContent {
				b.Fatalf("release: %v", err)
			}
			res.Body.Close()
		}
	})
}

// cpuTime is the user and system CPU time this process has used.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
