package lending

import (
	"time"

	"github.com/checkoutlock/schemas"
)

// stamp is now and d, as FOLIO writes a time.
func stamp(d time.Duration) string { return schemas.FormatTime(time.Now().Add(d)) }
