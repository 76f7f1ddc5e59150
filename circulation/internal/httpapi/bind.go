package httpapi

import (
	"encoding/json"
	"errors"
	"mime"
	"net/http"
	"slices"
	"strings"

	"github.com/checkoutlock/schemas/errs"

	"github.com/labstack/echo/v4"

	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/reqlimit"
)

// mimeMergePatch is RFC 7386's media type, which PATCH accepts besides
// application/json.
const mimeMergePatch = "application/merge-patch+json"

// bind reads the JSON body, validates it against the named schema and
// decodes it into dst. The body must be application/json, or one of also.
func (s *Server) bind(c echo.Context, schema string, dst any, also ...string) error {
	req := c.Request()
	mediaType, _, err := mime.ParseMediaType(req.Header.Get(echo.HeaderContentType))
	if err != nil || (mediaType != echo.MIMEApplicationJSON && !slices.Contains(also, mediaType)) {
		return errs.Errorf(errs.KindUnsupportedMedia, schemas.CodeUnsupportedMedia, "Content-Type must be %s", strings.Join(append([]string{echo.MIMEApplicationJSON}, also...), " or "))
	}
	body, err := reqlimit.Bytes(req)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return reqlimit.BodyTooLarge(mbe.Limit)
		}
		return errs.Errorf(errs.KindBadRequest, schemas.CodeMalformedJSON, "Could not read the request body")
	}
	if len(body) == 0 {
		return errs.Errorf(errs.KindBadRequest, schemas.CodeMalformedJSON, "Request body is empty; a JSON object is required")
	}
	doc, err := schemas.Decode(body)
	if err != nil {
		return errs.Errorf(errs.KindBadRequest, schemas.CodeMalformedJSON, "Malformed JSON: %v", err)
	}
	if err := s.schemas.Validate(schema, doc); err != nil {
		var verr *schemas.ValidationError
		if errors.As(err, &verr) {
			return verr
		}
		return err
	}
	if err := json.Unmarshal(body, dst); err != nil {
		return errs.Errorf(errs.KindInvalid, schemas.CodeValidation, "The body does not fit the request")
	}
	return nil
}
