package msg

import (
	"strings"
	"testing"
)

// replyFields is a reply's fixed part (after its code, fixed long) and
// its fields by id, as a reader takes them.
func replyFields(text string, fixed int) (string, map[string]string) {
	text = strings.TrimSuffix(text, "\r")
	fields := map[string]string{}
	for _, f := range strings.Split(text[2+fixed:], "|") {
		if len(f) >= 2 {
			fields[f[:2]] = f[2:]
		}
	}
	return text[2 : 2+fixed], fields
}

// recorded is testdata/third-party-recorded.tsv's replies.
func recorded(t *testing.T) []sample {
	t.Helper()
	return readSamples(t, "testdata/third-party-recorded.tsv")
}

// TestCheckInAlertsAsOthersSendThem: a 10 telling a sorter of a hold at
// another library, as Koha sends one (third-party-recorded.tsv): alert Y
// in the fixed part, the destination in CT and alert type 02 in CV. The
// door's 10 for a hold elsewhere has the same fixed layout and the same
// alert, CT and CV; its 10 for a hold here alerts with CV 01 and no CT;
// with no hold, no alert and no CV.
func TestCheckInAlertsAsOthersSendThem(t *testing.T) {
	t.Parallel()
	layout := len(replyLayouts["10"].Fixed)
	found := 0
	for _, s := range recorded(t) {
		if !strings.HasPrefix(s.text, "10") {
			continue
		}
		found++
		theirFixed, theirs := replyFields(s.text, layout)
		door := CheckInResponse{OK: true, Date: layoutDate, Item: theirs["AB"], AlertType: theirs["CV"], Destination: theirs["CT"]}.Reply()
		b, err := door.Encode("UTF-8", '|', false, "")
		if err != nil {
			t.Fatal(err)
		}
		ourFixed, ours := replyFields(string(b), layout)
		if theirFixed[3] != 'Y' || ourFixed[3] != theirFixed[3] || len(ourFixed) != len(theirFixed) {
			t.Errorf("%s (%s): fixed part %q, the door's %q: want the same layout, alert Y", s.text, s.where, theirFixed, ourFixed)
		}
		for _, id := range []string{"CT", "CV", "AB"} {
			if ours[id] != theirs[id] || ours[id] == "" {
				t.Errorf("%s (%s): %s %q, the door's %q", s.text, s.where, id, theirs[id], ours[id])
			}
		}
		if theirs["CV"] != AlertHoldElsewhere {
			t.Errorf("%s (%s): CV %q, want the door's AlertHoldElsewhere %q", s.text, s.where, theirs["CV"], AlertHoldElsewhere)
		}
	}
	if found == 0 {
		t.Fatal("no recorded 10 in testdata")
	}
	for _, c := range []struct {
		m          CheckInResponse
		alert      byte
		cv, ct     string
		ctExpected bool
	}{
		{CheckInResponse{OK: true, Date: layoutDate, AlertType: AlertHoldHere}, 'Y', "01", "", false},
		{CheckInResponse{OK: true, Date: layoutDate}, 'N', "", "", false},
	} {
		b, _ := c.m.Reply().Encode("UTF-8", '|', false, "")
		fixed, fields := replyFields(string(b), layout)
		_, hasCT := fields["CT"]
		if fixed[3] != c.alert || fields["CV"] != c.cv || hasCT != c.ctExpected {
			t.Errorf("%q: want alert %c, CV %q, CT present %v", b, c.alert, c.cv, c.ctExpected)
		}
	}
}

// TestItemStatusesInOthersLayout: the door's 18 for an item on the hold
// shelf (08) and in transit (10) is laid out as other implementations'
// 18s are (third-party.tsv's Evergreen replies): the circulation status
// in the first two characters of the same fixed part.
func TestItemStatusesInOthersLayout(t *testing.T) {
	t.Parallel()
	layout := len(replyLayouts["18"].Fixed)
	var theirs []string
	for _, s := range samples(t) {
		if strings.HasPrefix(s.text, "18") {
			theirs = append(theirs, s.text)
		}
	}
	if len(theirs) == 0 {
		t.Fatal("no third-party 18 in testdata")
	}
	for folio, want := range map[string]string{"Awaiting pickup": "08", "In transit": "10", "Available": "03", "Checked out": "04"} {
		status := CirculationStatus(folio)
		b, _ := ItemResponse{Status: status, Date: layoutDate, Item: "x", Title: "y"}.Reply().Encode("UTF-8", '|', false, "")
		ours, fields := replyFields(string(b), layout)
		if status != want || ours[:2] != want || fields["AB"] != "x" {
			t.Errorf("18 of an item %s: %q, want circulation status %s", folio, b, want)
		}
		for _, text := range theirs {
			if fixed, f := replyFields(text, layout); len(fixed) != len(ours) || f["AB"] == "" {
				t.Errorf("%s: its fixed part %q does not line up with the door's %q", text, fixed, ours)
			}
		}
	}
}
