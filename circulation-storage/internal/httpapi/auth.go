package httpapi

import (
	"encoding/json"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/checkoutlock/schemas/errs"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/loanhistory"
	"github.com/checkoutlock/schemas/locksettings"
	"github.com/checkoutlock/schemas/selfcheck"
	"github.com/checkoutlock/serverkit"
	"github.com/checkoutlock/serverkit/auth"
)

// readableScopes are the settings scopes the caller may read
// (mod-settings.global.read.<scope>), nil for any (outside jwt mode).
func (s *Server) readableScopes(c echo.Context) []string {
	if s.cfg.Auth.Mode != auth.JWT {
		return nil
	}
	scopes := []string{}
	if claims := serverkit.Claims(c.Request().Context()); claims != nil {
		for _, p := range claims.Held() {
			if scope, ok := strings.CutPrefix(p, schemas.SettingsScopeRead("")); ok && scope != "" {
				scopes = append(scopes, scope)
			}
		}
	}
	return scopes
}

// settingBounds are the bounds of the check-out lock settings entry,
// checked on every write of it whoever writes: the bounds circulation
// keeps to, with waits adding up to at most the longest an acquisition
// may wait here, and locks living at most as long as an acquisition may
// ask for here (LOCK_MAX_TTL_MS): a tenant stores nothing every
// acquisition would then be refused.
func (s *Server) settingBounds() locksettings.Bounds {
	return locksettings.DefaultBounds(s.cfg.LockMaxWait).Narrow(s.cfg.LockMaxTTL)
}

// checkSetting refuses a check-out lock settings entry (scope
// mod-circulation, key checkoutLockFeature) whose value breaks the bounds:
// one 422 entry for each field, naming the bound; and a self-check
// settings entry (key selfCheck) whose value the decoder circulation reads
// it with cannot read (circulation would take it as PINs required). Other
// entries are the writer's business.
func (s *Server) checkSetting(scope string, doc json.RawMessage) error {
	var e struct {
		Key   string          `json:"key"`
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(doc, &e); err != nil {
		// The body passed setting.json, so this is not expected; were it
		// to happen, the bounds would go unchecked: refuse.
		return errs.Errorf(errs.KindInvalid, schemas.CodeValidation, "The body does not fit a settings entry").Because(err)
	}
	// Each entry the services read back is checked with the decoder
	// they read it with; its broken fields are named under value.
	var broken []schemas.Violation
	schema := "setting.json"
	switch {
	case scope == selfcheck.Scope && e.Key == selfcheck.Key:
		schema = "self-check-settings.json"
		if _, fe := selfcheck.Decode(e.Value); fe != nil {
			broken = append(broken, schemas.Violation{Field: fe.Field, Message: fe.Message, Value: fe.Value})
		}
	case scope == loanhistory.Scope && e.Key == loanhistory.Key:
		if _, fe := loanhistory.Decode(e.Value); fe != nil {
			broken = append(broken, schemas.Violation{Field: fe.Field, Message: fe.Message})
		}
	case scope == locksettings.Scope && e.Key == locksettings.Key:
		for _, fe := range s.settingBounds().Validate(e.Value) {
			broken = append(broken, schemas.Violation{Field: fe.Field, Message: fe.Message, Value: fe.Value})
		}
	}
	if len(broken) == 0 {
		return nil
	}
	for i := range broken {
		broken[i].Field = strings.TrimSuffix("value."+broken[i].Field, ".")
	}
	return &schemas.ValidationError{Schema: schema, Violations: broken}
}

// settingsScope checks the scoped permission a write of a settings entry of
// scope needs (mod-settings' mod-settings.global.write.<scope>).
func (s *Server) settingsScope(c echo.Context, r storage.Resource, scope string) error {
	if r.Path != storage.Settings.Path {
		return nil
	}
	return s.cfg.Auth.Require(serverkit.Claims(c.Request().Context()), schemas.SettingsScopeWrite(scope))
}
