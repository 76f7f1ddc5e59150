// Package wire is SIP2's framing (3M Standard Interchange Protocol 2.00):
// a message is a two-character command code, fixed-length fields, and
// variable fields "XXvalue" each ended by the delimiter, optionally closed
// by error detection "AY<n>AZ<checksum>", and a CR. The checksum is the
// two's complement of the 16-bit sum of the message's bytes up to and
// including "AZ", in four upper-case hex digits, over the bytes as encoded
// in the listener's character set.
package wire

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/unicode"
)

// MaxField is the most characters a variable field's value carries; a
// longer value is cut.
const MaxField = 255

// Charset is a listener's character set.
type Charset string

// The character sets a listener may speak: IBM850 by default, as FOLIO's
// edge-sip2 does.
const (
	IBM850  Charset = "IBM850"
	Latin1  Charset = "ISO-8859-1"
	UTF8    Charset = "UTF-8"
	Default         = IBM850
)

// encoding is the charset's encoding.
func (c Charset) encoding() (encoding.Encoding, error) {
	switch c {
	case IBM850, "":
		return charmap.CodePage850, nil
	case Latin1:
		return charmap.ISO8859_1, nil
	case UTF8:
		return unicode.UTF8, nil
	}
	return nil, fmt.Errorf("unknown character set %q: IBM850, ISO-8859-1 or UTF-8", string(c))
}

// Valid reports whether c is a character set a listener may speak.
func (c Charset) Valid() bool {
	_, err := c.encoding()
	return err == nil
}

// Checksum is SIP2's checksum of b: the two's complement of the 16-bit sum
// of its bytes, in four upper-case hex digits.
func Checksum(b []byte) string {
	var sum uint16
	for _, c := range b {
		sum += uint16(c)
	}
	return fmt.Sprintf("%04X", -sum)
}

// Request is a message as received: its command, the text after the
// command (decoded), its variable fields by id (the first of each), and
// its error detection.
type Request struct {
	Code string
	// Fixed is the text between the command and the first variable field;
	// a message's fixed fields are its first len(Fixed) characters.
	Fixed string
	// Fields are the variable fields, in order.
	Fields []Field
	// Seq is the AY sequence number, "" when the message had no error
	// detection.
	Seq string
	// Checked says the message carried error detection (AZ): its reply
	// carries it too.
	Checked bool
	// Raw is the message's bytes as received, without the CR.
	Raw []byte
}

// Field is a variable field.
type Field struct{ ID, Value string }

// Get is the first value of the field id, and whether it was there.
func (r *Request) Get(id string) (string, bool) {
	for _, f := range r.Fields {
		if f.ID == id {
			return f.Value, true
		}
	}
	return "", false
}

// ErrChecksum is a message whose checksum does not match its bytes: it is
// answered 96 (resend).
var ErrChecksum = errors.New("sip2: checksum does not match")

// ErrMalformed is a message that is not SIP2 at all.
var ErrMalformed = errors.New("sip2: malformed message")

// fixedLength is the length of each request's fixed part (after the
// command code), from the 2.00 specification.
var fixedLength = map[string]int{
	"93": 2,  // UID algorithm, PWD algorithm
	"99": 8,  // status code, max print width, protocol version
	"11": 38, // SC renewal policy, no block, transaction date, nb due date
	"09": 37, // no block, transaction date, return date
	"23": 21, // language, transaction date
	"63": 31, // language, transaction date, summary
	"17": 18, // transaction date
	"35": 18, // transaction date
	"97": 0,
	"96": 0,
	"01": 19, "37": 25, "19": 18, "25": 18, "15": 19, "29": 38, "65": 18,
}

// Parse reads one message (without its CR) in charset cs, delimiter delim:
// the checksum, when the message carries one, must match and end it
// (ErrChecksum). A
// message that is too short for its fixed part, or not of a known
// command, is ErrMalformed; its Code is still set when it has one.
func Parse(raw []byte, cs Charset, delim byte) (*Request, error) {
	r := &Request{Raw: raw}
	body := raw
	// Error detection: "AY<n>AZ<4 hex>" at the end, or "AZ<4 hex>" alone
	// (97 and 96 carry no sequence number).
	if n := len(raw); n >= 6 && string(raw[n-6:n-4]) == "AZ" {
		want := string(raw[n-4:])
		if got := Checksum(raw[:n-4]); !strings.EqualFold(got, want) {
			if len(raw) >= 2 {
				r.Code = string(raw[:2])
			}
			return r, ErrChecksum
		}
		body = raw[:n-6]
		r.Checked = true
		if m := len(body); m >= 3 && string(body[m-3:m-1]) == "AY" && body[m-1] >= '0' && body[m-1] <= '9' {
			r.Seq = string(body[m-1:])
			body = body[:m-3]
		}
	}
	enc, err := cs.encoding()
	if err != nil {
		return r, err
	}
	text, err := enc.NewDecoder().Bytes(body)
	if err != nil {
		return r, ErrMalformed
	}
	s := string(text)
	if len(s) < 2 {
		return r, ErrMalformed
	}
	r.Code = s[:2]
	n, known := fixedLength[r.Code]
	if !known || len(s) < 2+n {
		return r, ErrMalformed
	}
	r.Fixed = s[2 : 2+n]
	rest := s[2+n:]
	for rest != "" {
		end := strings.IndexByte(rest, delim)
		item := rest
		if end >= 0 {
			item, rest = rest[:end], rest[end+1:]
		} else {
			rest = ""
		}
		if item == "" {
			continue
		}
		if len(item) < 2 {
			return r, ErrMalformed
		}
		r.Fields = append(r.Fields, Field{ID: item[:2], Value: item[2:]})
	}
	// A checksum anywhere but at the end (cut short, run on, followed by
	// anything), or a sequence number and checksum run into the last
	// field (its delimiter lost: "…|ACpwAY1AZEF"), is error detection
	// damaged on the line: answered as a checksum that does not match,
	// never carried out unverified.
	for i, f := range r.Fields {
		if f.ID == "AZ" || f.ID == "AY" && strings.Contains(f.Value, "AZ") ||
			i == len(r.Fields)-1 && runOnTrailer.MatchString(f.Value) {
			return r, ErrChecksum
		}
	}
	return r, nil
}

// runOnTrailer is a sequence number and a checksum, whole or cut short,
// at the end of a field's value.
var runOnTrailer = regexp.MustCompile(`AY[0-9]AZ[0-9A-Fa-f]{0,4}$`)

// Reply builds a message: the code, the fixed part, then the variable
// fields, each cut to MaxField characters and cleaned of the delimiter
// and control characters, then, when seq is not "", "AY<seq>AZ" and the
// checksum over the encoded bytes; a CR ends it. A character the charset
// cannot carry goes out as "?".
type Reply struct {
	Code  string
	Fixed string
	// Fields are written in order; one with an empty value is written as
	// its id alone (a required field with nothing to say).
	Fields []Field
}

// Add appends a variable field.
func (r *Reply) Add(id, value string) *Reply {
	r.Fields = append(r.Fields, Field{id, value})
	return r
}

// Echo gives each of the reply's fields among ids that is empty the
// request's value for it, when the request has one: a refusal names the
// patron and the item the kiosk asked about.
func (r *Reply) Echo(req *Request, ids ...string) *Reply {
	for i, f := range r.Fields {
		if f.Value != "" || !slices.Contains(ids, f.ID) {
			continue
		}
		if v, ok := req.Get(f.ID); ok {
			r.Fields[i].Value = v
		}
	}
	return r
}

// Encode is the reply's bytes, CR included. errorDetection adds AY/AZ:
// seq is the request's sequence number ("" when the request had none: then
// AZ alone when errorDetection is on).
func (r *Reply) Encode(cs Charset, delim byte, errorDetection bool, seq string) ([]byte, error) {
	enc, err := cs.encoding()
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	b.WriteString(r.Code)
	b.WriteString(r.Fixed)
	for _, f := range r.Fields {
		b.WriteString(f.ID)
		b.WriteString(Clean(f.Value, delim))
		b.WriteByte(delim)
	}
	out := encodeText(enc, b.String())
	if errorDetection {
		if seq != "" {
			out = append(out, "AY"+seq...)
		}
		out = append(out, "AZ"...)
		out = append(out, Checksum(out)...)
	}
	return append(out, '\r'), nil
}

// encodeText is text in enc, every character enc cannot carry (and every
// byte that is not UTF-8) written as "?": never the charset's substitute
// control character (0x1A), which a kiosk would print or choke on.
func encodeText(enc encoding.Encoding, text string) []byte {
	out := make([]byte, 0, len(text))
	cm, isCharmap := enc.(*charmap.Charmap)
	for _, r := range text {
		switch {
		case r == utf8.RuneError:
			out = append(out, '?')
		case isCharmap:
			b, ok := cm.EncodeRune(r)
			if !ok {
				b = '?'
			}
			out = append(out, b)
		default:
			out = utf8.AppendRune(out, r)
		}
	}
	return out
}

// Clean makes v safe to send in a variable field: the delimiter and
// control characters become spaces, and it is cut to MaxField characters.
func Clean(v string, delim byte) string {
	out := make([]rune, 0, len(v))
	for _, c := range v {
		if len(out) == MaxField {
			break
		}
		if c < 0x20 || c == 0x7f || (c < 0x80 && byte(c) == delim) {
			c = ' '
		}
		out = append(out, c)
	}
	return string(out)
}

// Date is SIP2's 18-character date: YYYYMMDDZZZZHHMMSS, the zone four
// spaces for local time (t's location).
func Date(t time.Time) string {
	return t.Format("20060102") + "    " + t.Format("150405")
}

// YN is "Y" or "N".
func YN(b bool) string {
	if b {
		return "Y"
	}
	return "N"
}

// Bit is "1" or "0".
func Bit(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// Counter is a 4-digit count, "9999" past it.
func Counter(n int) string {
	return fmt.Sprintf("%04d", min(max(n, 0), 9999))
}

// Width is a 3-digit number.
func Width(n int) string { return fmt.Sprintf("%03d", min(max(n, 0), 999)) }

// Atoi reads a digit field, -1 when it is not digits.
func Atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return -1
	}
	return n
}
