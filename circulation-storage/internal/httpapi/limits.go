package httpapi

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/checkoutlock/schemas"
)

// singleValued are the headers a request may carry once: a second value
// would leave the services to guess which one counts (and circulation and
// storage might guess differently).
var singleValued = []string{
	schemas.HeaderTenant, schemas.HeaderToken, schemas.HeaderRequestID, schemas.HeaderUserID,
	schemas.HeaderLockID, schemas.HeaderItemVersion, schemas.HeaderCheckInItemVersion,
	schemas.HeaderItemLimit, schemas.HeaderItemLimitMaterialType, schemas.HeaderItemLimitLoanType, echo.HeaderContentType, echo.HeaderAuthorization,
}

// checkHeaders refuses a header block larger than maxBytes (431) and a
// single-valued header given more than once (400).
func checkHeaders(req *http.Request, maxBytes int) error {
	size := len(req.Method) + len(req.RequestURI) + len(req.Proto) + 4
	for k, vs := range req.Header {
		for _, v := range vs {
			size += len(k) + len(v) + 4
		}
	}
	if maxBytes > 0 && size > maxBytes {
		return &httpError{http.StatusRequestHeaderFieldsTooLarge, schemas.CodeHeadersTooLarge,
			fmt.Sprintf("Request headers are larger than %d bytes", maxBytes)}
	}
	for _, name := range singleValued {
		if len(req.Header.Values(name)) > 1 {
			code := schemas.CodeInvalidHeader
			if name == schemas.HeaderTenant {
				code = schemas.CodeInvalidTenant
			}
			return &httpError{http.StatusBadRequest, code, name + " must be given at most once"}
		}
	}
	return nil
}

// readBody reads the request body into memory before the handler runs: at
// most maxBytes (413 beyond), and by deadline (408 after it). A client that
// sends its headers and then trickles or withholds the body is cut off at
// the deadline instead of holding a goroutine and a socket for ever.
func readBody(c echo.Context, maxBytes int64, deadline time.Time) error {
	req := c.Request()
	if req.ContentLength > maxBytes {
		return errBodyTooLarge(maxBytes)
	}
	if req.Body == nil || req.Body == http.NoBody {
		return nil
	}
	rc := http.NewResponseController(c.Response())
	if err := rc.SetReadDeadline(deadline); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	body, err := io.ReadAll(http.MaxBytesReader(c.Response(), req.Body, maxBytes))
	if err != nil {
		// The deadline stays set, so that net/http's own draining of the
		// rest of the body after the answer cannot wait on the client
		// either; the connection is closed.
		c.Response().Header().Set(echo.HeaderConnection, "close")
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			return errBodyTooLarge(mbe.Limit)
		case errors.Is(err, os.ErrDeadlineExceeded):
			return &httpError{http.StatusRequestTimeout, schemas.CodeBodyTimeout,
				"The request body did not arrive in time; send it at once"}
		}
		return &httpError{http.StatusBadRequest, schemas.CodeMalformedJSON, "Could not read the request body"}
	}
	// The whole body is here: the connection may wait for the client's
	// next request again, on the server's idle timeout.
	if err := rc.SetReadDeadline(time.Time{}); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	return nil
}
