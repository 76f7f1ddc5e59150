package wire

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestThirdPartyChecksums: the strings other SIP2 implementations test
// with. edge-sip2's login fixture is valid with F594 and not with F595;
// Evergreen's login reply 941AY0AZFDFD, its resend request 96AZFEF6 and
// its request for the last reply 97AZFEF5 carry their own checksums.
func TestThirdPartyChecksums(t *testing.T) {
	t.Parallel()
	r, err := Parse([]byte("9300CNuser_id|COpassw0rd|AY1AZF594"), IBM850, '|')
	if err != nil {
		t.Fatalf("edge-sip2's valid login: %v", err)
	}
	if r.Code != "93" || r.Fixed != "00" || r.Seq != "1" {
		t.Errorf("parsed %+v", r)
	}
	if v, _ := r.Get("CN"); v != "user_id" {
		t.Errorf("CN %q", v)
	}
	if v, _ := r.Get("CO"); v != "passw0rd" {
		t.Errorf("CO %q", v)
	}
	if _, err := Parse([]byte("9300CNuser_id|COpassw0rd|AY1AZF595"), IBM850, '|'); !errors.Is(err, ErrChecksum) {
		t.Errorf("edge-sip2's invalid login: %v, want ErrChecksum", err)
	}
	for _, s := range []string{"941AY0AZFDFD", "96AZFEF6", "97AZFEF5"} {
		if got := Checksum([]byte(s[:len(s)-4])); got != s[len(s)-4:] {
			t.Errorf("checksum of %s: %s", s[:len(s)-4], got)
		}
	}
	for _, s := range []string{"96AZFEF6", "97AZFEF5"} {
		r, err := Parse([]byte(s), IBM850, '|')
		if err != nil || r.Code != s[:2] || r.Seq != "" {
			t.Errorf("%s: %+v %v", s, r, err)
		}
	}
	// Evergreen's login reply is what Encode writes for an ok login of
	// sequence 0.
	got, err := (&Reply{Code: "94", Fixed: "1"}).Encode(IBM850, '|', true, "0")
	if err != nil || string(got) != "941AY0AZFDFD\r" {
		t.Errorf("login reply %q %v", got, err)
	}
	got, _ = (&Reply{Code: "96"}).Encode(IBM850, '|', true, "")
	if string(got) != "96AZFEF6\r" {
		t.Errorf("resend %q", got)
	}
}

// TestChecksumOverEncodedBytes: a name with letters beyond ASCII sums
// differently in each character set, and each verifies in its own.
func TestChecksumOverEncodedBytes(t *testing.T) {
	t.Parallel()
	seen := map[string]Charset{}
	for _, cs := range []Charset{IBM850, Latin1, UTF8} {
		out, err := (&Reply{Code: "24", Fixed: "              00120261125    120000"}).Add("AE", "Jürgen Ørsted").Encode(cs, '|', true, "3")
		if err != nil {
			t.Fatal(err)
		}
		raw := out[:len(out)-1]
		if c, dup := seen[string(raw[len(raw)-4:])]; dup {
			t.Errorf("%s and %s give the same checksum", cs, c)
		}
		seen[string(raw[len(raw)-4:])] = cs
		// Verified as sent, in its own charset.
		sum := Checksum(raw[:len(raw)-4])
		if sum != string(raw[len(raw)-4:]) {
			t.Errorf("%s: checksum %s, computed %s", cs, raw[len(raw)-4:], sum)
		}
	}
	// A UTF-8 request: the sum is over its bytes, two for ü.
	msg := "2300120261125    120000AOdiku|AA1001|AEJürgen|AY2AZ"
	raw := []byte(msg + Checksum([]byte(msg)))
	r, err := Parse(raw, UTF8, '|')
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := r.Get("AE"); v != "Jürgen" {
		t.Errorf("AE %q", v)
	}
	// The same bytes read as IBM850 fail no checksum, but mean other letters.
	r, _ = Parse(raw, IBM850, '|')
	if v, _ := r.Get("AE"); v == "Jürgen" {
		t.Error("UTF-8 bytes read as IBM850 gave the same text")
	}
}

// TestRepliesNeverCarryTheDelimiterOrControls: a value holding the
// delimiter, a CR or other controls goes out without them, and is cut to
// 255 characters.
func TestRepliesNeverCarryTheDelimiterOrControls(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 300)
	out, err := (&Reply{Code: "12", Fixed: "0NNY20261125    120000"}).
		Add("AF", "a|b\rc\nd\x00e").Add("AJ", long).Encode(UTF8, '|', false, "")
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	if strings.Count(s, "\r") != 1 || !strings.HasSuffix(s, "\r") {
		t.Errorf("reply %q carries a CR inside", s)
	}
	if !strings.Contains(s, "AFa b c d e|") || !strings.Contains(s, "AJ"+strings.Repeat("x", 255)+"|") {
		t.Errorf("reply %q", s)
	}
}

// TestADamagedChecksumIsNeverCarriedOut: edge-sip2's valid login with
// its checksum cut short, cut off, run on by a character, or followed by
// a space, or run into the password's field (the delimiter before AY
// lost), is a checksum that does not match, as a wrong one is: never a
// message read without its error detection. A message with none is read.
func TestADamagedChecksumIsNeverCarriedOut(t *testing.T) {
	t.Parallel()
	const valid = "9300CNuser_id|COpassw0rd|AY1AZF594"
	for _, s := range []string{
		valid[:len(valid)-2], valid[:len(valid)-4], valid + "5", valid + " ", "9300CNuser_id|AZF594|COpassw0rd|",
		// The delimiter before AY lost, the checksum cut short or not.
		"9300CNuser_id|COpassw0rdAY1AZF5", "9300CNuser_id|COpassw0rdAY1AZ", "9300CNuser_id|COpassw0rdAY1AZF594",
	} {
		if r, err := Parse([]byte(s), IBM850, '|'); !errors.Is(err, ErrChecksum) || r.Code != "93" {
			t.Errorf("%q: %+v %v, want ErrChecksum", s, r, err)
		}
	}
	r, err := Parse([]byte("9300CNuser_id|COpassw0rd|"), IBM850, '|')
	if err != nil || r.Checked {
		t.Errorf("a login without error detection: %+v %v", r, err)
	}
}

func TestMalformed(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "9", "11N", "XX000", "9300C"} {
		if _, err := Parse([]byte(s), IBM850, '|'); !errors.Is(err, ErrMalformed) {
			t.Errorf("%q: %v, want ErrMalformed", s, err)
		}
	}
}

func TestDate(t *testing.T) {
	t.Parallel()
	loc := time.FixedZone("X", 3600)
	if got := Date(time.Date(2026, 11, 25, 9, 5, 7, 0, loc)); got != "20261125    090507" || len(got) != 18 {
		t.Errorf("date %q", got)
	}
}

// FuzzParse: no message makes Parse panic, and a message that parses
// keeps its code and fixed part.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"9300CNuser_id|COpassw0rd|AY1AZF594", "97AZFEF5", "9900302.00",
		"11YN20261125    10383420261125    103834AOdiku|AA1004|ABbook-101|AC|AY2AZEE1F", "63001", "\xff\xfe|AZ"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		for _, cs := range []Charset{IBM850, Latin1, UTF8} {
			r, err := Parse(raw, cs, '|')
			if err == nil && (len(r.Code) != 2 || len(r.Fixed) != fixedLength[r.Code]) {
				t.Fatalf("%q parsed as code %q fixed %q", raw, r.Code, r.Fixed)
			}
		}
	})
}

// TestCharactersTheCharsetCannotCarry: a character outside the listener's
// character set goes out as "?", never as the charset's substitute control
// character (0x1A); one it carries goes out as its own byte.
func TestCharactersTheCharsetCannotCarry(t *testing.T) {
	t.Parallel()
	name := "Zoë Ørsted-Łukasz 中"
	for _, c := range []struct {
		cs   Charset
		want string
	}{
		{IBM850, "AEZo\x89 \x9drsted-?ukasz ?|"},
		{Latin1, "AEZo\xeb \xd8rsted-?ukasz ?|"},
		{UTF8, "AE" + name + "|"},
	} {
		got, err := (&Reply{Code: "64", Fields: []Field{{"AE", name}}}).Encode(c.cs, '|', false, "")
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != "64"+c.want+"\r" {
			t.Errorf("%s: %q, want %q", c.cs, got, "64"+c.want+"\r")
		}
		for _, b := range got[:len(got)-1] {
			if b < 0x20 {
				t.Errorf("%s: byte %#x below 0x20 in %q", c.cs, b, got)
			}
		}
	}
}

// TestEchoFillsOnlyEmptyFieldsTheRequestHas: a refusal's empty AA and AB
// take the request's values; a field with a value, one not named, and one
// the request lacks are left as they are.
func TestEchoFillsOnlyEmptyFieldsTheRequestHas(t *testing.T) {
	t.Parallel()
	req, err := Parse([]byte("6300120261125    105317  Y       AOdiku|AA1004|AB2001|AC|BPtwo|"), IBM850, '|')
	if err != nil {
		t.Fatal(err)
	}
	r := (&Reply{Code: "64"}).Add("AO", "").Add("AA", "").Add("AB", "kept").Add("AE", "").Add("AF", "why").Echo(req, "AA", "AB", "AE")
	want := []Field{{"AO", ""}, {"AA", "1004"}, {"AB", "kept"}, {"AE", ""}, {"AF", "why"}}
	if !slices.Equal(r.Fields, want) {
		t.Errorf("echoed: %+v, want %+v", r.Fields, want)
	}
}
