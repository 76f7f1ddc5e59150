package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/checkoutlock/circulation"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/reqlimit"
)

// Error codes of the HTTP layer itself.
const (
	codeRouteNotFound        = schemas.CodeRouteNotFound
	codeMethodNotAllowed     = schemas.CodeMethodNotAllowed
	codeBodyTooLarge         = schemas.CodeBodyTooLarge
	codeUnsupportedMediaType = schemas.CodeUnsupportedMedia
	codeMalformedJSON        = schemas.CodeMalformedJSON
)

// errorsJSON is the FOLIO error envelope (schemas/errors.json).
type errorsJSON struct {
	Errors []errorJSON `json:"errors"`
}

type errorJSON struct {
	Message    string                  `json:"message"`
	Code       string                  `json:"code"`
	Parameters []circulation.Parameter `json:"parameters,omitempty"`
}

var statusOf = map[circulation.Kind]int{
	circulation.KindBadRequest:   http.StatusBadRequest,
	circulation.KindInvalid:      http.StatusUnprocessableEntity,
	circulation.KindNotFound:     http.StatusNotFound,
	circulation.KindConflict:     http.StatusConflict,
	circulation.KindUnavailable:  http.StatusServiceUnavailable,
	circulation.KindUnauthorized: http.StatusUnauthorized,
	circulation.KindForbidden:    http.StatusForbidden,
	circulation.KindInternal:     http.StatusInternalServerError,
}

// httpError is an error of the HTTP layer with its own status.
type httpError = reqlimit.Refusal

// invalidBody is a request body that broke its schema.
type invalidBody struct{ *schemas.ValidationError }

// handleError is echo's HTTPErrorHandler: the one place where an error
// becomes a status and an envelope, and where it is logged.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	status, body, retryAfter := toResponse(err, c)
	ctx := c.Request().Context()
	switch {
	case status >= 500 && status != http.StatusServiceUnavailable:
		s.logger.ErrorContext(ctx, "request failed", slog.Int("status", status), slog.Any("error", err))
	case status == http.StatusServiceUnavailable:
		s.logger.WarnContext(ctx, "request failed", slog.Int("status", status), slog.Any("error", err))
	default:
		s.logger.DebugContext(ctx, "request refused", slog.Int("status", status), slog.String("code", body.Errors[0].Code), slog.Any("error", err))
	}
	if status == http.StatusUnauthorized {
		c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="circulation"`)
	}
	if retryAfter > 0 {
		c.Response().Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(retryAfter.Seconds()))))
	}
	if err := c.JSON(status, body); err != nil {
		s.logger.WarnContext(ctx, "write error response", slog.Any("error", err))
	}
}

func toResponse(err error, c echo.Context) (int, errorsJSON, time.Duration) {
	var refusal *circulation.Refusal
	if errors.As(err, &refusal) {
		body := errorsJSON{}
		for _, e := range refusal.Errors {
			body.Errors = append(body.Errors, errorJSON{Message: e.Message, Code: e.Code, Parameters: e.Parameters})
		}
		return http.StatusUnprocessableEntity, body, 0
	}
	var ib *invalidBody
	if errors.As(err, &ib) {
		body := errorsJSON{}
		for _, v := range ib.Violations {
			e := errorJSON{Message: v.Message, Code: circulation.CodeValidation}
			if v.Field != "" {
				e.Message = v.Field + ": " + v.Message
				e.Parameters = []circulation.Parameter{{Key: v.Field, Value: v.Value}}
			}
			body.Errors = append(body.Errors, e)
		}
		if ib.More > 0 {
			body.Errors = append(body.Errors, errorJSON{Code: circulation.CodeValidation,
				Message: fmt.Sprintf("… and %d more violations (at most %d are listed)", ib.More, schemas.MaxViolations)})
		}
		return http.StatusUnprocessableEntity, body, 0
	}
	if de, ok := circulation.AsError(err); ok {
		status, known := statusOf[de.Kind]
		if !known {
			status = http.StatusInternalServerError
		}
		if status == http.StatusInternalServerError {
			// The cause stays in the log; the client hears no internals.
			return status, envelope("Internal server error", circulation.CodeInternal), 0
		}
		return status, envelope(de.Message, de.Code, de.Parameters...), de.RetryAfter
	}
	if f, ok := authFailure(err); ok {
		e := envelope(f.Message, f.Code)
		if f.Permission != "" {
			e.Errors[0].Parameters = []circulation.Parameter{{Key: "permission", Value: f.Permission}}
		}
		return f.Status, e, 0
	}
	var he *httpError
	if errors.As(err, &he) {
		return he.Status, envelope(he.Message, he.Code), 0
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		e := reqlimit.BodyTooLarge(mbe.Limit)
		return e.Status, envelope(e.Message, e.Code), 0
	}
	var echoErr *echo.HTTPError
	if errors.As(err, &echoErr) {
		req := c.Request()
		switch echoErr.Code {
		case http.StatusNotFound:
			return http.StatusNotFound, envelope(fmt.Sprintf("No route for %s %s", req.Method, req.URL.Path), codeRouteNotFound), 0
		case http.StatusMethodNotAllowed:
			return http.StatusMethodNotAllowed, envelope(fmt.Sprintf("Method %s is not allowed on %s", req.Method, req.URL.Path), codeMethodNotAllowed), 0
		}
		if echoErr.Code >= 400 && echoErr.Code < 500 {
			return echoErr.Code, envelope(http.StatusText(echoErr.Code), "HTTP_"+strconv.Itoa(echoErr.Code)), 0
		}
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return http.StatusServiceUnavailable, envelope("The request took too long and was cancelled; nothing was checked out", "REQUEST_TIMEOUT"), 0
	}
	return http.StatusInternalServerError, envelope("Internal server error", circulation.CodeInternal), 0
}

func envelope(message, code string, params ...circulation.Parameter) errorsJSON {
	return errorsJSON{Errors: []errorJSON{{Message: message, Code: code, Parameters: params}}}
}

// mimeMergePatch is RFC 7386's media type, which PATCH accepts besides
// application/json.
const mimeMergePatch = "application/merge-patch+json"

// bind reads the JSON body, validates it against the named schema and
// decodes it into dst. The body must be application/json, or one of also.
func (s *Server) bind(c echo.Context, schema string, dst any, also ...string) error {
	req := c.Request()
	mediaType, _, err := mime.ParseMediaType(req.Header.Get(echo.HeaderContentType))
	if err != nil || (mediaType != echo.MIMEApplicationJSON && !slices.Contains(also, mediaType)) {
		return &httpError{Status: http.StatusUnsupportedMediaType, Code: codeUnsupportedMediaType,
			Message: "Content-Type must be " + strings.Join(append([]string{echo.MIMEApplicationJSON}, also...), " or ")}
	}
	body, err := reqlimit.Bytes(req)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return reqlimit.BodyTooLarge(mbe.Limit)
		}
		return &httpError{Status: http.StatusBadRequest, Code: codeMalformedJSON, Message: "Could not read the request body"}
	}
	if len(body) == 0 {
		return &httpError{Status: http.StatusBadRequest, Code: codeMalformedJSON, Message: "Request body is empty; a JSON object is required"}
	}
	doc, err := schemas.Decode(body)
	if err != nil {
		return &httpError{Status: http.StatusBadRequest, Code: codeMalformedJSON, Message: "Malformed JSON: " + err.Error()}
	}
	if err := s.schemas.Validate(schema, doc); err != nil {
		var verr *schemas.ValidationError
		if errors.As(err, &verr) {
			return &invalidBody{verr}
		}
		return err
	}
	if err := json.Unmarshal(body, dst); err != nil {
		return circulation.Errorf(circulation.KindInvalid, circulation.CodeValidation, "The body does not fit the request")
	}
	return nil
}
