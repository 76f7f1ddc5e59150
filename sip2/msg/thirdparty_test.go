package msg

import (
	"bufio"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/checkoutlock/sip2/wire"
)

// sample is a message of another implementation (testdata/third-party.tsv).
type sample struct {
	cs          wire.Charset
	text, where string
}

func samples(t *testing.T) []sample {
	t.Helper()
	return readSamples(t, "testdata/third-party.tsv")
}

// readSamples reads a file of samples: a character set, the message and
// where it comes from, separated by tabs; # begins a comment.
func readSamples(t *testing.T, file string) []sample {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []sample
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		cols := strings.Split(line, "\t")
		if len(cols) != 3 {
			t.Fatalf("testdata line %q: want three columns", line)
		}
		out = append(out, sample{cs: wire.Charset(cols[0]), text: cols[1], where: cols[2]})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// encoded is the sample's bytes in its character set.
func (s sample) encoded(t *testing.T) []byte {
	t.Helper()
	r := &wire.Reply{Code: s.text}
	b, err := r.Encode(s.cs, '|', false, "")
	if err != nil {
		t.Fatal(err)
	}
	return b[:len(b)-1]
}

// readers are the door's readers of the requests it carries out.
var readers = map[string]func(*wire.Request) (any, error){
	"93": func(r *wire.Request) (any, error) { return ReadLogin(r) },
	"99": func(r *wire.Request) (any, error) { return ReadSCStatus(r) },
	"11": func(r *wire.Request) (any, error) { return ReadCheckOut(r) },
	"09": func(r *wire.Request) (any, error) { return ReadCheckIn(r) },
	"23": func(r *wire.Request) (any, error) { return ReadPatron(r) },
	"63": func(r *wire.Request) (any, error) { return ReadPatron(r) },
	"17": func(r *wire.Request) (any, error) { return ReadItem(r) },
	"35": func(r *wire.Request) (any, error) { return ReadEndSession(r) },
	"29": func(r *wire.Request) (any, error) { return ReadRenew(r) },
	"37": func(r *wire.Request) (any, error) { return ReadFeePaid(r) },
}

// TestThirdPartyRequests: every request other implementations send is
// framed, verified and read by the door, and what it reads is what they
// wrote.
func TestThirdPartyRequests(t *testing.T) {
	t.Parallel()
	read := map[string]any{}
	n := 0
	for _, s := range samples(t) {
		code := s.text[:2]
		if _, isReply := replyLayouts[code]; isReply {
			continue
		}
		n++
		r, err := wire.Parse(s.encoded(t), s.cs, '|')
		if err != nil || !r.Checked {
			t.Errorf("%s (%s): %v, checked %v", s.text, s.where, err, r != nil && r.Checked)
			continue
		}
		if reader, ok := readers[code]; ok {
			m, err := reader(r)
			if err != nil {
				t.Errorf("%s (%s): %v", s.text, s.where, err)
			}
			read[s.text] = m
		}
	}
	if n < 40 {
		t.Fatalf("%d third-party requests, want the 40 and more of testdata", n)
	}
	got := func(text string) any {
		m, ok := read[text]
		if !ok {
			t.Fatalf("%q is not among the samples read", text)
		}
		return m
	}
	date := "20210814    083455"
	for text, want := range map[string]any{
		"9300CNuser|COpasswd|CPcirculationLocation|AY1AZEE7D": Login{UIDAlgorithm: "0", PWDAlgorithm: "0", User: "user",
			Password: "passwd", Location: "circulationLocation"},
		"990 402.00AY1AZFCB4":  SCStatus{Status: "0", MaxPrintWidth: " 40", Version: "2.00"},
		"9920102.00|AY1AZFC29": SCStatus{Status: "2", MaxPrintWidth: "010", Version: "2.00"},
		"1720000227    161243AOinstitutionId|ABitemId|AY0AZF117": ItemRequest{TransactionDate: "20000227    161243",
			Institution: "institutionId", Item: "itemId"},
		"3520130514    132223AOinstitutionId|AApatronId|AY1AZF033": EndSession{TransactionDate: "20130514    132223",
			Institution: "institutionId", Patron: "patronId"},
		"09N19980821    085721                  APCertification Terminal Location|AOCertification Institute ID|ABCheckInBook|ACTPWord|BIN|AY2AZD6A5": CheckIn{
			TransactionDate: "19980821    085721", ReturnDate: strings.Repeat(" ", 18), Location: "Certification Terminal Location",
			Institution: "Certification Institute ID", Item: "CheckInBook", seq: "2"},
		"09Y20200103    19234620210814    083455APlocation|AOinstitutionId|ABitemId|ACterminalPassword|BIY|AY0AZDFFA": CheckIn{
			NoBlock: true, TransactionDate: "20200103    192346", ReturnDate: date, Location: "location", Institution: "institutionId",
			Item: "itemId", seq: "0"},
	} {
		if m := got(text); m != want {
			t.Errorf("%s:\n read %+v\n want %+v", text, m, want)
		}
	}
	co := got("11NY20210814    08345520210814    083455AOinstitutionId|AApatronId|ABitemId|ACterminalPassword|ADpatronPassword|BOY|BIY|AY0AZD782").(CheckOut)
	if co.RenewalPolicy || !co.NoBlock || co.TransactionDate != date || co.NoBlockDueDate != date || co.Institution != "institutionId" ||
		co.Patron != "patronId" || co.Item != "itemId" || co.PatronPassword != "patronPassword" || !co.Has("BO") {
		t.Errorf("jsip2's check-out with every field: %+v", co)
	}
	co = got("11YY20210814    08345520210814    083455AO|AApatronId|ABitemId|AC|AY0AZED4B").(CheckOut)
	if !co.RenewalPolicy || !co.NoBlock || co.Has("AD") || co.Patron != "patronId" {
		t.Errorf("jsip2's check-out without a patron password: %+v", co)
	}
	for text, want := range map[string]Summary{
		"6300119980723    091905Y         AOInstitutionID|AAPatronID|BP00001|BQ00005|AY1AZEA83":             {Hold: true},
		"6300020150416    064702  Y       AOinstitutionId|AApatronIdentifier|AC|AD|AY0AZE8CA":               {Charged: true},
		"6300720210814    083455          AOinstitutionId|AApatronIdentifier|AC|ADpatronPassword|AY1AZE30F": {},
	} {
		pi := got(text).(PatronRequest)
		if !pi.Information || pi.Summary != want || pi.Institution == "" {
			t.Errorf("%s: %+v, want summary %+v", text, pi, want)
		}
	}
	rn := got("29NN20210814    08345520210814    083455AO|AApatronId|ADpatronPassword|ABitemId|AJtitleId|ACterminalPassword|BON|AY3AZDA8D").(Renew)
	if rn.ThirdPartyAllowed || rn.NoBlock || rn.TransactionDate != date || rn.Patron != "patronId" || rn.Item != "itemId" ||
		rn.PatronPassword != "patronPassword" || !rn.Has("AD") {
		t.Errorf("jsip2's renewal: %+v", rn)
	}
	rn = got("29NY20210814    08345520210814    083455AOinstitutionId|AApatronId|ABitemId|AJtitleId|CHitemProperties|BOY|AY0AZDCB7").(Renew)
	if !rn.NoBlock || rn.Institution != "institutionId" || rn.Has("AD") {
		t.Errorf("jsip2's renewal without a password: %+v", rn)
	}
	fp := got("3720130514    1322230402EURBV2.00|AOinstitutionId|AApatronId|CGfeeIdentifier|AY1AZE672").(FeePaid)
	if fp.TransactionDate != "20130514    132223" || fp.FeeType != "04" || fp.PaymentType != "02" || fp.Currency != "EUR" || fp.Amount != "2.00" ||
		fp.Institution != "institutionId" || fp.Patron != "patronId" || fp.FeeID != "feeIdentifier" || fp.TransactionID != "" || fp.Has("AD") {
		t.Errorf("jsip2's fee paid of an overdue fee by credit card: %+v", fp)
	}
	fp = got("3720210814    0834550100USDBV9.99|AOinstitutionId|AApatronId|ACterminalPassword|ADpatronPassword|BKtransactionId|AY0AZD797").(FeePaid)
	if fp.FeeType != "01" || fp.PaymentType != "00" || fp.Currency != "USD" || fp.Amount != "9.99" || fp.PatronPassword != "patronPassword" ||
		fp.TransactionID != "transactionId" || fp.FeeID != "" {
		t.Errorf("jsip2's fee paid in cash with a transaction id: %+v", fp)
	}
	// Paid once per transaction id of a machine: sent again on another
	// day, with another sequence number, the same key; another id, or
	// the same id from another machine, another key. A machine that gave
	// no location code has the key the doors of the release before made
	// (releaseBefore, theirs for this message), so that a payment sent
	// again across an upgrade of its door is paid once.
	const releaseBefore = "sip2-080b429a35c40bfc36aaee5c6d7fd159800e1cfc2b1956382ff7998e37682191"
	again := fp
	again.TransactionDate, again.seq = "20210815    101010", "7"
	other := fp
	other.TransactionID = "transactionId2"
	if key := fp.Key("entrance-1"); key == "" || key != again.Key("entrance-1") || key == other.Key("entrance-1") || key == fp.Key("entrance-2") ||
		key == fp.Key("") || fp.Key("") != releaseBefore {
		t.Errorf("fee paid keys: %q, sent again %q, another transaction %q, another machine's %q", key, again.Key("entrance-1"),
			other.Key("entrance-1"), fp.Key("entrance-2"))
	}
	ps := got("2300020070102    080109AOinstitutionId|AApatronIdentifier|AC|ADpatronPassword|AY1AZE467").(PatronRequest)
	if ps.Information || ps.Language != "000" || ps.TransactionDate != "20070102    080109" || ps.Patron != "patronIdentifier" ||
		ps.PatronPassword != "patronPassword" {
		t.Errorf("jsip2's patron status: %+v", ps)
	}
}

// replyLayouts is one of the door's replies of each code, dated at
// layoutDate: the layout the door writes, which other implementations'
// replies must share.
var layoutDate = time.Date(2001, 2, 3, 4, 5, 6, 0, time.Local)

var replyLayouts = map[string]*wire.Reply{
	"94": LoginResponse{OK: true}.Reply(),
	"98": ACSStatus{Date: layoutDate}.Reply(),
	"12": CheckOutResponse{Date: layoutDate}.Reply(),
	"10": CheckInResponse{Date: layoutDate}.Reply(),
	"24": PatronResponse{Code: "24", Date: layoutDate}.Reply(),
	"64": PatronResponse{Code: "64", Date: layoutDate}.Reply(),
	"18": ItemResponse{Status: "01", Date: layoutDate}.Reply(),
	"36": EndSessionResponse{Date: layoutDate}.Reply(),
	"30": RenewResponse{Date: layoutDate}.Reply(),
	"66": RenewAllResponse{Date: layoutDate}.Reply(),
	"38": FeePaidResponse{Date: layoutDate}.Reply(),
}

// TestThirdPartyReplies: every reply of other implementations has the
// door's layout of its code (the same fixed fields, its date where the
// door writes it, its variable fields where the door's begin), and its
// checksum is the one the door computes; where the door would say the
// same thing, it says it byte for byte.
func TestThirdPartyReplies(t *testing.T) {
	t.Parallel()
	n := 0
	for _, s := range samples(t) {
		code := s.text[:2]
		layout, isReply := replyLayouts[code]
		if !isReply {
			continue
		}
		n++
		b := s.encoded(t)
		if got := wire.Checksum(b[:len(b)-4]); got != string(b[len(b)-4:]) {
			t.Errorf("%s (%s): checksum %s", s.text, s.where, got)
		}
		fixed := len(layout.Fixed)
		if len(s.text) < 2+fixed+2 {
			t.Errorf("%s (%s): shorter than the fixed part of %s (%d)", s.text, s.where, code, fixed)
			continue
		}
		if at := strings.Index(layout.Fixed, wire.Date(layoutDate)); at >= 0 {
			if _, err := ParseDate(s.text[2+at : 2+at+18]); err != nil {
				t.Errorf("%s (%s): no date at %d: %v", s.text, s.where, at, err)
			}
		}
		if id := s.text[2+fixed : 2+fixed+2]; strings.ToUpper(id) != id || strings.ContainsAny(id, "| ") {
			t.Errorf("%s (%s): the variable fields do not begin after the %d characters of %s's fixed part (%q)",
				s.text, s.where, fixed, code, id)
		}
	}
	if n < 25 {
		t.Fatalf("%d third-party replies, want the 25 and more of testdata", n)
	}
	for _, c := range []struct {
		reply *wire.Reply
		seq   string
		want  string
	}{
		{LoginResponse{OK: true}.Reply(), "3", "941AY3AZFDFA"},
		{LoginResponse{}.Reply(), "0", "940AY0AZFDFE"},
		{ACSStatus{Online: true, CheckIn: true, CheckOut: true, RenewalPolicy: true, Timeout: 100, Retries: 5,
			Date: time.Date(2022, 7, 21, 21, 30, 42, 0, time.Local), Institution: "NEX", Supported: "YYYYYYYYYYYNYYYY"}.Reply(),
			"2", "98YYYYNN10000520220721    2130422.00AONEX|BXYYYYYYYYYYYNYYYY|AY2AZEE74"},
		{PatronResponse{Code: "64", Status: Denied, Date: time.Date(2017, 10, 31, 9, 20, 0, 0, time.Local), Institution: "hq",
			Patron: "2642", Message: "#Unknown borrower barcode - please refer to the circulation desk."}.Reply(), "1",
			"64YYYY          00020171031    092000000000000000000000000000AOhq|AA2642|AE|BLN|AF#Unknown borrower barcode - please refer to the circulation desk.|AY1AZD46E"},
	} {
		got, err := c.reply.Encode(wire.IBM850, '|', true, c.seq)
		if err != nil || string(got) != c.want+"\r" {
			t.Errorf("got  %q\nwant %q (another implementation's)", got, c.want)
		}
		// And the sample is among the testdata's.
		found := false
		for _, s := range samples(t) {
			found = found || s.text == c.want
		}
		if !found {
			t.Errorf("%q is not in testdata", c.want)
		}
	}
}
