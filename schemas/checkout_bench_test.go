package schemas

import (
	"encoding/json"
	"net/http"
	"testing"
)

// BenchmarkACheckOutsValidations: the JSON Schema work storage does for
// each check-out asked in one call, alone on a warm core: the call's body
// decoded and held to its schema, the loan it builds held to the loan
// POST's schema, and the lock's acquisition terms held to theirs.
// BENCHMARKS.md §14 compares these with what the same work costs inside
// the running services.
func BenchmarkACheckOutsValidations(b *testing.B) {
	set := MustLoad()
	post, ok := RouteFor(ServiceStorage, http.MethodPost, "/loan-storage/loans")
	if !ok {
		b.Fatal("storage has no loan POST")
	}
	loanSchema := post.Request
	const (
		user  = "1f0c8a9e-2b4d-4c6e-8a0b-1c2d3e4f5a6b"
		item  = "2a1b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d"
		point = "3b2c4d5e-6f7a-4b8c-9d0e-1f2a3b4c5d6e"
		lock  = "4c3d5e6f-7a8b-4c9d-8e1f-2a3b4c5d6e7f"
	)
	request := []byte(`{"id":"5d4e6f7a-8b9c-4d0e-9f2a-3b4c5d6e7f8a","itemBarcode":"book-001","userBarcode":"1001",` +
		`"servicePointId":"` + point + `","loanDate":"2026-03-01T10:00:00.000+00:00"}`)
	loan := []byte(`{"id":"5d4e6f7a-8b9c-4d0e-9f2a-3b4c5d6e7f8a","userId":"` + user + `","itemId":"` + item + `",` +
		`"loanDate":"2026-03-01T10:00:00.000Z","dueDate":"2026-03-22T23:59:59.000Z","action":"checkedout","status":{"name":"Open"},` +
		`"loanPolicyId":"6e5f7a8b-9c0d-4e1f-8a3b-4c5d6e7f8a9b","checkoutServicePointId":"` + point + `",` +
		`"patronGroupIdAtCheckout":"7f6a8b9c-0d1e-4f2a-9b4c-5d6e7f8a9b0c"}`)
	terms := map[string]any{"id": lock, "userId": user, "ttlMs": json.Number("5000"), "waitMs": json.Number("2000"),
		"holder": map[string]any{"instance": "kiosk-1", "itemBarcode": "book-001", "servicePointId": point}}
	for _, c := range []struct {
		name, schema string
		body         []byte
	}{
		{"the call's request", "check-out-storage-request.json", request},
		{"the loan built", loanSchema, loan},
	} {
		doc, err := Decode(c.body)
		if err != nil {
			b.Fatal(err)
		}
		if err := set.Validate(c.schema, doc); err != nil {
			b.Fatalf("%s: %v", c.name, err)
		}
		b.Run(c.name+"/decoded", func(b *testing.B) {
			for b.Loop() {
				if _, err := Decode(c.body); err != nil {
					b.Fatal(err)
				}
			}
		})
		if c.schema == loanSchema {
			b.Run(c.name+"/decoded as built", func(b *testing.B) {
				for b.Loop() {
					if _, err := DecodeBuilt(c.body); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		b.Run(c.name+"/validated", func(b *testing.B) {
			for b.Loop() {
				if err := set.Validate(c.schema, doc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	if err := set.Validate("checkout-lock-request.json", terms); err != nil {
		b.Fatalf("the lock's terms: %v", err)
	}
	b.Run("the lock's terms/validated", func(b *testing.B) {
		for b.Loop() {
			if err := set.Validate("checkout-lock-request.json", terms); err != nil {
				b.Fatal(err)
			}
		}
	})
}
