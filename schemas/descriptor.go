package schemas

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/checkoutlock/schemas/locksettings"
)

// Module descriptors in FOLIO's format, generated from Routes and
// PermissionSets: circulation/descriptors and circulation-storage/
// descriptors hold them (go run ./schemas/cmd/descriptors writes them; a
// test fails when they differ from what this generates).

// interfaceVersions are the versions of the interfaces the modules provide.
// circulation 14.1 checks a check-out's X-Patron-Pin, which the SIP2 door,
// requiring it, sends in place of a PIN check of its own: where Okapi
// enables the modules, it enables no door of this release beside a
// circulation that would lend unchecked.
var interfaceVersions = map[string]string{
	InterfaceCirculation: "14.1", InterfaceCheckOutLockStorage: "0.1", InterfaceLoanStorage: "7.4",
	InterfaceLoanPolicyStorage: "2.4", InterfaceCirculationRules: "1.0", InterfaceUsers: "16.0", InterfaceUserGroups: "15.3",
	InterfaceItemStorage: "10.0", InterfaceMaterialTypes: "2.2", InterfaceLoanTypes: "2.2", InterfaceSettings: "1.0", InterfaceManualBlocks: "2.0", InterfaceBlockConditions: "0.1", InterfaceBlockLimits: "0.1", InterfaceRequestStorage: "6.0", InterfaceRequestPolicyStorage: "1.0", InterfaceLogin: "7.3", InterfaceAccounts: "1.0", InterfaceServicePoints: "3.4", InterfacePatronPin: "1.0", InterfaceKioskPresence: "1.0",
	InterfaceAnonymizeStorageLoans: "0.1", InterfaceLoanAnonymization: "0.1", InterfaceRequestQueueStorage: "0.1", InterfaceAddInfo: "0.1",
	InterfaceFeesFines: "19.1", InterfaceCalendar: "5.0", InterfaceNoticePolicyStorage: "0.11", InterfaceScheduledNoticeStorage: "0.4", InterfaceTemplates: "1.3", InterfaceFeeFineActions: "1.0", InterfaceFeeFineStorage: "1.0",
	InterfaceTenant: "2.0",
}

// ModuleIDs are the modules' ids.
var ModuleIDs = map[string]string{
	ServiceCirculation: "mod-circulation-1.0.0",
	ServiceStorage:     "mod-circulation-storage-1.0.0",
	ServiceSIP2:        "edge-sip2-checkout-lock-1.0.0",
}

type descriptor struct {
	ID               string          `json:"id"`
	Name             string          `json:"name"`
	Provides         []provided      `json:"provides"`
	Requires         []required      `json:"requires"`
	PermissionSets   []permissionSet `json:"permissionSets"`
	LaunchDescriptor launch          `json:"launchDescriptor"`
}

type provided struct {
	ID            string    `json:"id"`
	Version       string    `json:"version"`
	InterfaceType string    `json:"interfaceType,omitempty"`
	Handlers      []handler `json:"handlers"`
}

type handler struct {
	Methods             []string `json:"methods"`
	PathPattern         string   `json:"pathPattern"`
	PermissionsRequired []string `json:"permissionsRequired"`
	// PermissionsDesired are permissions the handler looks for beyond
	// the required one (the gateway passes those the caller holds on).
	PermissionsDesired []string `json:"permissionsDesired,omitempty"`
	// ModulePermissions are what the handler may do in the modules it
	// calls: the gateway grants them to its calls, whoever the caller is.
	ModulePermissions []string `json:"modulePermissions,omitempty"`
}

type required struct {
	ID      string `json:"id"`
	Version string `json:"version"`
}

type permissionSet struct {
	PermissionName string   `json:"permissionName"`
	DisplayName    string   `json:"displayName"`
	Description    string   `json:"description"`
	SubPermissions []string `json:"subPermissions,omitempty"`
}

type launch struct {
	DockerImage string   `json:"dockerImage"`
	DockerPull  bool     `json:"dockerPull"`
	Env         []envVar `json:"env"`
}

type envVar struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// launchEnv is what a platform deploying the module sets: gateway mode,
// since the platform's gateway verifies callers.
var launchEnv = map[string][]envVar{
	ServiceStorage: {{"AUTH_MODE", "gateway"}, {"CHECKOUT_LOCK_FEATURE_ENABLED", "false"}, {"DB_HOST", "postgres"}, {"DB_PORT", "5432"}, {"DB_USERNAME", "folio_admin"},
		{"DB_PASSWORD", "folio_admin"}, {"DB_DATABASE", "okapi_modules"}, {"HTTP_ADDR", ":8081"}},
	ServiceCirculation: {{"AUTH_MODE", "gateway"}, {"STORAGE_URL", "http://mod-circulation-storage:8081"},
		{"LOCK_TTL_MS", strconv.Itoa(locksettings.DefaultTTLMs)}, {"RETRY_INTERVAL_MS", locksettings.DefaultRetryIntervalsMs},
		{"HTTP_ADDR", ":8080"}},
	ServiceSIP2: {{"HTTP_ADDR", ":8082"}, {"SIP2_CONFIG", "/config/sip2.json"}, {"CIRCULATION_URL", "http://mod-circulation:8080"}},
}

// Descriptor is service's ModuleDescriptor-template.json.
func Descriptor(service string) []byte {
	d := descriptor{ID: ModuleIDs[service], Requires: []required{},
		LaunchDescriptor: launch{DockerImage: service + ":1.0.0", Env: launchEnv[service]}}
	switch service {
	case ServiceCirculation:
		d.Name = "Circulation: check-out by barcode under the patron's check-out lock"
	case ServiceStorage:
		d.Name = "Circulation storage: the check-out lock and the records a check-out reads and writes"
	case ServiceSIP2:
		// An edge module: it serves kiosks over SIP2, not HTTP routes, and
		// calls circulation as the kiosk that logged in, whose account
		// holds the self-check role.
		d.Name = "SIP2 door: self-check machines check out and in through circulation, under the patron's lock"
		d.Provides = []provided{}
		d.PermissionSets = []permissionSet{}
		d.Requires = []required{{ID: InterfaceCirculation, Version: interfaceVersions[InterfaceCirculation]},
			{ID: InterfaceLogin, Version: interfaceVersions[InterfaceLogin]}}
		b, err := json.MarshalIndent(d, "", "  ")
		if err != nil {
			panic(err)
		}
		return append(b, '\n')
	}
	byInterface := map[string]*provided{}
	var order []string
	perms := map[string]string{} // permission → display
	for _, r := range RoutesOf(service) {
		if r.Permission == "" {
			continue // health, readiness and metrics: open, not part of an interface
		}
		p := byInterface[r.Interface]
		if p == nil {
			p = &provided{ID: r.Interface, Version: interfaceVersions[r.Interface]}
			if r.Interface == InterfaceTenant {
				p.InterfaceType = "system"
			}
			byInterface[r.Interface] = p
			order = append(order, r.Interface)
		}
		h := handler{Methods: []string{r.Method}, PathPattern: r.Path, PermissionsRequired: []string{r.Permission},
			ModulePermissions: r.ModulePermissions}
		switch {
		case r.Service == ServiceStorage && r.Method == "DELETE" && r.Path == "/check-out-lock-storage/{id}":
			h.PermissionsDesired = []string{PermissionReleaseOthers}
		case r.Service == ServiceStorage && r.Method == "POST" && r.Path == "/loan-storage/loans":
			h.PermissionsDesired = []string{PermissionCheckOutOverride}
		case r.Service == ServiceCirculation && r.Method == "POST" && r.Path == "/circulation/check-out-by-barcode":
			for _, o := range OverridePermissions {
				h.PermissionsDesired = append(h.PermissionsDesired, o.Permission)
			}
			h.PermissionsDesired = append(h.PermissionsDesired, PermissionOverrideLoanDate, PermissionCheckOutOffline)
		case r.Service == ServiceCirculation && r.Method == "GET" && r.Path == "/circulation/patron-summary":
			h.PermissionsDesired = []string{PermissionPatronSummaryDetails}
		case r.Service == ServiceCirculation && r.Method == "POST" && r.Path == "/circulation/renew-by-barcode":
			h.PermissionsDesired = []string{PermissionPatronSummaryDetails, PermissionOverridePatronBlock, PermissionOverrideRenewalBlock}
		case r.Service == ServiceCirculation && r.Method == "POST" && r.Path == "/circulation/renew-by-id":
			h.PermissionsDesired = []string{PermissionOverridePatronBlock, PermissionOverrideRenewalBlock}
		case r.Service == ServiceCirculation && r.Method == "GET" && r.Path == "/bl-users/_self":
			// Who is signed in, and what they may do: every permission
			// of circulation's routes the user holds.
			h.PermissionsDesired = selfDesired()
		}
		if r.Service == ServiceCirculation && r.Method == "POST" && r.Path == "/circulation/check-out-by-barcode" {
			// Whether the answer may name the borrower.
			h.PermissionsDesired = append(h.PermissionsDesired, PermissionPatronSummaryDetails)
		}
		p.Handlers = append(p.Handlers, h)
		if _, ok := perms[r.Permission]; !ok {
			perms[r.Permission] = r.Display
		}
	}
	for _, id := range order {
		d.Provides = append(d.Provides, *byInterface[id])
	}
	if service == ServiceCirculation {
		// What circulation calls in storage, as itself.
		var needs []string
		for _, r := range RoutesOf(ServiceStorage) {
			if r.Permission != "" && r.Interface != InterfaceTenant && !slices.Contains(needs, r.Interface) {
				needs = append(needs, r.Interface)
			}
		}
		for _, id := range needs {
			d.Requires = append(d.Requires, required{ID: id, Version: interfaceVersions[id]})
		}
	}
	names := make([]string, 0, len(perms))
	for p := range perms {
		names = append(names, p)
	}
	sort.Strings(names)
	for _, p := range names {
		d.PermissionSets = append(d.PermissionSets, permissionSet{PermissionName: p, DisplayName: service + ": " + perms[p], Description: perms[p]})
	}
	if service == ServiceStorage {
		for _, scope := range []string{SettingsScopeRead("mod-circulation"), SettingsScopeWrite("mod-circulation")} {
			d.PermissionSets = append(d.PermissionSets, permissionSet{PermissionName: scope,
				DisplayName: service + ": settings of scope mod-circulation",
				Description: "Read or write settings entries of scope mod-circulation (the check-out lock setting)"})
		}
		for _, scope := range []string{SettingsScopeRead(LocaleScope), SettingsScopeWrite(LocaleScope)} {
			d.PermissionSets = append(d.PermissionSets, permissionSet{PermissionName: scope,
				DisplayName: service + ": settings of scope " + LocaleScope,
				Description: "Read or write settings entries of scope " + LocaleScope + " (the tenant's locale: its time zone and currency)"})
		}
		d.PermissionSets = append(d.PermissionSets, permissionSet{PermissionName: PermissionReleaseOthers,
			DisplayName: service + ": release a check-out lock someone else holds",
			Description: "Release a live check-out lock acquired by someone else (recorded in the lock history as released_by_other)"},
			permissionSet{PermissionName: PermissionCheckOutOverride,
				DisplayName: service + ": write a check-out past the limits an override lifts",
				Description: "Write a check-out's loan past the item limit or a patron block, or one made offline past every rule (X-Check-Out-Override), still under the patron's lock"},
			permissionSet{PermissionName: PermissionRenewalOverride,
				DisplayName: service + ": write a renewal past the refusals an override lifts",
				Description: "Write a renewal past the loan policy's refusals or a patron block (X-Renewal-Override), as renewedThroughOverride with the override's comment"})
	}
	if service == ServiceCirculation {
		for _, o := range OverridePermissions {
			d.PermissionSets = append(d.PermissionSets, permissionSet{PermissionName: o.Permission,
				DisplayName: service + ": " + o.Display, Description: o.Display})
		}
		for _, p := range []struct{ name, display string }{
			{PermissionOverrideLoanDate, "check an item out with a loan date more than five minutes before now"},
			{PermissionOverrideRenewalBlock, "renew a loan past its loan policy's refusals (renewalBlock, renewalDueDateRequiredBlock)"},
			{PermissionPatronSummaryDetails, "read a patron's name and loans out in a patron summary without the patron's PIN"},
			{PermissionCheckOutOffline, "record a check-out a self-check machine made offline, dated when it happened, past the rules a live one keeps"},
		} {
			d.PermissionSets = append(d.PermissionSets, permissionSet{PermissionName: p.name,
				DisplayName: service + ": " + p.display, Description: p.display})
		}
	}
	if service == ServiceCirculation {
		// The roles are circulation's: they span both modules.
		for _, s := range PermissionSets {
			d.PermissionSets = append(d.PermissionSets, permissionSet{PermissionName: s.Name, DisplayName: s.Display,
				Description: s.Description, SubPermissions: s.Permissions})
		}
	}
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		panic(err)
	}
	return append(b, '\n')
}

// README markers around the permission table PermissionsMarkdown writes.
const (
	PermissionsBegin = "<!-- permissions: generated by go run ./schemas/cmd/descriptors; do not edit -->"
	PermissionsEnd   = "<!-- end of permissions -->"
)

// PermissionsMarkdown is the permission table for the README: every route
// that needs a permission, and which roles hold it.
func PermissionsMarkdown() string {
	roles := []struct{ name, column string }{
		{RoleSelfCheck, "self-check"}, {RoleLibrarian, "librarian"}, {RoleOperator, "operator"}, {RoleTenantAdmin, "tenant admin"},
	}
	var b strings.Builder
	b.WriteString("| service | route | permission |")
	for _, r := range roles {
		b.WriteString(" " + r.column + " |")
	}
	b.WriteString("\n|---|---|---|")
	for range roles {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, r := range Routes {
		if r.Permission == "" {
			continue
		}
		fmt.Fprintf(&b, "| %s | `%s %s` | `%s` |", r.Service, r.Method, r.Path, r.Permission)
		for _, role := range roles {
			set, _ := PermissionSetNamed(role.name)
			mark := ""
			if slices.Contains(set.Permissions, r.Permission) {
				mark = "✓"
			}
			b.WriteString(" " + mark + " |")
		}
		b.WriteString("\n")
	}
	b.WriteString("\ncirculation's module permissions: what each of its handlers may do in storage, whoever calls it " +
		"(`modulePermissions` in its descriptor; in jwt mode, what its module token holds):\n\n")
	b.WriteString("| circulation route | module permissions at circulation-storage |\n|---|---|\n")
	for _, r := range RoutesOf(ServiceCirculation) {
		if len(r.ModulePermissions) == 0 {
			continue
		}
		perms := make([]string, len(r.ModulePermissions))
		for i, p := range r.ModulePermissions {
			perms[i] = "`" + p + "`"
		}
		fmt.Fprintf(&b, "| `%s %s` | %s |\n", r.Method, r.Path, strings.Join(perms, ", "))
	}
	return b.String()
}

// selfDesired is every permission circulation's routes take or look for,
// each once, sorted: what GET /bl-users/_self asks a gateway to say the
// user holds.
func selfDesired() []string {
	seen := map[string]bool{PermissionPatronSummaryDetails: true, PermissionOverrideLoanDate: true, PermissionCheckOutOffline: true,
		PermissionOverrideRenewalBlock: true}
	for _, o := range OverridePermissions {
		seen[o.Permission] = true
	}
	for _, r := range RoutesOf(ServiceCirculation) {
		if r.Permission != "" {
			seen[r.Permission] = true
		}
	}
	return slices.Sorted(maps.Keys(seen))
}
