package notices

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/cbroglie/mustache"

	"github.com/checkoutlock/schemas"
)

// Mail is a notice as sent: to the patron's address, with the template's
// subject and body rendered.
type Mail struct {
	To, Subject, Body string
	// HTML says the body is text/html (else text/plain).
	HTML bool
	// MessageID is the mail's Message-ID: the same on every try of one
	// send of one notice.
	MessageID string
}

// template is what the sender reads of a template.
type template struct {
	OutputFormats      []string `json:"outputFormats"`
	LocalizedTemplates map[string]struct {
		Header string `json:"header"`
		Body   string `json:"body"`
	} `json:"localizedTemplates"`
}

// render writes the mail of template doc (nil when it does not exist)
// from data, FOLIO's tokens: the English text, else the first language's
// (by name).
func render(doc json.RawMessage, data map[string]any) (Mail, error) {
	if doc == nil {
		return Mail{}, errors.New("the notice's template does not exist")
	}
	var t template
	if err := json.Unmarshal(doc, &t); err != nil {
		return Mail{}, err
	}
	text, ok := t.LocalizedTemplates["en"]
	if !ok {
		first := ""
		for lang := range t.LocalizedTemplates {
			if first == "" || lang < first {
				first = lang
			}
		}
		text = t.LocalizedTemplates[first]
	}
	html := len(t.OutputFormats) > 0 && t.OutputFormats[0] == "text/html"
	subject, err := mustache.RenderRaw(text.Header, true, data)
	if err != nil {
		return Mail{}, fmt.Errorf("the template's header: %w", err)
	}
	var body string
	if html {
		body, err = mustache.Render(text.Body, data)
	} else {
		body, err = mustache.RenderRaw(text.Body, true, data)
	}
	if err != nil {
		return Mail{}, fmt.Errorf("the template's body: %w", err)
	}
	return Mail{Subject: subject, Body: body, HTML: html}, nil
}

// dateLayout is how a notice writes a date for a person: in the tenant's
// zone, to the minute, the zone named.
const dateLayout = "2006-01-02 15:04 MST"

// tokens are FOLIO's notice tokens of a patron, and of the loan or the
// request and its item (any may be nil), dates in zone.
func tokens(zone *time.Location, patron, loan, request, item json.RawMessage, materialType, loanType, pickup string) map[string]any {
	var p, l, r, i map[string]any
	_ = json.Unmarshal(patron, &p)
	_ = json.Unmarshal(loan, &l)
	_ = json.Unmarshal(request, &r)
	_ = json.Unmarshal(item, &i)
	personal, _ := p["personal"].(map[string]any)
	date := func(doc map[string]any, field string) string {
		s, _ := doc[field].(string)
		t, err := schemas.ParseDateTime(s)
		if err != nil {
			return s
		}
		return t.In(zone).Format(dateLayout)
	}
	str := func(doc map[string]any, field string) string {
		s, _ := doc[field].(string)
		return s
	}
	out := map[string]any{
		"user": map[string]any{"firstName": str(personal, "firstName"), "lastName": str(personal, "lastName"),
			"middleName": str(personal, "middleName"), "preferredFirstName": str(personal, "preferredFirstName"),
			"barcode": str(p, "barcode"), "email": str(personal, "email")},
	}
	if i != nil {
		callNumber := str(i, "itemLevelCallNumber")
		if callNumber == "" {
			callNumber = str(i, "callNumber")
		}
		out["item"] = map[string]any{"title": str(i, "title"), "barcode": str(i, "barcode"), "callNumber": callNumber,
			"materialType": materialType, "loanType": loanType}
	}
	if l != nil {
		renewals := 0
		if n, ok := l["renewalCount"].(float64); ok {
			renewals = int(n)
		}
		out["loan"] = map[string]any{"initialBorrowDate": date(l, "loanDate"), "dueDate": date(l, "dueDate"),
			"checkedInDate": date(l, "returnDate"), "numberOfRenewalsTaken": strconv.Itoa(renewals)}
	}
	if r != nil {
		out["request"] = map[string]any{"requestType": str(r, "requestType"), "requestDate": date(r, "requestDate"),
			"requestExpirationDate": date(r, "requestExpirationDate"), "holdShelfExpirationDate": date(r, "holdShelfExpirationDate"),
			"servicePointPickup": pickup, "cancellationAdditionalInformation": str(r, "cancellationAdditionalInformation")}
	}
	return out
}

// chargeTokens are FOLIO's tokens of a fee/fine charged (feeCharge.*):
// its owner, type, payment status, amount and what remains of it (two
// places, exact), and when it was charged, in zone.
func chargeTokens(zone *time.Location, account json.RawMessage) map[string]any {
	var a struct {
		FeeFineOwner  string      `json:"feeFineOwner"`
		FeeFineType   string      `json:"feeFineType"`
		Amount        json.Number `json:"amount"`
		Remaining     json.Number `json:"remaining"`
		PaymentStatus struct {
			Name string `json:"name"`
		} `json:"paymentStatus"`
		Metadata struct {
			CreatedDate string `json:"createdDate"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(account, &a)
	amount := func(n json.Number) string {
		if s, refused := schemas.ParseAmount(n.String()); refused == "" {
			return s
		}
		return "0.00"
	}
	charged := a.Metadata.CreatedDate
	if t, err := schemas.ParseDateTime(charged); err == nil {
		charged = t.In(zone).Format(dateLayout)
	}
	return map[string]any{"owner": a.FeeFineOwner, "type": a.FeeFineType, "paymentStatus": a.PaymentStatus.Name,
		"amount": amount(a.Amount), "remainingAmount": amount(a.Remaining), "chargeDateTime": charged}
}
