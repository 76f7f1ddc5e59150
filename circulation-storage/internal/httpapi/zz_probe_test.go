package httpapi

import (
	"fmt"
	"testing"
)

func TestZZProbe(t *testing.T) {
	f := setup(t)
	for _, b := range []string{
		`{"module_to":"mod\u0000x"}`,
		`{"module_to":"m","parameters":[{"key":"k","value":"a\u0000"}]}`,
		`{"module_to":"m","parameters":[{"key":"k\u0000","value":"a"}]}`,
		`{"module_from":"m\u0000"}`,
		`{"purge":false,"module_from":"m\u0000"}`,
		`{"module_to":"\ud800"}`,
	} {
		r := f.do("POST", "/_/tenant", b)
		fmt.Printf("%s -> %d %s\n", b, r.status, r.body)
	}
	for _, b := range []string{`{"userId":"6f1c9d2e-1b7a-4c1e-9a57-2f1e0c3b4a5d","ttlMs":1.0}`, `{"userId":"6f1c9d2e-1b7a-4c1e-9a57-2f1e0c3b4a5d","ttlMs":1e3}`, `{"userId":"6f1c9d2e-1b7a-4c1e-9a57-2f1e0c3b4a5d","ttlMs":1e30}`, `   `, `{"userId":"6f1c9d2e-1b7a-4c1e-9a57-2f1e0c3b4a5d"} x`} {
		r := f.do("POST", "/check-out-lock-storage", b)
		fmt.Printf("%s -> %d %s\n", b, r.status, r.body)
	}
	for _, p := range []string{"/check-out-lock-storage/%27%20OR%201=1", "/check-out-lock-storage/a%2Fb", "/check-out-lock-storage/%00", "/check-out-lock-storage/6f1c9d2e-1b7a-4c1e-9a57-2f1e0c3b4a5%64", "/check-out-lock-storage?limit=0", "/check-out-lock-storage?offset=2147483647"} {
		r := f.do("GET", p, "")
		fmt.Printf("GET %s -> %d %s\n", p, r.status, r.body)
	}
	for _, m := range []string{"PUT", "PATCH", "HEAD", "OPTIONS"} {
		r := f.do(m, "/check-out-lock-storage", "")
		fmt.Printf("%s -> %d %v %s\n", m, r.status, r.header, r.body)
	}
}
