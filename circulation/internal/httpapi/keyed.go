package httpapi

import (
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"strings"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/checkoutlock/circulation"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
	"github.com/checkoutlock/serverkit"
)

// keyNamespace is the namespace of the write ids made from clients'
// Idempotency-Keys (a name-based UUID, version 5).
var keyNamespace = uuid.MustParse("5c1f0b5e-7d3a-4a8e-9a51-3f6c2d8b9e40")

// keyed is a write route of FOLIO's that takes the IETF httpapi draft's
// Idempotency-Key: the call's write id is made from the key, the tenant,
// the caller and the route, and carries the digest of the request (its
// method, path and body), so that the same call sent again, to any
// instance, is the same write (answered as it was, written once), and the
// key sent again with another request is refused
// (schemas.CodeIdempotencyKeyReused). Without the key, the call is a
// write of its own.
func (s *Server) keyed(h echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		key, err := idempotencyKey(req.Header.Values(schemas.HeaderIdempotencyKey))
		switch {
		case err != nil:
			return err
		case key == "":
			return h(c)
		}
		body, err := serverkit.Bytes(req)
		if err != nil {
			return err
		}
		tenant, caller := req.Header.Get(schemas.HeaderTenant), serverkit.Caller(req.Context())
		id := uuid.NewSHA1(keyNamespace, []byte(strings.Join([]string{tenant, caller, req.Method, c.Path(), key}, "\x00")))
		digest := sha256.New()
		for _, part := range [][]byte{[]byte(req.Method), []byte(req.URL.Path), body} {
			digest.Write(part)
			digest.Write([]byte{0})
		}
		w := circulation.Write{ID: id.String(), Digest: hex.EncodeToString(digest.Sum(nil)), Keyed: true}
		c.SetRequest(req.WithContext(circulation.WithWrite(req.Context(), w)))
		serverkit.Log(c, slog.String("write_id", w.ID))
		return h(c)
	}
}

// idempotencyKey is the Idempotency-Key sent (values: the admission
// takes it once, serverkit.CheckHeaders), "" for none: a Structured Field
// string (quoted, as the draft writes it) or its bare text, of visible
// ASCII, at most schemas.MaxIdempotencyKey bytes.
func idempotencyKey(values []string) (string, error) {
	if len(values) == 0 {
		return "", nil
	}
	key := values[0]
	if len(key) >= 2 && key[0] == '"' && key[len(key)-1] == '"' {
		key = key[1 : len(key)-1]
	}
	if key == "" || len(key) > schemas.MaxIdempotencyKey || strings.ContainsFunc(key, func(r rune) bool { return r < 0x21 || r > 0x7e }) {
		return "", errs.Errorf(errs.KindBadRequest, schemas.CodeInvalidHeader,
			"%s must be 1 to %d visible ASCII characters (a UUID, say)", schemas.HeaderIdempotencyKey, schemas.MaxIdempotencyKey)
	}
	return key, nil
}
