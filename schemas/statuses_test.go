package schemas

import (
	"encoding/json"
	"slices"
	"testing"
)

// TestStatusesAreTheSchemasWords: every status constant is a word of its
// schema's enum, so that a status written from Go is one the contract
// knows.
func TestStatusesAreTheSchemasWords(t *testing.T) {
	enum := func(file string, path ...string) []string {
		t.Helper()
		b, err := files.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var node any
		if err := json.Unmarshal(b, &node); err != nil {
			t.Fatal(err)
		}
		for _, p := range path {
			node = node.(map[string]any)[p]
		}
		var out []string
		for _, v := range node.([]any) {
			out = append(out, v.(string))
		}
		return out
	}
	items := enum("item.json", "properties", "status", "properties", "name", "enum")
	requests := enum("request.json", "properties", "status", "enum")
	loans := enum("loan.json", "properties", "status", "properties", "name", "enum")
	for _, c := range []struct {
		name        string
		consts, all []string
	}{{"item", ItemStatuses, items}, {"request", RequestStatuses, requests}, {"loan", LoanStatuses, loans}} {
		if !slices.Equal(c.consts, c.all) {
			t.Errorf("the %s statuses named are %q; the schema's are %q", c.name, c.consts, c.all)
		}
	}
	var named []string
	for s := range RequestTypesByItemStatus {
		named = append(named, s)
	}
	named = slices.Concat(named, ItemStatusesNotCheckedOut, ItemStatusesLost)
	for _, s := range named {
		if !slices.Contains(items, s) {
			t.Errorf("item status %q is not in item.json's enum %v", s, items)
		}
	}
	for _, s := range OpenRequestStatuses {
		if !slices.Contains(requests, s) || s[:4] != "Open" {
			t.Errorf("open request status %q is not an open status of request.json's enum %v", s, requests)
		}
	}
	types := enum("request.json", "properties", "requestType", "enum")
	for status, allowed := range RequestTypesByItemStatus {
		for _, ty := range allowed {
			if !slices.Contains(types, ty) {
				t.Errorf("request type %q (allowed for %q) is not in request.json's enum %v", ty, status, types)
			}
		}
	}
}
