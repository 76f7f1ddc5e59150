package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/selfcheck"
	"github.com/checkoutlock/sip2/wire"
)

// Listener is one SIP2 front door: an address, the tenant whose kiosks it
// serves, and how it speaks.
type Listener struct {
	// Address is where it listens, host:port.
	Address string `json:"address"`
	// Tenant is the FOLIO tenant of every kiosk connecting here.
	Tenant string `json:"tenant"`
	// Institution is the AO the replies carry (the tenant's, by default).
	Institution string `json:"institution"`
	// ServicePointID is the service point check-outs and check-ins here
	// are made at.
	ServicePointID string `json:"servicePointId"`
	// Charset is IBM850 (the default, as edge-sip2), ISO-8859-1 or UTF-8.
	Charset wire.Charset `json:"charset"`
	// Delimiter is the field delimiter, "|" by default.
	Delimiter string `json:"delimiter"`
	// TimeZone names the zone of the dates in the replies (IANA, e.g.
	// "Europe/Berlin"); UTC by default.
	TimeZone string `json:"timeZone"`
	// Plain must be true for a listener without TLS: plain TCP is only
	// ever what the configuration says explicitly.
	Plain bool `json:"plain"`
	// TLS is the listener's certificate and key (PEM files) and, to ask
	// kiosks for client certificates, the CAs that sign them.
	TLS *TLSFiles `json:"tls,omitempty"`
	// ProxyProtocol reads a PROXY protocol (v1) header first, from a load
	// balancer in front: the kiosk's address is the one it names.
	ProxyProtocol bool `json:"proxyProtocol"`
	// PatronPin is "required" when a patron must give their PIN (AD) to
	// check out, renew and see their information here, "off" (the
	// default) when the card alone will do. It adds to the tenant's own
	// rule, never lifts it: where the tenant requires PINs (its selfCheck
	// settings entry), circulation refuses a kiosk's renewal without the
	// PIN at every listener.
	PatronPin string `json:"patronPin"`
	// PaymentMethods names, for each SIP2 payment type a kiosk may send
	// (00 cash, 01 VISA, 02 credit card), the library's payment method a
	// payment of it is recorded as (a payment method of the fee/fine's
	// owner, FOLIO's /payments); a type not named is refused. By default
	// 00 is "Cash", 01 and 02 "Credit card".
	PaymentMethods map[string]string `json:"paymentMethods"`

	location *time.Location
}

// DefaultPaymentMethods are a listener's payment methods when its
// configuration names none.
var DefaultPaymentMethods = map[string]string{"00": "Cash", "01": "Credit card", "02": "Credit card"}

// The listener's patronPin values, the tenant's words.
const (
	PinOff      = selfcheck.PinOff
	PinRequired = selfcheck.PinRequired
)

// TLSFiles are a listener's certificate files.
type TLSFiles struct {
	CertFile     string `json:"certFile"`
	KeyFile      string `json:"keyFile"`
	ClientCAFile string `json:"clientCaFile,omitempty"`
}

// Config is the SIP2 door's configuration file (SIP2_CONFIG).
type Config struct {
	Listeners []Listener `json:"listeners"`
}

// paymentTypePattern is a SIP2 payment type: two digits.
var paymentTypePattern = regexp.MustCompile(`^[0-9]{2}$`)

// delimiter is the listener's field delimiter byte.
func (l *Listener) delimiter() byte {
	if l.Delimiter == "" {
		return '|'
	}
	return l.Delimiter[0]
}

// LoadConfig reads and checks the configuration file.
func LoadConfig(path string) (Config, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("SIP2_CONFIG: %w", err)
	}
	return ParseConfig(raw)
}

// ParseConfig reads and checks a configuration: every listener names an
// address and a tenant, speaks a known character set with a one-character
// delimiter that is not a letter or digit, and is either TLS or plain by
// its own say-so.
func ParseConfig(raw []byte) (Config, error) {
	var c Config
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return Config{}, fmt.Errorf("SIP2_CONFIG: %w", err)
	}
	if len(c.Listeners) == 0 {
		return Config{}, errors.New("SIP2_CONFIG: no listeners")
	}
	var problems []error
	seen := map[string]bool{}
	for i := range c.Listeners {
		l := &c.Listeners[i]
		bad := func(format string, args ...any) {
			problems = append(problems, fmt.Errorf("SIP2_CONFIG: listener %d (%s): %s", i+1, l.Address, fmt.Sprintf(format, args...)))
		}
		if _, _, err := net.SplitHostPort(l.Address); err != nil {
			bad("address must be host:port")
		}
		if seen[l.Address] {
			bad("address listed twice")
		}
		seen[l.Address] = true
		if !schemas.ValidTenant(l.Tenant) {
			bad("tenant %q: %s", l.Tenant, schemas.TenantRule)
		}
		if l.Institution == "" {
			l.Institution = l.Tenant
		}
		if l.Charset == "" {
			l.Charset = wire.Default
		}
		if !l.Charset.Valid() {
			bad("charset %q: IBM850, ISO-8859-1 or UTF-8", l.Charset)
		}
		if d := l.Delimiter; d != "" && (len(d) != 1 || d[0] < 0x21 || d[0] > 0x7e ||
			(d[0] >= '0' && d[0] <= '9') || (d[0] >= 'A' && d[0] <= 'Z') || (d[0] >= 'a' && d[0] <= 'z')) {
			bad("delimiter %q: one printable character, not a letter or digit", d)
		}
		loc, err := time.LoadLocation(l.TimeZone)
		if err != nil {
			bad("timeZone %q: %v", l.TimeZone, err)
		}
		l.location = loc
		switch {
		case l.TLS == nil && !l.Plain:
			bad("no tls: set tls (certFile, keyFile), or plain: true for plain TCP")
		case l.TLS != nil && l.Plain:
			bad("both tls and plain: choose one")
		case l.TLS != nil && (l.TLS.CertFile == "" || l.TLS.KeyFile == ""):
			bad("tls needs certFile and keyFile")
		}
		switch l.PatronPin {
		case "":
			l.PatronPin = PinOff
		case PinOff, PinRequired:
		default:
			bad("patronPin %q: %q or %q", l.PatronPin, PinOff, PinRequired)
		}
		if l.PaymentMethods == nil {
			l.PaymentMethods = DefaultPaymentMethods
		}
		for code, name := range l.PaymentMethods {
			if !paymentTypePattern.MatchString(code) || strings.TrimSpace(name) == "" {
				bad("paymentMethods %q: %q: a SIP2 payment type (two digits) naming a payment method", code, name)
			}
		}
		if l.ServicePointID == "" {
			bad("servicePointId is required: check-outs are made at a service point")
		}
	}
	return c, errors.Join(problems...)
}
