package serverkit

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
)

// TestClientsBelieveOnlyTrustedProxies: X-Forwarded-For and
// X-Forwarded-Proto speak for the client only from a trusted proxy; the
// client is the last address in the chain that is not itself trusted.
func TestClientsBelieveOnlyTrustedProxies(t *testing.T) {
	t.Parallel()
	c := NewClients([]netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.7/32")})
	for _, tc := range []struct {
		name, peer, xff, proto string
		tls                    bool
		address                string
		secure                 bool
	}{
		{"no proxy", "203.0.113.5:4000", "", "", false, "203.0.113.5", false},
		{"an untrusted peer's headers", "203.0.113.5:4000", "198.51.100.1", "https", false, "203.0.113.5", false},
		{"a trusted proxy naming its client", "10.1.2.3:4000", "198.51.100.1", "https", false, "198.51.100.1", true},
		{"a chain: the last untrusted address", "10.1.2.3:4000", "198.51.100.9, 198.51.100.1, 192.0.2.7", "http", false, "198.51.100.1", false},
		{"a trusted proxy naming nobody", "192.0.2.7:4000", "", "", false, "192.0.2.7", false},
		{"a garbled chain: the peer", "10.1.2.3:4000", "not-an-ip", "", false, "10.1.2.3", false},
		{"TLS of its own", "203.0.113.5:4000", "", "", true, "203.0.113.5", true},
		{"a loopback peer, not trusted here", "127.0.0.1:4000", "198.51.100.1", "https", false, "127.0.0.1", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.RemoteAddr = tc.peer
			if tc.xff != "" {
				r.Header.Set("X-Forwarded-For", tc.xff)
			}
			if tc.proto != "" {
				r.Header.Set("X-Forwarded-Proto", tc.proto)
			}
			if tc.tls {
				r.TLS = &tls.ConnectionState{}
			}
			if got := c.Address(r); got != tc.address {
				t.Errorf("Address = %q, want %q", got, tc.address)
			}
			if got := c.Secure(r); got != tc.secure {
				t.Errorf("Secure = %v, want %v", got, tc.secure)
			}
		})
	}
}
