package httpapi

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/reqlimit"
)

// Error codes of the HTTP layer itself; the domain's are in package storage.
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
	Message    string              `json:"message"`
	Code       string              `json:"code"`
	Parameters []storage.Parameter `json:"parameters,omitempty"`
}

// statusOf maps each kind of domain error to its HTTP status. A held lock is
// 503, as FOLIO answers it, with Retry-After.
var statusOf = map[storage.Kind]int{
	storage.KindBadRequest:  http.StatusBadRequest,
	storage.KindInvalid:     http.StatusUnprocessableEntity,
	storage.KindNotFound:    http.StatusNotFound,
	storage.KindConflict:    http.StatusConflict,
	storage.KindLocked:      http.StatusServiceUnavailable,
	storage.KindForbidden:   http.StatusForbidden,
	storage.KindUnavailable: http.StatusServiceUnavailable,
	storage.KindInternal:    http.StatusInternalServerError,
}

// invalidBody is a request body that broke its schema: one envelope entry per
// violation.
type invalidBody struct{ *schemas.ValidationError }

// handleError is echo's HTTPErrorHandler: the one place where an error
// becomes a status and an envelope, and where it is logged.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	status, body, retryAfter := s.toResponse(err, c)
	ctx := c.Request().Context()
	switch {
	case status >= 500 && status != http.StatusServiceUnavailable:
		s.logger.ErrorContext(ctx, "request failed", slog.Int("status", status), slog.Any("error", err))
	case status == http.StatusServiceUnavailable && body.Errors[0].Code != storage.CodeLockHeld:
		// The database is down or slow: operators must see it at info.
		s.logger.WarnContext(ctx, "request failed", slog.Int("status", status), slog.Any("error", err))
	default:
		s.logger.DebugContext(ctx, "request refused", slog.Int("status", status), slog.String("code", body.Errors[0].Code), slog.Any("error", err))
	}
	if status == http.StatusUnauthorized {
		c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="circulation-storage"`)
	}
	if retryAfter > 0 {
		// Retry-After is whole seconds; round up so a client never comes back early.
		c.Response().Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(retryAfter.Seconds()))))
	}
	if err := c.JSON(status, body); err != nil {
		s.logger.WarnContext(ctx, "write error response", slog.Any("error", err))
	}
}

func (s *Server) toResponse(err error, c echo.Context) (int, errorsJSON, time.Duration) {
	var ib *invalidBody
	if errors.As(err, &ib) {
		body := errorsJSON{}
		for _, v := range ib.Violations {
			e := errorJSON{Message: v.Message, Code: storage.CodeValidation}
			if v.Field != "" {
				e.Message = v.Field + ": " + v.Message
				e.Parameters = []storage.Parameter{{Key: v.Field, Value: v.Value}}
			}
			body.Errors = append(body.Errors, e)
		}
		if ib.More > 0 {
			body.Errors = append(body.Errors, errorJSON{Code: storage.CodeValidation,
				Message: fmt.Sprintf("… and %d more violations (at most %d are listed)", ib.More, schemas.MaxViolations)})
		}
		return http.StatusUnprocessableEntity, body, 0
	}
	if de, ok := storage.AsError(err); ok {
		status, known := statusOf[de.Kind]
		if !known {
			status = http.StatusInternalServerError
		}
		return status, envelope(de.Message, de.Code, de.Parameters...), de.RetryAfter
	}
	if f, ok := authFailure(err); ok {
		e := envelope(f.Message, f.Code)
		if f.Permission != "" {
			e.Errors[0].Parameters = []storage.Parameter{{Key: "permission", Value: f.Permission}}
		}
		return f.Status, e, 0
	}
	var he2 *httpError
	if errors.As(err, &he2) {
		return errResponse(he2)
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return errResponse(reqlimit.BodyTooLarge(mbe.Limit))
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		req := c.Request()
		switch he.Code {
		case http.StatusNotFound:
			return http.StatusNotFound, envelope(fmt.Sprintf("No route for %s %s", req.Method, req.URL.Path), codeRouteNotFound), 0
		case http.StatusMethodNotAllowed:
			return http.StatusMethodNotAllowed, envelope(fmt.Sprintf("Method %s is not allowed on %s", req.Method, req.URL.Path), codeMethodNotAllowed), 0
		case http.StatusRequestEntityTooLarge:
			return errResponse(reqlimit.BodyTooLarge(s.cfg.MaxBodyBytes))
		}
		if he.Code >= 400 && he.Code < 500 {
			return he.Code, envelope(http.StatusText(he.Code), "HTTP_"+strconv.Itoa(he.Code)), 0
		}
	}
	return http.StatusInternalServerError, envelope("Internal server error", storage.CodeInternal), 0
}

func envelope(message, code string, params ...storage.Parameter) errorsJSON {
	return errorsJSON{Errors: []errorJSON{{Message: message, Code: code, Parameters: params}}}
}

// httpError is an error of the HTTP layer with its own status.
type httpError = reqlimit.Refusal

func errResponse(e *httpError) (int, errorsJSON, time.Duration) {
	return e.Status, envelope(e.Message, e.Code), 0
}
