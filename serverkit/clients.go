package serverkit

import (
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/checkoutlock/schemas"
)

// Clients says who a request's client is and how it connected, believing
// the forwarding headers only from the reverse proxies an operator trusts
// (TRUSTED_PROXIES): the client's address for counting failed sign-ins,
// and whether it reached the service over TLS for making cookies Secure.
// From any other peer X-Forwarded-For and X-Forwarded-Proto are ignored.
type Clients struct {
	trusted []netip.Prefix
	extract echo.IPExtractor
}

// NewClients trusts the proxies in the address blocks trusted, and no
// other (echo's extractor would otherwise trust every private and
// loopback address).
func NewClients(trusted []netip.Prefix) Clients {
	opts := []echo.TrustOption{echo.TrustLoopback(false), echo.TrustLinkLocal(false), echo.TrustPrivateNet(false)}
	for _, p := range trusted {
		opts = append(opts, echo.TrustIPRange(&net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}))
	}
	return Clients{trusted: trusted, extract: echo.ExtractIPFromXFFHeader(opts...)}
}

// Peer is the address of the request's connection.
func Peer(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// fromTrusted says whether the request's peer is a trusted proxy.
func (c Clients) fromTrusted(r *http.Request) bool {
	addr, err := netip.ParseAddr(Peer(r))
	if err != nil {
		return false
	}
	addr = addr.Unmap()
	for _, p := range c.trusted {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// Address is the client's address: the peer's, or, when the peer is a
// trusted proxy, the last address in X-Forwarded-For that is not itself a
// trusted proxy.
func (c Clients) Address(r *http.Request) string {
	if !c.fromTrusted(r) {
		return Peer(r)
	}
	return c.extract(r)
}

// Kiosk is the self-check machine a trusted proxy (a SIP2 door) says the
// request is for (schemas.HeaderKiosk), cut to its bound; "" from any
// other peer, whatever it sends.
func (c Clients) Kiosk(r *http.Request) string {
	if !c.fromTrusted(r) {
		return ""
	}
	return schemas.KioskLocation(strings.TrimSpace(r.Header.Get(schemas.HeaderKiosk)))
}

// KioskNamed says whether a trusted proxy named the machine the request
// is for at all (schemas.HeaderKiosk sent, empty for a machine that gave
// no location code): false from any other peer, or when none was named.
func (c Clients) KioskNamed(r *http.Request) bool {
	_, sent := r.Header[http.CanonicalHeaderKey(schemas.HeaderKiosk)]
	return sent && c.fromTrusted(r)
}

// Secure says whether the client reached the service over TLS: the
// connection is TLS, or a trusted proxy says so (X-Forwarded-Proto:
// https).
func (c Clients) Secure(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	return c.fromTrusted(r) && strings.EqualFold(strings.TrimSpace(r.Header.Get(schemas.HeaderForwardedProto)), "https")
}
