package storage

import "context"

// Anonymization is what anonymizing loans asked by id did (FOLIO's
// anonymize-storage-loans response): the loans that forgot their
// borrower, and each of the others with why not.
type Anonymization struct {
	Anonymized    []string        `json:"anonymizedLoans"`
	NotAnonymized []NotAnonymized `json:"notAnonymizedLoans"`
}

// NotAnonymized is loans a call did not anonymize, and why (one of the
// reasons below).
type NotAnonymized struct {
	Reason  string   `json:"reason"`
	LoanIDs []string `json:"loanIds"`
}

// Why a loan asked by id was not anonymized.
const (
	// NotAnonymizedOpen: the loan is open (or claimed returned, declared
	// lost): it keeps its borrower until it closes.
	NotAnonymizedOpen = "loanIsOpen"
	// NotAnonymizedBefore: the loan was anonymized before, by another
	// call or the tenant's settings.
	NotAnonymizedBefore = "alreadyAnonymized"
	// NotAnonymizedNotFound: the tenant has no loan of that id.
	NotAnonymizedNotFound = "loanNotFound"
)

// LoanAnonymizer anonymizes closed loans on demand.
type LoanAnonymizer interface {
	// AnonymizeLoans anonymizes those of the loans ids that are closed and
	// still name their borrower, judged under each loan's row lock (a
	// loan being checked in is judged after its check-in), and answers
	// what it did with each.
	AnonymizeLoans(ctx context.Context, t Tenant, ids []string) (Anonymization, error)
}
