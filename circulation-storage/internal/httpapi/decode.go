package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/checkoutlock/schemas/text"
	"github.com/checkoutlock/serverkit"

	"github.com/checkoutlock/schemas/errs"

	"github.com/labstack/echo/v4"

	"github.com/checkoutlock/schemas"
)

// bind reads the JSON body, validates it against the route's request schema
// and decodes it into dst (serverkit's Body). Errors: 415 for a body that is not JSON,
// 413 for one over the limit, 400 for malformed JSON, 422 listing every
// schema violation, and 422 for a value the schema accepts and the record
// cannot hold.
func (s *Server) bind(c echo.Context, dst any) error {
	_, err := s.bindDoc(c, dst)
	return err
}

// bindDoc is bind, answering also the body as decoded, for a caller that
// reads more of it.
func (s *Server) bindDoc(c echo.Context, dst any) (any, error) {
	body, doc, err := s.Body(c)
	if err != nil {
		return nil, err
	}
	if err := serverkit.Unmarshal(body, doc, dst); err != nil {
		if e, ok := errs.As(err); ok {
			return nil, e
		}
		// The schema accepted what the Go type cannot hold (a number out of
		// range, say): still the client's mistake, told without Go's words.
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, errs.Errorf(errs.KindInvalid, schemas.CodeValidation, "%s: value %s is out of range", te.Field, te.Value).
				With(te.Field, te.Value)
		}
		return nil, errs.Errorf(errs.KindInvalid, schemas.CodeValidation, "The body does not fit the record")
	}
	return doc, nil
}

// pathID validates the :id path parameter as a UUID; what is not one is a
// 400 ("Invalid lock id"), as FOLIO answers it.
func (s *Server) pathID(c echo.Context, what string) (string, error) {
	id := c.Param("id")
	if strings.Contains(id, "/") {
		// echo puts the rest of the path into the last parameter: a path
		// below an id is a route that does not exist.
		return "", echo.ErrNotFound
	}
	if unescaped, err := url.PathUnescape(id); err == nil {
		id = unescaped
	}
	if !s.Schemas().ValidUUID(id) {
		shown := text.Echoed(id)
		return "", errs.Errorf(errs.KindBadRequest, schemas.CodeInvalidID, "Invalid %s id", what).With("id", shown)
	}
	return strings.ToLower(id), nil
}

// queryParam returns the single value of a query parameter; a parameter given
// more than once is refused rather than guessed at.
func queryParam(c echo.Context, name string) (string, bool, error) {
	values, ok := c.QueryParams()[name]
	if !ok {
		return "", false, nil
	}
	if len(values) > 1 {
		return "", false, invalidParam(name, values[0], "must be given at most once")
	}
	return values[0], true, nil
}

// queryInt reads an integer query parameter within [min, max].
func queryInt(c echo.Context, name string, def, min, max int) (int, error) {
	raw, ok, err := queryParam(c, name)
	if err != nil || !ok {
		return def, err
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < min || n > max {
		return 0, invalidParam(name, raw, fmt.Sprintf("must be an integer from %d to %d", min, max))
	}
	return n, nil
}

// queryUUID reads an optional UUID query parameter.
func (s *Server) queryUUID(c echo.Context, name string) (string, error) {
	raw, ok, err := queryParam(c, name)
	if err != nil || !ok {
		return "", err
	}
	if !s.Schemas().ValidUUID(raw) {
		return "", invalidParam(name, raw, "must be a UUID")
	}
	// UUIDs compare in canonical lowercase everywhere.
	return strings.ToLower(raw), nil
}

// invalidParam is FOLIO's 422 for a query parameter it cannot use.
func invalidParam(name, value, rule string) *errs.Error {
	return errs.Errorf(errs.KindInvalid, schemas.CodeInvalidParameter, "%s %s", name, rule).With(name, text.Echoed(value))
}

// truncateText is a client's value as an answer repeats it (schemas.Echoed).
func truncateText(s string) string { return text.Echoed(s) }
