package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/checkoutlock/circulation"
	"github.com/checkoutlock/schemas"
)

// maxKiosks bounds the kiosks the console lists, and kioskAnswerBytes a
// door's answer.
const (
	maxKiosks        = 500
	kioskAnswerBytes = 1 << 20
)

// doorJSON is a SIP2 door and whether it answered.
type doorJSON struct {
	URL   string `json:"url"`
	Error string `json:"error,omitempty"`
}

// kiosks is GET /circulation/kiosks: the kiosks' day, the self-check
// machines connected to the SIP2 doors (SIP2_ADMIN_URLS) for the caller's
// tenant and the sessions that ended in the last 24 hours, each door
// asked at once with a deadline of a second; a door that does not answer
// is named with the reason.
func (s *Server) kiosks(c echo.Context) error {
	tenant := circulation.OkapiFrom(c.Request().Context()).Tenant
	ctx, cancel := context.WithTimeout(c.Request().Context(), time.Second)
	defer cancel()
	doors := make([]doorJSON, len(s.cfg.SIP2AdminURLs))
	found := make([][]schemas.Kiosk, len(doors))
	var wg sync.WaitGroup
	for i, base := range s.cfg.SIP2AdminURLs {
		doors[i].URL = base
		wg.Add(1)
		go func() {
			defer wg.Done()
			ks, err := doorKiosks(ctx, base, tenant)
			if err != nil {
				doors[i].Error = err.Error()
			}
			found[i] = ks
		}()
	}
	wg.Wait()
	out := struct {
		Kiosks []schemas.Kiosk `json:"kiosks"`
		Doors  []doorJSON      `json:"doors"`
	}{Kiosks: []schemas.Kiosk{}, Doors: doors}
	for _, ks := range found {
		for _, k := range ks {
			if len(out.Kiosks) < maxKiosks {
				k.Tenant = "" // the caller's, every one
				k.Name = schemas.MachineName(k.Location, k.Username)
				out.Kiosks = append(out.Kiosks, k)
			}
		}
	}
	return c.JSON(http.StatusOK, out)
}

// doorKiosks asks one door for the tenant's kiosks.
func doorKiosks(ctx context.Context, base, tenant string) ([]schemas.Kiosk, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet,
		strings.TrimRight(base, "/")+"/admin/kiosks?"+url.Values{"tenant": {tenant}}.Encode(), nil)
	if err != nil {
		return nil, err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("the door did not answer")
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("the door answered %d", res.StatusCode)
	}
	var v struct {
		Kiosks []schemas.Kiosk `json:"kiosks"`
	}
	if err := json.NewDecoder(io.LimitReader(res.Body, kioskAnswerBytes)).Decode(&v); err != nil {
		return nil, fmt.Errorf("the door's answer is unreadable")
	}
	return v.Kiosks, nil
}

// selfCheckSettings is GET /circulation/settings/self-check: what the
// tenant asks of its self-check machines, as circulation applies it
// (self-check-settings-effective.json). A SIP2 door asks it for its
// kiosks' status (offline ok).
func (s *Server) selfCheckSettings(c echo.Context) error {
	settings, err := s.svc.Circulation.SelfCheckSettings(c.Request().Context())
	if err != nil {
		return err
	}
	currency, err := s.svc.Circulation.Currency(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]string{"patronPin": settings.PatronPin, "offlineLending": settings.OfflineLending,
		"currency": currency})
}
