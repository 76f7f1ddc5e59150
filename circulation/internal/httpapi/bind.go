package httpapi

import (
	"github.com/labstack/echo/v4"

	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
	"github.com/checkoutlock/serverkit"
)

// mimeMergePatch is RFC 7386's media type, which PATCH accepts besides
// application/json.
const mimeMergePatch = "application/merge-patch+json"

// bind reads the JSON body, validates it against the route's request
// schema and decodes it into dst (serverkit's Body). The body must be
// application/json, or one of also.
func (s *Server) bind(c echo.Context, dst any, also ...string) error {
	body, doc, err := s.Body(c, also...)
	if err != nil {
		return err
	}
	if err := serverkit.Unmarshal(body, doc, dst); err != nil {
		if e, ok := errs.As(err); ok {
			return e
		}
		return errs.Errorf(errs.KindInvalid, schemas.CodeValidation, "The body does not fit the request")
	}
	return nil
}
