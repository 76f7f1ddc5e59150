package schemas

import (
	"fmt"

	"golang.org/x/text/unicode/norm"
)

// NormalUsername is a username as accounts compare it: Unicode NFKC, so
// that a name typed with full-width letters, a ligature or a composed
// accent finds the account written with their plain forms. Case is
// compared apart (storage keeps usernames in lower case); account.json
// refuses spaces of every kind and invisible and control characters.
func NormalUsername(username string) string { return norm.NFKC.String(username) }

// CheckUsername refuses a username that is not written in its normal form
// (NormalUsername): two accounts whose names differ only by how the same
// letters are encoded would be two accounts a person cannot tell apart.
func CheckUsername(username string) error {
	if n := NormalUsername(username); n != username {
		return fmt.Errorf("username: %q is not in Unicode normal form NFKC; write it as %q", username, n)
	}
	return nil
}
