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
// storage anonymizes; anonymizeMost how many one call of the patron's
// anonymizes at most (more remaining: ANONYMIZATION_INCOMPLETE, call
// again).
const (
	anonymizePage = 100
	anonymizeMost = 2000
)

// LoansAnonymized is what storage did with loans asked by id
// (schemas/anonymize-storage-loans-response.json).
type LoansAnonymized struct {
	Anonymized    []string `json:"anonymizedLoans"`
	NotAnonymized []struct {
		Reason  string   `json:"reason"`
		LoanIDs []string `json:"loanIds"`
	} `json:"notAnonymizedLoans"`
}

// PatronAnonymized is what anonymizing a patron's closed loans did
// (schemas/anonymize-loans-response.json).
type PatronAnonymized struct {
	Anonymized []string        `json:"anonymizedLoans"`
	Errors     []errhttp.Entry `json:"errors"`
}

// AnonymizePatron anonymizes the closed loans of the patron userID, at
// most anonymizeMost of them (more remaining: an error in the answer
// says so).
func (s *Service) AnonymizePatron(ctx context.Context, userID string) (PatronAnonymized, error) {
	out := PatronAnonymized{Anonymized: []string{}, Errors: []errhttp.Entry{}}
	// skip counts the closed loans a page found that storage did not
	// anonymize (one deleted meanwhile): the next page starts past them.
	skip := 0
	for len(out.Anonymized) < anonymizeMost {
		ids, more, err := s.closedLoansOf(ctx, userID, skip, min(anonymizePage, anonymizeMost-len(out.Anonymized)))
		if err != nil || len(ids) == 0 {
			return out, err
		}
		done, err := s.storage.AnonymizeLoans(ctx, ids)
		if err != nil {
			return out, err
		}
		out.Anonymized = append(out.Anonymized, done.Anonymized...)
		skip += len(ids) - len(done.Anonymized)
		if !more {
			return out, nil
		}
	}
	if ids, _, err := s.closedLoansOf(ctx, userID, skip, 1); err != nil || len(ids) == 0 {
		return out, err
	}
	out.Errors = append(out.Errors, errhttp.Entry{Code: schemas.CodeAnonymizationIncomplete,
		Message:    fmt.Sprintf("%d loans anonymized; the patron has more closed loans: call again", len(out.Anonymized)),
		Parameters: []errs.Parameter{{Key: "userId", Value: userID}}})
	return out, nil
}

// closedLoansOf is the ids of a page of the patron's closed loans that
// still name them, from offset, at most limit, and whether more were
// there.
func (s *Service) closedLoansOf(ctx context.Context, userID string, offset, limit int) ([]string, bool, error) {
	doc, err := s.storage.Loans(ctx, LoanFilter{UserID: userID, Status: schemas.LoanClosed, Offset: offset, Limit: limit})
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
	return ids, offset+len(ids) < page.TotalRecords, nil
}
