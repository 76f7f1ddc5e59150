package postgres

import (
	"encoding/json"
	"testing"
)

// BenchmarkReadingALoan reads a stored loan, as PostgreSQL sends a jsonb
// value, into a json.RawMessage: by readJSON, the pools' way, and by
// json.Unmarshal, pgx's own. Compare the two in one run:
//
//	cd circulation-storage && go test -run '^$' -bench ReadingALoan -count 5 ./internal/postgres/
func BenchmarkReadingALoan(b *testing.B) {
	loan := []byte(`{"id": "0b1e6c4e-2c1f-4a8e-9a53-0c7c1b0c9f11", "action": "checkedout", "itemId": "5b7a2f0e-4d39-4b44-8d0f-9e6f1c2a3b4c", ` +
		`"status": {"name": "Open"}, "userId": "7c9d1e2f-3a4b-4c5d-8e6f-7a8b9c0d1e2f", "dueDate": "2026-12-23T10:15:30.123Z", ` +
		`"loanDate": "2026-12-02T10:15:30.123Z", "metadata": {"createdDate": "2026-12-02T10:15:30.456Z", "updatedDate": "2026-12-02T10:15:30.456Z", ` +
		`"createdByUserId": "7c9d1e2f-3a4b-4c5d-8e6f-7a8b9c0d1e2f", "updatedByUserId": "7c9d1e2f-3a4b-4c5d-8e6f-7a8b9c0d1e2f"}, ` +
		`"loanPolicyId": "d9cd0bed-1b49-4b5e-a7bd-064b8d177231", "checkoutServicePointId": "3a40852d-49fd-4df2-a1f9-6e2641a6e91f", ` +
		`"patronGroupIdAtCheckout": "503a81cd-6c26-400f-b620-14c08943697c"}`)
	for _, read := range []struct {
		name string
		read func([]byte, any) error
	}{{"readJSON", readJSON}, {"json.Unmarshal", json.Unmarshal}} {
		b.Run(read.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var raw json.RawMessage
				if err := read.read(loan, &raw); err != nil || len(raw) != len(loan) {
					b.Fatalf("got %d bytes (%v), want %d", len(raw), err, len(loan))
				}
			}
		})
	}
}
