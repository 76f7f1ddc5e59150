package serverkit

// The bounds on what a request may make a service hold before its handler
// runs: the header block (in size, and one value for each single-valued
// header) and the body (in size, and in time: it is read whole, by a
// deadline). The admission applies them to every request of both
// services, and their refusals (each an *errs.Error) are answered with
// the FOLIO error envelope.

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
)

// BodyTooLarge is the refusal of a body over limit bytes (413).
func BodyTooLarge(limit int64) *errs.Error {
	return errs.Errorf(errs.KindTooLarge, schemas.CodeBodyTooLarge, "Request body is larger than %d bytes", limit)
}

// singleValued are the headers a request may carry once: a second value
// would leave the services to guess which one counts (and circulation and
// storage might guess differently). The names are canonical, to be looked
// up in the header map as they are.
var singleValued = canonical(
	schemas.HeaderTenant, schemas.HeaderToken, schemas.HeaderRequestID, schemas.HeaderUserID,
	schemas.HeaderLockID, schemas.HeaderItemVersion, schemas.HeaderCheckInItemVersion, schemas.HeaderLoanActionItemVersion,
	schemas.HeaderRenewalCount, schemas.HeaderRenewalOverride, schemas.HeaderLoanActionServicePoint, schemas.HeaderCheckInServicePoint,
	schemas.HeaderRequestRules, schemas.HeaderKiosk,
	schemas.HeaderReleaseLock, schemas.HeaderAcquireLock, schemas.HeaderCheckOutOverride, schemas.HeaderPatronPin,
	schemas.HeaderWriteID, schemas.HeaderWriteDigest, schemas.HeaderIdempotencyKey,
	"Content-Type", "Authorization",
)

func canonical(names ...string) []string {
	for i, n := range names {
		names[i] = http.CanonicalHeaderKey(n)
	}
	return names
}

// CheckHeaders refuses a header block larger than maxBytes (431) and a
// single-valued header given more than once (400). The error, when there
// is one, is an *errs.Error.
func CheckHeaders(req *http.Request, maxBytes int) error {
	size := len(req.Method) + len(req.RequestURI) + len(req.Proto) + 4
	repeated := false
	for k, vs := range req.Header {
		for _, v := range vs {
			size += len(k) + len(v) + 4
		}
		repeated = repeated || len(vs) > 1
	}
	if maxBytes > 0 && size > maxBytes {
		return errs.Errorf(errs.KindHeadersTooLarge, schemas.CodeHeadersTooLarge, "Request headers are larger than %d bytes", maxBytes)
	}
	if !repeated {
		return nil
	}
	for _, name := range singleValued {
		if len(req.Header[name]) > 1 {
			code := schemas.CodeInvalidHeader
			if name == schemas.HeaderTenant {
				code = schemas.CodeInvalidTenant
			}
			return errs.Errorf(errs.KindBadRequest, code, "%s must be given at most once", name)
		}
	}
	return nil
}

// ReadBody reads req's body whole, before the handler runs: at most
// maxBytes (413 beyond), and by deadline (408 after it). A client that
// sends its headers and then trickles or withholds the body is cut off at
// the deadline instead of holding a goroutine and a socket for ever. The
// body read replaces req.Body, and Bytes gives it without a copy. Errors
// are *errs.Error but for a connection that cannot take deadlines.
func ReadBody(w http.ResponseWriter, req *http.Request, maxBytes int64, deadline time.Time) error {
	if req.ContentLength > maxBytes {
		return BodyTooLarge(maxBytes)
	}
	if req.Body == nil || req.Body == http.NoBody {
		return nil
	}
	rc := readDeadliner(w)
	if err := rc.SetReadDeadline(deadline); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	body, err := readAll(http.MaxBytesReader(w, req.Body, maxBytes), req.ContentLength)
	if err != nil {
		// The deadline stays set, so that net/http's own draining of the
		// rest of the body after the answer cannot wait on the client
		// either; the connection is closed.
		w.Header().Set("Connection", "close")
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			return BodyTooLarge(mbe.Limit)
		case errors.Is(err, os.ErrDeadlineExceeded):
			return errs.Errorf(errs.KindTimeout, schemas.CodeBodyTimeout, "The request body did not arrive in time; send it at once")
		}
		return errs.Errorf(errs.KindBadRequest, schemas.CodeMalformedJSON, "Could not read the request body")
	}
	// The whole body is here: the connection may wait for the client's
	// next request again, on the server's idle timeout.
	if err := rc.SetReadDeadline(time.Time{}); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	req.Body = &readBody{Reader: bytes.NewReader(body), bytes: body}
	return nil
}

// readDeadliner is what sets w's connection's read deadline: net/http's
// own response writer, or http.ResponseController for one that wraps it.
func readDeadliner(w http.ResponseWriter) interface{ SetReadDeadline(time.Time) error } {
	if d, ok := w.(interface{ SetReadDeadline(time.Time) error }); ok {
		return d
	}
	return http.NewResponseController(w)
}

// readBody is a request body ReadBody read whole.
type readBody struct {
	*bytes.Reader
	bytes []byte
}

func (*readBody) Close() error { return nil }

// Bytes is req's body: the one ReadBody read, without a copy, or else what
// is left of it to read.
func Bytes(req *http.Request) ([]byte, error) {
	if b, ok := req.Body.(*readBody); ok {
		return b.bytes, nil
	}
	if req.Body == nil {
		return nil, nil
	}
	return io.ReadAll(req.Body)
}

// readAll reads r to its end, into one allocation when the request said its
// body is small (net/http stops the body at its length). A larger one
// grows with what arrives, so that a client announcing a large body and
// sending none holds no more memory than it sent.
func readAll(r io.Reader, contentLength int64) ([]byte, error) {
	if contentLength < 0 || contentLength > exactBodyBytes {
		return io.ReadAll(r)
	}
	body := make([]byte, contentLength)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, err
	}
	return body, nil
}

// exactBodyBytes is the largest body read into one allocation of its
// announced length.
const exactBodyBytes = 4096
