package schemas

import (
	"slices"
	"strings"
)

// Who may do what: the permission every route requires, in FOLIO's names
// where FOLIO has them, and the permission sets that make the three roles.
// Both services enforce this table, the module descriptors are checked
// against it, and the README lists it; it is the one place it is written.

// The services, as Route.Service names them.
const (
	ServiceCirculation = "circulation"
	ServiceStorage     = "circulation-storage"
)

// Route is one served route and the permission it requires. Path is in
// FOLIO's pathPattern notation ("/circulation/loans/{id}"). An empty
// Permission marks an open route (health, readiness, metrics).
type Route struct {
	Service    string
	Interface  string // the FOLIO interface that provides it
	Method     string
	Path       string
	Permission string
	// Display is the permission's displayName in the descriptor.
	Display string
}

// The interfaces, with their versions.
const (
	InterfaceCirculation         = "circulation"
	InterfaceCheckOutLockStorage = "checkout-lock-storage"
	InterfaceLoanStorage         = "loan-storage"
	InterfaceLoanPolicyStorage   = "loan-policy-storage"
	InterfaceCirculationRules    = "circulation-rules-storage"
	InterfaceUsers               = "users"
	InterfaceUserGroups          = "usergroups"
	InterfaceItemStorage         = "item-storage"
	InterfaceMaterialTypes       = "material-types"
	InterfaceLoanTypes           = "loan-types"
	InterfaceSettings            = "settings"
	InterfaceTenant              = "_tenant"
	InterfaceAdmin               = "_admin"
)

// crud is the FOLIO-style routes of one storage record: collection GET and
// POST, item GET, PUT and DELETE, with FOLIO's permission names
// <prefix>.collection.get, <prefix>.item.post and so on.
func crud(iface, path, prefix, what string) []Route {
	r := func(method, p, perm, display string) Route {
		return Route{Service: ServiceStorage, Interface: iface, Method: method, Path: p, Permission: prefix + perm, Display: display}
	}
	return []Route{
		r("GET", path, ".collection.get", "list "+what),
		r("POST", path, ".item.post", "create a "+strings.TrimSuffix(what, "s")),
		r("GET", path+"/{id}", ".item.get", "read a "+strings.TrimSuffix(what, "s")),
		r("PUT", path+"/{id}", ".item.put", "change a "+strings.TrimSuffix(what, "s")),
		r("DELETE", path+"/{id}", ".item.delete", "delete a "+strings.TrimSuffix(what, "s")),
	}
}

// Routes is every route of both services.
var Routes = slices.Concat(
	[]Route{
		// circulation
		{ServiceCirculation, InterfaceCirculation, "POST", "/circulation/check-out-by-barcode", "circulation.check-out-by-barcode.post", "check an item out"},
		{ServiceCirculation, InterfaceCirculation, "POST", "/circulation/check-in-by-barcode", "circulation.check-in-by-barcode.post", "check an item in"},
		{ServiceCirculation, InterfaceCirculation, "GET", "/circulation/loans", "circulation.loans.collection.get", "list loans"},
		{ServiceCirculation, InterfaceCirculation, "GET", "/circulation/loans/{id}", "circulation.loans.item.get", "read a loan"},
		{ServiceCirculation, InterfaceCirculation, "GET", "/circulation/settings/check-out-lock", "circulation.settings.check-out-lock.get", "read the check-out lock settings"},
		{ServiceCirculation, InterfaceCirculation, "PUT", "/circulation/settings/check-out-lock", "circulation.settings.check-out-lock.put", "change the check-out lock settings"},
		{ServiceCirculation, InterfaceCirculation, "PATCH", "/circulation/settings/check-out-lock", "circulation.settings.check-out-lock.put", "change the check-out lock settings"},
		{ServiceCirculation, InterfaceCirculation, "GET", "/circulation/check-out-locks", "circulation.check-out-locks.collection.get", "list the live check-out locks with their patrons and holders"},
		{ServiceCirculation, InterfaceCirculation, "GET", "/circulation/check-out-locks/history", "circulation.check-out-locks.history.get", "read the check-out lock history"},
		{ServiceCirculation, InterfaceCirculation, "DELETE", "/circulation/check-out-locks/{id}", "circulation.check-out-locks.item.delete", "release a check-out lock"},

		// circulation-storage: the lock
		{ServiceStorage, InterfaceCheckOutLockStorage, "POST", "/check-out-lock-storage", "checkout-lock-storage.checkout-locks.item.post", "acquire a patron's check-out lock"},
		{ServiceStorage, InterfaceCheckOutLockStorage, "GET", "/check-out-lock-storage", "checkout-lock-storage.checkout-locks.collection.get", "list check-out locks"},
		{ServiceStorage, InterfaceCheckOutLockStorage, "GET", "/check-out-lock-storage/{id}", "checkout-lock-storage.checkout-locks.item.get", "read a check-out lock"},
		{ServiceStorage, InterfaceCheckOutLockStorage, "GET", "/check-out-lock-storage/history", "checkout-lock-storage.checkout-locks.history.get", "read the check-out lock history"},
		{ServiceStorage, InterfaceCheckOutLockStorage, "DELETE", "/check-out-lock-storage/{id}", "checkout-lock-storage.checkout-locks.item.delete", "release a check-out lock"},

		// circulation-storage: the item limit and the rules
		{ServiceStorage, InterfaceLoanStorage, "GET", "/check-out-storage/validation", "circulation-storage.check-out.validation.get", "read everything a check-out's validation needs"},
		{ServiceStorage, InterfaceLoanStorage, "GET", "/loan-storage/loans/open-count", "circulation-storage.loans.open-count.get", "count a patron's open loans"},
		{ServiceStorage, InterfaceCirculationRules, "GET", "/circulation-rules-storage", "circulation-storage.circulation-rules.get", "read the circulation rules"},
		{ServiceStorage, InterfaceCirculationRules, "PUT", "/circulation-rules-storage", "circulation-storage.circulation-rules.put", "change the circulation rules"},
		{ServiceStorage, InterfaceCirculationRules, "GET", "/circulation-rules-storage/loan-policy", "circulation-storage.circulation-rules.loan-policy.get", "find the loan policy that applies"},

		// circulation-storage: the tenant interface, called by the platform
		{ServiceStorage, InterfaceTenant, "POST", "/_/tenant", "circulation-storage.tenant.post", "initialise, upgrade or purge a tenant"},
		{ServiceStorage, InterfaceTenant, "GET", "/_/tenant/{id}", "circulation-storage.tenant.get", "read a tenant job"},
		{ServiceStorage, InterfaceTenant, "DELETE", "/_/tenant/{id}", "circulation-storage.tenant.delete", "forget a tenant job"},
	},
	crud(InterfaceUserGroups, "/groups", "usergroups", "patron groups"),
	crud(InterfaceMaterialTypes, "/material-types", "inventory-storage.material-types", "material types"),
	crud(InterfaceLoanTypes, "/loan-types", "inventory-storage.loan-types", "loan types"),
	crud(InterfaceUsers, "/users", "users", "users"),
	crud(InterfaceItemStorage, "/item-storage/items", "inventory-storage.items", "items"),
	crud(InterfaceLoanPolicyStorage, "/loan-policy-storage/loan-policies", "circulation-storage.loan-policies", "loan policies"),
	crud(InterfaceLoanStorage, "/loan-storage/loans", "circulation-storage.loans", "loans"),
	crud(InterfaceSettings, "/settings/entries", "mod-settings.entries", "settings entries"),
	// Open on both services.
	openRoutes(ServiceCirculation), openRoutes(ServiceStorage),
	// circulation's pages: static files; every call they make needs its
	// own permission.
	[]Route{
		{Service: ServiceCirculation, Interface: InterfaceAdmin, Method: "GET", Path: "/"},
		{Service: ServiceCirculation, Interface: InterfaceAdmin, Method: "GET", Path: "/ui/{file}"},
	},
)

func openRoutes(service string) []Route {
	return []Route{
		{Service: service, Interface: InterfaceAdmin, Method: "GET", Path: "/admin/health"},
		{Service: service, Interface: InterfaceAdmin, Method: "GET", Path: "/admin/ready"},
		{Service: service, Interface: InterfaceAdmin, Method: "GET", Path: "/metrics"},
	}
}

// SettingsScopeWrite and SettingsScopeRead are mod-settings' scoped
// permissions: besides the route's permission, reading or writing a
// settings entry needs the one for its scope ("mod-circulation").
func SettingsScopeWrite(scope string) string { return "mod-settings.global.write." + scope }

// SettingsScopeRead is the permission to read entries of scope.
func SettingsScopeRead(scope string) string { return "mod-settings.global.read." + scope }

// RoutesOf lists the routes of one service.
func RoutesOf(service string) []Route {
	var out []Route
	for _, r := range Routes {
		if r.Service == service {
			out = append(out, r)
		}
	}
	return out
}

// PermissionFor is the permission a route of service requires: found
// false for a route not in the table, Permission "" for an open route.
// path is in FOLIO's notation or a router's.
func PermissionFor(service, method, path string) (string, bool) {
	p, ok := permissionIndex[routeKey{service, method, path}]
	return p, ok
}

// routeKey names a route of a service.
type routeKey struct{ service, method, path string }

// permissionIndex is Routes by service, method and path, the path in
// FOLIO's notation ("/users/{id}") and in a router's ("/users/:id"): asked
// on every request.
var permissionIndex = func() map[routeKey]string {
	m := make(map[routeKey]string, 2*len(Routes))
	for _, r := range Routes {
		m[routeKey{r.Service, r.Method, r.Path}] = r.Permission
		m[routeKey{r.Service, r.Method, routerPath(r.Path)}] = r.Permission
	}
	return m
}()

// routerPath turns FOLIO's path ("/users/{id}") into a router's
// ("/users/:id").
func routerPath(path string) string {
	parts := strings.Split(path, "/")
	for i, p := range parts {
		if strings.HasPrefix(p, "{") && strings.HasSuffix(p, "}") {
			parts[i] = ":" + p[1:len(p)-1]
		}
	}
	return strings.Join(parts, "/")
}

// PermissionSet is a named set of permissions (FOLIO's permissionSets
// with subPermissions): the roles.
type PermissionSet struct {
	Name        string
	Display     string
	Description string
	Permissions []string
}

// The roles' permission set names.
const (
	RoleSelfCheck   = "circulation.role.self-check"
	RoleLibrarian   = "circulation.role.librarian"
	RoleOperator    = "circulation.role.operator"
	RoleTenantAdmin = "circulation.role.tenant-admin"
)

// checkOutNeeds are the storage permissions a check-out and a check-in use
// when circulation calls storage with the caller's token: a role that may
// check out holds them.
var checkOutNeeds = []string{
	"users.collection.get", "inventory-storage.items.collection.get", "inventory-storage.items.item.put",
	"circulation-storage.loans.collection.get", "circulation-storage.loans.item.get", "circulation-storage.loans.item.post",
	"circulation-storage.loans.item.put", "circulation-storage.loans.open-count.get",
	"circulation-storage.circulation-rules.loan-policy.get", "circulation-storage.loan-policies.item.get",
	"circulation-storage.check-out.validation.get",
	"checkout-lock-storage.checkout-locks.item.post", "checkout-lock-storage.checkout-locks.item.delete",
	"mod-settings.entries.collection.get", SettingsScopeRead("mod-circulation"),
}

// PermissionSets are the roles.
var PermissionSets = []PermissionSet{
	{RoleSelfCheck, "Circulation: self-check machine", "Check items out and in.",
		slices.Concat([]string{"circulation.check-out-by-barcode.post", "circulation.check-in-by-barcode.post"}, checkOutNeeds)},
	{RoleLibrarian, "Circulation: librarian", "A self-check machine's permissions, reading and changing the check-out lock settings, and reading loans.",
		slices.Concat([]string{"circulation.check-out-by-barcode.post", "circulation.check-in-by-barcode.post",
			"circulation.loans.collection.get", "circulation.loans.item.get",
			"circulation.settings.check-out-lock.get", "circulation.settings.check-out-lock.put",
			"mod-settings.entries.item.post", "mod-settings.entries.item.put", SettingsScopeWrite("mod-circulation")}, checkOutNeeds)},
	{RoleOperator, "Circulation: operator", "Read the check-out locks, their history and the lock settings, and release a lock.",
		[]string{"checkout-lock-storage.checkout-locks.collection.get", "checkout-lock-storage.checkout-locks.item.get",
			"checkout-lock-storage.checkout-locks.item.delete", "checkout-lock-storage.checkout-locks.history.get",
			"circulation.check-out-locks.collection.get", "circulation.check-out-locks.history.get",
			"circulation.check-out-locks.item.delete", "circulation.settings.check-out-lock.get",
			"mod-settings.entries.collection.get", SettingsScopeRead("mod-circulation"), "users.collection.get", "users.item.get"}},
	{RoleTenantAdmin, "Circulation: tenant administrator", "Initialise, upgrade and purge tenants, and load the library's records.",
		tenantAdmin()},
}

// tenantAdmin is every permission in the table.
func tenantAdmin() []string {
	var out []string
	for _, r := range Routes {
		if r.Permission != "" && !slices.Contains(out, r.Permission) {
			out = append(out, r.Permission)
		}
	}
	return append(out, SettingsScopeRead("mod-circulation"), SettingsScopeWrite("mod-circulation"))
}

// PermissionSetNamed returns the permission set named name.
func PermissionSetNamed(name string) (PermissionSet, bool) {
	for _, s := range PermissionSets {
		if s.Name == name {
			return s, true
		}
	}
	return PermissionSet{}, false
}
