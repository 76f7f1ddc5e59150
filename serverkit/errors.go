package serverkit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
	"github.com/checkoutlock/schemas/errs/errhttp"
)

// response is what err answers over HTTP: its status (errhttp's map of
// its kind), its envelope and, when positive, how long the client should
// wait before trying again. Anything that is not one of the errors it
// knows is a bug: 500, with no internals in the body. It answers the
// outermost of them (errs.Outermost), never an error's cause. maxBody is
// the body limit a 413 names.
func response(err error, req *http.Request, maxBody int64) (int, errhttp.Envelope, time.Duration) {
	switch answer := errs.Outermost(err).(type) {
	case *errs.Refusal:
		body := errhttp.Envelope{}
		for _, e := range answer.Errors {
			body.Errors = append(body.Errors, errhttp.EntryOf(e))
		}
		return http.StatusUnprocessableEntity, body, 0
	case *schemas.ValidationError:
		return http.StatusUnprocessableEntity, violations(answer), 0
	case *errs.Error:
		status := errhttp.Status(answer.Kind)
		if status == http.StatusInternalServerError {
			// The cause stays in the log; the client hears no internals.
			return status, errhttp.Single("Internal server error", schemas.CodeInternal), 0
		}
		return status, errhttp.Envelope{Errors: []errhttp.Entry{errhttp.EntryOf(answer)}}, answer.RetryAfter
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		e := BodyTooLarge(mbe.Limit)
		return errhttp.Status(e.Kind), errhttp.Single(e.Message, e.Code), 0
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		switch he.Code {
		case http.StatusNotFound:
			return http.StatusNotFound, errhttp.Single(fmt.Sprintf("No route for %s %s", req.Method, req.URL.Path), schemas.CodeRouteNotFound), 0
		case http.StatusMethodNotAllowed:
			return http.StatusMethodNotAllowed, errhttp.Single(fmt.Sprintf("Method %s is not allowed on %s", req.Method, req.URL.Path),
				schemas.CodeMethodNotAllowed), 0
		case http.StatusRequestEntityTooLarge:
			e := BodyTooLarge(maxBody)
			return errhttp.Status(e.Kind), errhttp.Single(e.Message, e.Code), 0
		}
		if he.Code >= 400 && he.Code < 500 {
			return he.Code, errhttp.Single(http.StatusText(he.Code), "HTTP_"+strconv.Itoa(he.Code)), 0
		}
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return http.StatusServiceUnavailable, errhttp.Single("The request took too long and was cancelled; nothing was changed", schemas.CodeTimeout), 0
	}
	return http.StatusInternalServerError, errhttp.Single("Internal server error", schemas.CodeInternal), 0
}

// violations is a body that broke its schema: one entry per violation.
func violations(verr *schemas.ValidationError) errhttp.Envelope {
	body := errhttp.Envelope{}
	for _, v := range verr.Violations {
		e := errhttp.Entry{Message: v.Message, Code: schemas.CodeValidation}
		if v.Field != "" {
			e.Message = v.Field + " " + v.Message
			e.Parameters = []errs.Parameter{{Key: v.Field, Value: v.Value}}
		}
		body.Errors = append(body.Errors, e)
	}
	if verr.More > 0 {
		body.Errors = append(body.Errors, errhttp.Entry{Code: schemas.CodeValidation,
			Message: fmt.Sprintf("… and %d more violations (at most %d are listed)", verr.More, schemas.MaxViolations)})
	}
	return body
}

// errorHandler is both services' echo HTTPErrorHandler: the one place
// where an error becomes a status and an envelope, and where it is logged.
// realm names the service in WWW-Authenticate; maxBody is its body limit.
func errorHandler(logger *slog.Logger, realm string, maxBody int64) echo.HTTPErrorHandler {
	return func(err error, c echo.Context) {
		if c.Response().Committed {
			return
		}
		status, body, retryAfter := response(err, c.Request(), maxBody)
		ctx := c.Request().Context()
		switch {
		case status >= 500 && status != http.StatusServiceUnavailable:
			logger.ErrorContext(ctx, "request failed", slog.Int("status", status), slog.Any("error", err))
		case status == http.StatusServiceUnavailable && body.Errors[0].Code != schemas.CodeLockHeld:
			// A dependency is down or slow: operators must see it.
			logger.WarnContext(ctx, "request failed", slog.Int("status", status), slog.Any("error", err))
		default:
			logger.DebugContext(ctx, "request refused", slog.Int("status", status), slog.String("code", body.Errors[0].Code), slog.Any("error", err))
		}
		if status == http.StatusUnauthorized {
			c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="`+realm+`"`)
		}
		if retryAfter > 0 {
			errhttp.SetRetryAfter(c.Response().Header(), retryAfter)
		}
		if err := c.JSON(status, body); err != nil {
			logger.WarnContext(ctx, "write error response", slog.Any("error", err))
		}
	}
}
