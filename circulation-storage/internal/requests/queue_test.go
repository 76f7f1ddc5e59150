package requests

import (
	"encoding/json"
	"testing"
)

// FuzzRequestDocument: whatever document a client writes, a request
// write's reading of its place never panics, and what it stores is JSON
// whose position is there exactly when the request is open (at the place
// given), never for a closed one.
func FuzzRequestDocument(f *testing.F) {
	for _, s := range []string{
		`{"itemId":"0b8d1c2e-2f55-4b1e-9d3f-6d6f7f0a9a11","status":"Open - Not yet filled","position":2}`,
		`{"itemId":"0b8d1c2e-2f55-4b1e-9d3f-6d6f7f0a9a11","status":"Closed - Cancelled","position":2}`,
		`{"status":"Open - Awaiting pickup","position":null}`, `{"status":7}`, `[]`, `null`, `{"position":"1"}`,
	} {
		f.Add([]byte(s), 3)
	}
	f.Fuzz(func(t *testing.T, doc []byte, place int) {
		d, err := decodeRequest(doc)
		if err != nil {
			return
		}
		d.place.position = place
		var out map[string]json.RawMessage
		if err := json.Unmarshal(d.encode(), &out); err != nil {
			t.Fatalf("%s stored as no JSON object: %v", doc, err)
		}
		pos, has := out["position"]
		if has != d.place.open || has && string(pos) != string(mustJSON(place)) {
			t.Fatalf("%s (open %v) stored with position %s", doc, d.place.open, pos)
		}
	})
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
