package serverkit

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"slices"
	"strings"

	"github.com/checkoutlock/schemas/text"

	"github.com/labstack/echo/v4"

	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
)

// Body is the request's body, read whole by the admission, and the
// document decoded from it, valid against the JSON Schema the permission
// table names for the route (schemas.Route's Request: the one home of a
// route's request schema, which its OpenAPI description says too). The
// body must be application/json, or one of the media types also names.
// On FOLIO's routes (Route.Lenient) the members the schema does not name
// are removed from both, and logged (ignored_members), as FOLIO's
// mod-circulation ignores them. Errors: 415 for a body that is not JSON,
// 413 for one over the limit, 400 for an empty body or malformed JSON,
// 422 listing every schema violation.
func (s *Server) Body(c echo.Context, also ...string) ([]byte, any, error) {
	req := c.Request()
	route, _ := schemas.RouteFor(s.svc.Name, req.Method, c.Path())
	schema := route.Request
	if schema == "" {
		// A handler that reads a body its route does not declare: a
		// programming error, which the first test of the route finds.
		return nil, nil, fmt.Errorf("serverkit: %s %s reads a request body, but the permission table names no schema for it", req.Method, c.Path())
	}
	if !isJSON(req.Header.Get(echo.HeaderContentType), also) {
		return nil, nil, errs.Errorf(errs.KindUnsupportedMedia, schemas.CodeUnsupportedMedia, "Content-Type must be %s",
			strings.Join(append([]string{echo.MIMEApplicationJSON}, also...), " or "))
	}
	body, err := Bytes(req)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, nil, BodyTooLarge(mbe.Limit)
		}
		return nil, nil, errs.Errorf(errs.KindBadRequest, schemas.CodeMalformedJSON, "Could not read the request body")
	}
	if len(body) == 0 {
		return nil, nil, errs.Errorf(errs.KindBadRequest, schemas.CodeMalformedJSON, "Request body is empty; a JSON object is required")
	}
	doc, err := schemas.Decode(body)
	if err != nil {
		return nil, nil, errs.Errorf(errs.KindBadRequest, schemas.CodeMalformedJSON, "Malformed JSON: %v", err)
	}
	if !route.Lenient {
		err = s.schemas.Validate(schema, doc)
	} else if ignored, verr := s.schemas.ValidateTaking(schema, doc); verr != nil {
		err = verr
	} else if len(ignored) > 0 {
		// What the handler reads is what was taken; the log names the
		// first few ignored.
		named := ignored[:min(len(ignored), loggedIgnored)]
		for i, name := range named {
			named[i] = text.Echoed(name)
		}
		Log(c, slog.Any("ignored_members", named), slog.Int("ignored_count", len(ignored)))
		if body, err = json.Marshal(doc); err != nil {
			return nil, nil, err
		}
	}
	if err != nil {
		var verr *schemas.ValidationError
		if errors.As(err, &verr) {
			return nil, nil, verr
		}
		return nil, nil, err
	}
	return body, doc, nil
}

// loggedIgnored bounds the members ignored that a request's log line names.
const loggedIgnored = 10

// isJSON says whether a Content-Type is JSON's media type, or one of
// also, with any parameters; the type as clients send it most is
// recognised without parsing.
func isJSON(contentType string, also []string) bool {
	if contentType == echo.MIMEApplicationJSON {
		return true
	}
	mediaType, _, err := mime.ParseMediaType(contentType)
	return err == nil && (mediaType == echo.MIMEApplicationJSON || slices.Contains(also, mediaType))
}

// Unmarshal decodes a body Body took into dst with its member names
// matched exactly: a member whose name matches a field only when folded
// ("ſtatus", "Status" for status) is 422 naming it, never read as that
// field. doc is the body as Body decoded it (nil: parsed here). Other
// errors are encoding/json's.
func Unmarshal(body []byte, doc, dst any) error {
	var err error
	if doc == nil {
		err = schemas.UnmarshalExact(body, dst)
	} else if err = schemas.ExactNames(doc, dst); err == nil {
		err = json.Unmarshal(body, dst)
	}
	var fe *schemas.FoldedNameError
	if errors.As(err, &fe) {
		name := text.Echoed(fe.Name)
		return errs.Errorf(errs.KindInvalid, schemas.CodeValidation, "%s: member names are matched exactly, and %q is not %q",
			name, name, fe.Field).With(name, "")
	}
	return err
}
