package circulation

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
	"github.com/checkoutlock/schemas/errs/errhttp"
)

// A patron's closed loans forget their borrower on demand (FOLIO's
// POST /loan-anonymization/by-user/{userId}): circulation finds them a
// page at a time and storage anonymizes each page under the loans' row
// locks, so a loan being checked in is judged after its check-in and an
// open one never.

// anonymizePage is how many of a patron's closed loans one call to
// storage anonymizes (fewer when storage's pages cannot hold that many
// loans); anonymizeMost how many one call of the patron's anonymizes at
// most (more remaining: ANONYMIZATION_INCOMPLETE, call again), in at most
// anonymizeRounds pages.
const (
	anonymizePage   = 100
	anonymizeMost   = 2000
	anonymizeRounds = 2 * anonymizeMost / anonymizePage
)

// LoansAnonymized is what circulation reads of storage's answer to loans
// asked by id (schemas/anonymize-storage-loans-response.json): the loans
// it anonymized. The others need no reading: each has left the patron's
// closed loans, whatever its reason.
type LoansAnonymized struct {
	Anonymized []string `json:"anonymizedLoans"`
}

// PatronAnonymized is what anonymizing a patron's closed loans did
// (schemas/anonymize-loans-response.json).
type PatronAnonymized struct {
	Anonymized []string        `json:"anonymizedLoans"`
	Errors     []errhttp.Entry `json:"errors"`
}

// AnonymizePatron anonymizes the closed loans of the patron userID, at
// most anonymizeMost of them (more remaining: an error in the answer
// says so). Every loan a page lists leaves the list (anonymized by this
// call or another, or deleted), so each page is read from the start. A
// failure after some pages answers what they did, with the failure among
// the errors; before any, it is the call's.
func (s *Service) AnonymizePatron(ctx context.Context, userID string) (PatronAnonymized, error) {
	out := PatronAnonymized{Anonymized: []string{}, Errors: []errhttp.Entry{}}
	limit := anonymizePage
	for round := 0; round < anonymizeRounds && len(out.Anonymized) < anonymizeMost; round++ {
		ids, more, err := s.closedLoansOf(ctx, userID, &limit)
		if err == nil && len(ids) > 0 {
			var done LoansAnonymized
			done, err = s.storage.AnonymizeLoans(ctx, ids)
			out.Anonymized = append(out.Anonymized, done.Anonymized...)
		}
		switch {
		case err != nil:
			return out.failed(err)
		case !more:
			return out, nil
		}
	}
	one := 1
	if ids, _, err := s.closedLoansOf(ctx, userID, &one); err != nil || len(ids) == 0 {
		return out, err
	}
	out.Errors = append(out.Errors, errhttp.Entry{Code: schemas.CodeAnonymizationIncomplete,
		Message:    fmt.Sprintf("%d loans anonymized; the patron has more closed loans: call again", len(out.Anonymized)),
		Parameters: []errs.Parameter{{Key: "userId", Value: userID}}})
	return out, nil
}

// failed is what a call that failed with err after anonymizing out
// answers: err alone when it anonymized nothing, else out with err among
// its errors.
func (out PatronAnonymized) failed(err error) (PatronAnonymized, error) {
	if len(out.Anonymized) == 0 {
		return out, err
	}
	e, ok := errs.As(err)
	if !ok {
		e = errs.Errorf(errs.KindInternal, schemas.CodeInternal, "anonymizing failed").Because(err)
	}
	out.Errors = append(out.Errors, errhttp.EntryOf(e))
	return out, nil
}

// closedLoansOf is the ids of the first of the patron's closed loans that
// still name them, at most *limit, and whether there were more: a page
// storage could not hold is asked again at half the limit, which then
// stays.
func (s *Service) closedLoansOf(ctx context.Context, userID string, limit *int) ([]string, bool, error) {
	doc, err := s.storage.Loans(ctx, LoanFilter{UserID: userID, Status: schemas.LoanClosed, Limit: *limit})
	for errs.IsCode(err, schemas.CodePageTooLarge) && *limit > 1 {
		*limit /= 2
		doc, err = s.storage.Loans(ctx, LoanFilter{UserID: userID, Status: schemas.LoanClosed, Limit: *limit})
	}
	if err != nil {
		return nil, false, err
	}
	var page struct {
		Loans []struct {
			ID string `json:"id"`
		} `json:"loans"`
		TotalRecords int `json:"totalRecords"`
	}
	if err := json.Unmarshal(doc, &page); err != nil {
		return nil, false, errs.Errorf(errs.KindInternal, schemas.CodeInternal, "storage answered a page of loans that is not one").Because(err)
	}
	ids := make([]string, len(page.Loans))
	for i, l := range page.Loans {
		ids[i] = l.ID
	}
	return ids, len(ids) < page.TotalRecords, nil
}
