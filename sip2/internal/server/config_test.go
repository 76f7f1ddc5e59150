package server

import (
	"os"
	"strings"
	"testing"
)

// TestShippedConfigParses: config/sip2.json, what docker-compose gives the
// door, is a valid configuration.
func TestShippedConfigParses(t *testing.T) {
	raw, err := os.ReadFile("../../../config/sip2.json")
	if err != nil {
		t.Fatal(err)
	}
	c, err := ParseConfig(raw)
	if err != nil {
		t.Fatal(err)
	}
	if l := c.Listeners[0]; l.Tenant != "diku" || !l.Plain || l.Charset != "IBM850" || l.delimiter() != '|' || l.PatronPin != PinOff {
		t.Fatalf("listener %+v", l)
	}
}

// TestConfigRefusesWhatItCannotServe: each problem is named, with its
// listener, and a listener is plain only when it says so.
func TestConfigRefusesWhatItCannotServe(t *testing.T) {
	for _, tc := range []struct{ name, json, want string }{
		{"neither TLS nor plain", `{"listeners":[{"address":"127.0.0.1:6001","tenant":"diku","servicePointId":"x"}]}`,
			"no tls: set tls (certFile, keyFile), or plain: true for plain TCP"},
		{"both", `{"listeners":[{"address":"127.0.0.1:6001","tenant":"diku","servicePointId":"x","plain":true,"tls":{"certFile":"a","keyFile":"b"}}]}`,
			"both tls and plain"},
		{"bad tenant", `{"listeners":[{"address":"127.0.0.1:6001","tenant":"Diku!","servicePointId":"x","plain":true}]}`, `tenant "Diku!"`},
		{"bad charset", `{"listeners":[{"address":"127.0.0.1:6001","tenant":"diku","servicePointId":"x","plain":true,"charset":"EBCDIC"}]}`,
			`charset "EBCDIC"`},
		{"letter delimiter", `{"listeners":[{"address":"127.0.0.1:6001","tenant":"diku","servicePointId":"x","plain":true,"delimiter":"A"}]}`,
			`delimiter "A"`},
		{"bad zone", `{"listeners":[{"address":"127.0.0.1:6001","tenant":"diku","servicePointId":"x","plain":true,"timeZone":"Mars/Base"}]}`,
			`timeZone "Mars/Base"`},
		{"twice", `{"listeners":[{"address":"127.0.0.1:6001","tenant":"diku","servicePointId":"x","plain":true},` +
			`{"address":"127.0.0.1:6001","tenant":"diku","servicePointId":"x","plain":true}]}`, "address listed twice"},
		{"no service point", `{"listeners":[{"address":"127.0.0.1:6001","tenant":"diku","plain":true}]}`, "servicePointId is required"},
		{"bad PIN mode", `{"listeners":[{"address":"127.0.0.1:6001","tenant":"diku","servicePointId":"x","plain":true,"patronPin":"maybe"}]}`,
			`patronPin "maybe"`},
		{"unknown field", `{"listeners":[{"address":"127.0.0.1:6001","tenant":"diku","servicePointId":"x","plain":true,"tsl":{}}]}`,
			`unknown field "tsl"`},
		{"none", `{"listeners":[]}`, "no listeners"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tc.json))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error saying %q", err, tc.want)
			}
		})
	}
}
