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
	// ServiceSIP2 serves no route of its own; it has a descriptor.
	ServiceSIP2 = "sip2"
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
	// ModulePermissions are what the service's handler of this route may
	// do in the services it calls, whoever its caller is (FOLIO's
	// modulePermissions): circulation calls storage as itself, with
	// exactly these, never with its caller's token.
	ModulePermissions []string
	// The route's contract, which its OpenAPI description says (OpenAPI):
	// Request is the schema of the JSON body it takes ("" for none), Query
	// the query parameters it reads, and Answers its answers other than
	// the error envelope every route may answer with.
	Request string
	Query   []string
	Headers []string
	Answers []Answer
	// Lenient says the route is FOLIO's mod-circulation's, whose clients
	// send what that module takes: members its body's schema does not
	// name (an id, the summaries of a record read and sent back) are
	// removed and ignored, not refused; what the schema names is
	// validated all the same (Set.ValidateTaking). This project's own
	// routes, and the storage routes (which refuse, as FOLIO's storage
	// modules do, members their schemas close), are strict.
	Lenient bool
}

// Answer is one answer of a route's: its status and the schema of its
// JSON body ("" for none, or a body that is not JSON: ContentType then
// says what it is).
type Answer struct {
	Status      int
	Schema      string
	ContentType string
}

// takes is r taking a JSON body of schema.
func (r Route) takes(schema string) Route {
	r.Request = schema
	return r
}

// in is r in FOLIO's interface iface rather than its service's own.
func (r Route) in(iface string) Route {
	r.Interface = iface
	return r
}

// takesAsFOLIO is r taking a JSON body of schema as FOLIO's mod-circulation
// takes it (Lenient).
func (r Route) takesAsFOLIO(schema string) Route {
	r.Request, r.Lenient = schema, true
	return r
}

// answers is r answering status with a JSON body of schema ("" for no
// body).
func (r Route) answers(status int, schema string) Route {
	r.Answers = append(slices.Clone(r.Answers), Answer{Status: status, Schema: schema})
	return r
}

// answersText is r answering status with a body of contentType.
func (r Route) answersText(status int, contentType string) Route {
	r.Answers = append(slices.Clone(r.Answers), Answer{Status: status, ContentType: contentType})
	return r
}

// reads is r reading the query parameters names.
func (r Route) reads(names ...string) Route {
	r.Query = append(slices.Clone(r.Query), names...)
	return r
}

// heeds is r reading the request headers names, each of which changes
// what the route does (wire.go says how).
func (r Route) heeds(names ...string) Route {
	r.Headers = append(slices.Clone(r.Headers), names...)
	return r
}

// amend is routes with f applied to the one of method and path.
func amend(routes []Route, method, path string, f func(Route) Route) []Route {
	out := slices.Clone(routes)
	for i, r := range out {
		if r.Method == method && r.Path == path {
			out[i] = f(r)
			return out
		}
	}
	panic("schemas: no route " + method + " " + path + " to amend")
}

// The interfaces, with their versions.
const (
	InterfaceCirculation          = "circulation"
	InterfaceCheckOutLockStorage  = "checkout-lock-storage"
	InterfaceLoanStorage          = "loan-storage"
	InterfaceLoanPolicyStorage    = "loan-policy-storage"
	InterfaceCirculationRules     = "circulation-rules-storage"
	InterfaceUsers                = "users"
	InterfaceUserGroups           = "usergroups"
	InterfaceItemStorage          = "item-storage"
	InterfaceMaterialTypes        = "material-types"
	InterfaceLoanTypes            = "loan-types"
	InterfaceSettings             = "settings"
	InterfaceManualBlocks         = "manualblocks"
	InterfaceBlockConditions      = "patron-block-conditions"
	InterfaceBlockLimits          = "patron-block-limits"
	InterfaceRequestStorage       = "request-storage"
	InterfaceRequestPolicyStorage = "request-policy-storage"
	InterfaceLogin                = "login"
	InterfaceAccounts             = "accounts"
	InterfaceServicePoints        = "service-points"
	InterfacePatronPin            = "patron-pin"
	InterfaceKioskPresence        = "kiosk-presence-storage"
	// FOLIO's fees and fines: the records at storage (mod-feesfines'
	// feesfines interface), the actions on an account through
	// circulation, which writes them at storage with their own ids.
	InterfaceFeesFines = "feesfines"
	// FOLIO's mod-calendar: service point calendars and their openings.
	InterfaceCalendar       = "calendar"
	InterfaceFeeFineActions = "feesfines-actions"
	// FOLIO's patron notices: the policies and scheduled notices
	// (mod-circulation-storage's), the templates (mod-template-engine's).
	InterfaceNoticePolicyStorage    = "patron-notice-policy-storage"
	InterfaceScheduledNoticeStorage = "scheduled-notice-storage"
	InterfaceTemplates              = "templates"
	InterfaceFeeFineStorage         = "fee-fine-storage"
	// FOLIO's on-demand anonymization: a patron's closed loans through
	// circulation, loans by id at storage.
	InterfaceLoanAnonymization     = "loan-anonymization"
	InterfaceAnonymizeStorageLoans = "anonymize-storage-loans"
	// FOLIO's notes added to a loan, through circulation.
	InterfaceAddInfo = "add-info"
	// An item's request queue reordered at storage in one write (this
	// project's: FOLIO's storage has no such write).
	InterfaceRequestQueueStorage = "request-queue-storage"
	InterfaceTenant              = "_tenant"
	InterfaceAdmin               = "_admin"
)

// crud is the FOLIO-style routes of one storage record: collection GET and
// POST, item GET, PUT and DELETE, with FOLIO's permission names
// <prefix>.collection.get, <prefix>.item.post and so on; one is the
// record's schema, many the collection's.
func crud(iface, path, prefix, what, one, many string) []Route {
	r := func(method, p, perm, display string) Route {
		return Route{Service: ServiceStorage, Interface: iface, Method: method, Path: p, Permission: prefix + perm, Display: display}
	}
	return []Route{
		r("GET", path, ".collection.get", "list "+what).reads("query", "offset", "limit").answers(200, many),
		r("POST", path, ".item.post", "create a "+strings.TrimSuffix(what, "s")).takes(one).answers(201, one),
		r("GET", path+"/{id}", ".item.get", "read a "+strings.TrimSuffix(what, "s")).answers(200, one),
		r("PUT", path+"/{id}", ".item.put", "change a "+strings.TrimSuffix(what, "s")).takes(one).answers(204, ""),
		r("DELETE", path+"/{id}", ".item.delete", "delete a "+strings.TrimSuffix(what, "s")).answers(204, ""),
	}
}

// identifiedWrites is routes with their POST and PUT heeding a write's
// own id (HeaderWriteID, HeaderWriteDigest): the writes of loans, items and
// requests.
func identifiedWrites(routes []Route) []Route {
	out := slices.Clone(routes)
	for i, r := range out {
		if r.Method == "POST" || r.Method == "PUT" {
			out[i] = r.heeds(HeaderWriteID, HeaderWriteDigest)
		}
	}
	return out
}

// fixedSet is the routes of a record set the service keeps, which clients
// list, read and change but never create or delete (FOLIO's patron block
// conditions): crud's GET, GET and PUT.
func fixedSet(iface, path, prefix, what, one, many string) []Route {
	var out []Route
	for _, r := range crud(iface, path, prefix, what, one, many) {
		if r.Method != "POST" && r.Method != "DELETE" {
			out = append(out, r)
		}
	}
	return out
}

// movedSignIn is the routes of FOLIO's fees/fines at /accounts, which
// answer, for one release, a call about a sign-in account (kept there
// before) with 308 to the same call at /sign-in-accounts.
func movedSignIn(routes []Route) []Route {
	out := slices.Clone(routes)
	for i, r := range out {
		out[i] = r.answers(308, "")
	}
	return out
}

// readOnly is the routes of records written only by the service's own
// writes (FOLIO's fee/fine actions): crud's two GETs.
func readOnly(routes []Route) []Route {
	var out []Route
	for _, r := range routes {
		if r.Method == "GET" {
			out = append(out, r)
		}
	}
	return out
}

// feeFineActionRoutes are mod-feesfines' actions on an account, served by
// circulation at FOLIO's paths and permissions: each written at storage
// as one write with its own id (an Idempotency-Key sent again gets the
// first answer and moves no more money), each but cancel with its check.
func feeFineActionRoutes() []Route {
	var out []Route
	for _, a := range FeeFineActions {
		request := "fee-fine-action-request.json"
		if a == ActionCancel {
			request = "fee-fine-cancel-request.json"
		}
		r := circ("POST", "/accounts/{id}/"+string(a), FeeFineActionPermission(a), string(a)+" a fee/fine", PermissionFeeFineAct, PermissionWriteGet)
		r.Interface = InterfaceFeeFineActions
		out = append(out, r.heeds(HeaderIdempotencyKey).takes(request).answers(201, "fee-fine-action-response.json").
			answers(422, "errors.json").answers(422, "fee-fine-action-failure.json"))
		if a.Checked() {
			r := circ("POST", "/accounts/{id}/check-"+string(a), FeeFineCheckPermission(a), "check whether a fee/fine may be "+a.Done(), PermissionFeeFineCheck)
			r.Interface = InterfaceFeeFineActions
			out = append(out, r.takes("fee-fine-check-request.json").answers(200, "fee-fine-check-response.json").
				answers(422, "errors.json").answers(422, "fee-fine-check-response.json"))
		}
	}
	return out
}

// calendarRoutes are mod-calendar's routes, its permissions: the
// calendars and a service point's openings by date.
func calendarRoutes() []Route {
	r := func(method, path, permission, display string) Route {
		return stor(InterfaceCalendar, method, path, "calendar.endpoint.calendars."+permission, display)
	}
	return []Route{
		r("GET", "/calendar/calendars", "get", "list calendars").reads("query", "offset", "limit").answers(200, "calendars.json"),
		r("POST", "/calendar/calendars", "post", "create a calendar").takes("calendar.json").answers(201, "calendar.json"),
		r("GET", "/calendar/calendars/{id}", "calendarId.get", "read a calendar").answers(200, "calendar.json"),
		r("PUT", "/calendar/calendars/{id}", "calendarId.put", "change a calendar").takes("calendar.json").answers(204, ""),
		r("DELETE", "/calendar/calendars/{id}", "calendarId.delete", "delete a calendar").answers(204, ""),
		r("GET", "/calendar/dates/{servicePointId}/surrounding-openings", "surroundingOpenings.get",
			"find a service point's openings on a date and the nearest open days before and after it").
			reads("date").answers(200, "calendar-surrounding-openings.json"),
		r("GET", "/calendar/dates/{servicePointId}/all-openings", "allOpenings.get",
			"list a service point's openings day by day from one date to another").
			reads("startDate", "endDate", "includeClosed", "offset", "limit").answers(200, "calendar-days.json"),
	}
}

// FeeFineActionPermission is FOLIO's permission for the action a.
func FeeFineActionPermission(a FeeFineAction) string {
	return "feesfines.accounts." + string(a) + ".post"
}

// FeeFineCheckPermission is FOLIO's permission for the check of a.
func FeeFineCheckPermission(a FeeFineAction) string {
	return "feesfines.accounts.check-" + string(a) + ".post"
}

// PermissionPayPatronFees takes a patron's payment at a self-check
// machine (a SIP2 door's 37 fee paid): the self-check role holds it.
const PermissionPayPatronFees = "circulation.patron-fees.pay.post"

// PermissionFeeFineAct and PermissionFeeFineCheck write and check an
// action on fees/fines at storage: circulation's action routes hold them.
const (
	PermissionFeeFineAct   = "circulation-storage.fee-fines.actions.post"
	PermissionFeeFineCheck = "circulation-storage.fee-fines.checks.post"
)

// Routes is every route of both services.
var Routes = slices.Concat(
	[]Route{
		// circulation: each handler calls storage as circulation, holding
		// only the storage permissions it needs.
		circ("POST", "/circulation/check-out-by-barcode", "circulation.check-out-by-barcode.post", "check an item out", checkOutModule...).heeds(HeaderIdempotencyKey, HeaderPatronPin).takesAsFOLIO("check-out-by-barcode-request.json").answers(201, "circulation-loan.json"),
		circ("POST", "/circulation/check-in-by-barcode", "circulation.check-in-by-barcode.post", "check an item in", checkInModule...).heeds(HeaderIdempotencyKey).takesAsFOLIO("check-in-by-barcode-request.json").answers(200, "check-in-response.json"),
		circ("POST", "/circulation/renew-by-barcode", "circulation.renew-by-barcode.post", "renew a loan", renewModule...).heeds(HeaderIdempotencyKey).takesAsFOLIO("renew-by-barcode-request.json").heeds(HeaderPatronPin).answers(200, "circulation-loan.json"),
		circ("POST", "/circulation/renew-by-id", "circulation.renew-by-id.post", "renew a loan by the item's and the patron's ids", renewModule...).heeds(HeaderIdempotencyKey).takesAsFOLIO("renew-by-id-request.json").answers(200, "circulation-loan.json"),
		circ("GET", "/circulation/patron-summary", "circulation.patron-summary.get",
			"read what a self-check machine shows a patron: whether they may borrow and why not, the loans counted and the item limit; with the patron's PIN, who they are and their loans out",
			PermissionPatronSummary, PermissionVerifyPin, "mod-settings.entries.collection.get", SettingsScopeRead(LocaleScope)).
			reads("userBarcode").heeds(HeaderPatronPin).answers(200, "circulation-patron-summary.json"),
		circ("GET", "/circulation/settings/self-check", PermissionSelfCheckSettings,
			"read what the library asks of its self-check machines: whether a patron's PIN is required, and whether check-outs made offline are taken",
			"mod-settings.entries.collection.get", SettingsScopeRead("mod-circulation"), SettingsScopeRead(LocaleScope)).
			answers(200, "self-check-settings-effective.json"),
		circ("GET", "/circulation/item-summary", "circulation.item-summary.get",
			"read what a self-check machine shows of an item: its title, status and due date",
			"inventory-storage.items.collection.get", "circulation-storage.loans.collection.get").
			reads("itemBarcode").answers(200, "circulation-item-summary.json"),
		circ("POST", "/circulation/patron-pin/verify", "circulation.patron-pin.verify.post",
			"verify the PIN a patron typed at a self-check machine", findUsers, PermissionVerifyPin).
			takes("circulation-patron-pin.json").answers(204, ""),
		circ("GET", "/circulation/loans", "circulation.loans.collection.get", "list loans, each with FOLIO's summaries",
			slices.Concat([]string{"circulation-storage.loans.collection.get"}, loanSummaries)...).
			reads("query", "userId", "itemId", "status", "offset", "limit").answers(200, "circulation-loans.json"),
		circ("GET", "/circulation/loans/{id}", "circulation.loans.item.get", "read a loan, with FOLIO's summaries",
			slices.Concat([]string{"circulation-storage.loans.item.get"}, loanSummaries)...).answers(200, "circulation-loan.json"),
		circ("GET", "/circulation/patron-loans", "circulation.loans.collection.get",
			"find a patron by barcode or name and their open loans, as the circulation desk's page shows them",
			findUsers, namesUser, "circulation-storage.loans.collection.get", "inventory-storage.items.collection.get",
			"inventory-storage.service-points.collection.get", "circulation-storage.check-out.validation.get", PermissionPatronSummary,
			"payments.collection.get", "mod-settings.entries.collection.get", SettingsScopeRead(LocaleScope)).reads("patron").answers(200, ""),
		circ("POST", "/circulation/loans/{id}/claim-item-returned", PermissionClaimItemReturned,
			"record that the patron says they returned a loan's item (the item Claimed returned, the loan open)", loanActionModule...).
			heeds(HeaderIdempotencyKey).takesAsFOLIO("claim-item-returned-request.json").answers(204, ""),
		circ("POST", "/circulation/loans/{id}/declare-item-lost", PermissionDeclareItemLost,
			"declare a loan's item lost (the item Declared lost, the loan open)", loanActionModule...).
			heeds(HeaderIdempotencyKey).takesAsFOLIO("declare-item-lost-request.json").answers(204, ""),
		circ("PUT", "/circulation/loans/{id}", PermissionReplaceLoan,
			"change a loan's due date, the loan sent back as read (FOLIO's Users app's change of due date)", loanActionModule...).
			heeds(HeaderIdempotencyKey).takesAsFOLIO("circulation-loan-change.json").answers(204, ""),
		circ("POST", "/circulation/loans/{id}/add-info", PermissionAddInfo,
			"add the patron's or the staff's note to a loan, open or closed", "circulation-storage.loans.item.get",
			"circulation-storage.loans.item.put", PermissionWriteGet).in(InterfaceAddInfo).
			heeds(HeaderIdempotencyKey).takesAsFOLIO("add-info-request.json").answers(204, ""),
		circ("POST", "/circulation/loans/{id}/change-due-date", PermissionChangeDueDate,
			"change an open loan's due date (its due date notices moved with it)", loanActionModule...).
			heeds(HeaderIdempotencyKey).takesAsFOLIO("change-due-date-request.json").answers(204, ""),
		circ("POST", "/circulation/requests", PermissionRequestPost,
			"place a request for an item, judged by FOLIO's request rules (a page pages the item, a recall shortens its loan)",
			"request-storage.requests.item.post", PermissionWriteGet).
			heeds(HeaderIdempotencyKey).takesAsFOLIO("circulation-request.json").answers(201, "request.json"),
		circ("GET", "/circulation/requests", "circulation.requests.collection.get", "list requests, each with FOLIO's summaries",
			slices.Concat([]string{"request-storage.requests.collection.get"}, requestSummaries)...).
			reads("query", "itemId", "requesterId", "status", "offset", "limit").answers(200, "circulation-requests.json"),
		circ("GET", "/circulation/requests/{id}", "circulation.requests.item.get", "read a request, with FOLIO's summaries",
			slices.Concat([]string{"request-storage.requests.item.get"}, requestSummaries)...).answers(200, "circulation-request-read.json"),
		circ("GET", "/circulation/requests/queue/item/{id}", PermissionQueueGet,
			"read an item's request queue, in its order, each request with FOLIO's summaries",
			slices.Concat([]string{"request-storage.requests.collection.get"}, requestSummaries)...).answers(200, "circulation-requests.json"),
		circ("POST", "/circulation/requests/queue/item/{id}/reorder", PermissionQueueReorder,
			"give an item's open requests new positions in its queue, and read the queue",
			slices.Concat([]string{PermissionQueueReorderStorage, PermissionWriteGet, "request-storage.requests.collection.get"}, requestSummaries)...).
			heeds(HeaderIdempotencyKey).takesAsFOLIO("reorder-queue-request.json").answers(200, "circulation-requests.json"),
		circ("GET", "/circulation/requests/allowed-service-points", PermissionAllowedServicePoints,
			"find where a request may be picked up: for each request type the requester may place for the item, the pickup service points its request policy allows",
			"request-storage.requests.item.get", PermissionAllowedServicePointsStorage).
			reads("operation", "requesterId", "itemId", "requestId").answers(200, "allowed-service-points-response.json"),
		circ("PUT", "/circulation/requests/{id}", PermissionRequestPut,
			"change or cancel an open request (a cancelled one gives its place up and hands an item on its hold shelf on)",
			"request-storage.requests.item.get", "request-storage.requests.item.put", PermissionWriteGet).
			heeds(HeaderIdempotencyKey).takesAsFOLIO("request.json").answers(204, ""),
		circ("POST", "/circulation/requests/{id}/move", PermissionRequestMove,
			"move an open request to another item's queue, judged as a request placed there",
			"request-storage.requests.item.get", "request-storage.requests.item.put", PermissionWriteGet).
			heeds(HeaderIdempotencyKey).takesAsFOLIO("move-request.json").answers(200, "request.json"),
		circ("GET", "/circulation/settings/check-out-lock", "circulation.settings.check-out-lock.get", "read the check-out lock settings",
			settingsReadModule...).
			answers(200, "checkout-lock-settings-effective.json"),
		circ("PUT", "/circulation/settings/check-out-lock", "circulation.settings.check-out-lock.put", "change the check-out lock settings",
			settingsWriteModule...).
			takes("checkout-lock-settings.json").answers(200, "checkout-lock-settings-effective.json"),
		circ("PATCH", "/circulation/settings/check-out-lock", "circulation.settings.check-out-lock.put", "change the check-out lock settings",
			settingsWriteModule...).
			takes("checkout-lock-settings-patch.json").answers(200, "checkout-lock-settings-effective.json"),
		circ("GET", "/circulation/check-out-locks", "circulation.check-out-locks.collection.get",
			"list the live check-out locks with their patrons and holders",
			"checkout-lock-storage.checkout-locks.collection.get", namesUser, namesServicePoint).answers(200, ""),
		circ("GET", "/circulation/check-out-locks/history", "circulation.check-out-locks.history.get", "read the check-out lock history",
			"checkout-lock-storage.checkout-locks.history.get", namesUser, namesAccount, namesServicePoint, findUsers, findAccounts).
			reads("patron", "account", "type", "from", "to", "offset", "limit").answers(200, ""),
		circ("GET", "/circulation/check-out-locks/history.csv", "circulation.check-out-locks.history.get", "export the check-out lock history",
			"checkout-lock-storage.checkout-locks.history.get", namesUser, namesAccount, namesServicePoint, findUsers, findAccounts).
			reads("patron", "account", "type", "from", "to").answersText(200, "text/csv"),
		circ("GET", "/circulation/notices/failed", PermissionFailedNotices,
			"list the patron notices every try of which failed (the dead letters), with their patrons",
			"scheduled-notice-storage.scheduled-notices.collection.get", namesUser).answers(200, "circulation-failed-notices.json"),
		circ("GET", "/circulation/kiosks", "circulation.kiosks.collection.get",
			"list the self-check machines connected to the SIP2 doors, and the sessions that ended today").answers(200, "circulation-kiosks.json"),
		circ("PUT", "/circulation/kiosks/presence/{id}", PermissionPresencePut,
			"record that the calling self-check machine is on line now, in a span of its presence (a SIP2 door's)",
			"kiosk-presence-storage.spans.item.put").answers(204, ""),
		circ("GET", "/circulation/kiosks/presence", PermissionPresenceGet,
			"read the spans of time the calling self-check machine was seen on line", "kiosk-presence-storage.spans.collection.get").
			reads("from", "to").answers(200, "kiosk-presence.json"),
		circ("POST", "/circulation/patron-fees/pay", PermissionPayPatronFees,
			"take a patron's payment of their fees/fines at a self-check machine", "users.collection.get", PermissionVerifyPin,
			"mod-settings.entries.collection.get", SettingsScopeRead("mod-circulation"), PermissionFeeFineAct, PermissionWriteGet).heeds(HeaderIdempotencyKey, HeaderPatronPin).takes("patron-fee-payment-request.json").
			answers(201, "fee-fine-action-response.json"),
		Route{Service: ServiceCirculation, Interface: InterfaceLoanAnonymization, Method: "POST", Path: "/loan-anonymization/by-user/{userId}",
			Permission: PermissionAnonymizeUser, Display: "forget the borrower of a patron's closed loans",
			ModulePermissions: []string{"circulation-storage.loans.collection.get", PermissionAnonymizeLoans, PermissionSessionGet}}.
			answers(200, "anonymize-loans-response.json"),
		circ("DELETE", "/circulation/check-out-locks/{id}", "circulation.check-out-locks.item.delete", "release a check-out lock",
			"checkout-lock-storage.checkout-locks.item.delete", PermissionReleaseOthers).answers(204, ""),

		// circulation-storage: the lock
		stor(InterfaceCheckOutLockStorage, "POST", "/check-out-lock-storage", "checkout-lock-storage.checkout-locks.item.post", "acquire a patron's check-out lock").
			takes("checkout-lock-request.json").answers(201, "checkout-lock.json"),
		stor(InterfaceCheckOutLockStorage, "GET", "/check-out-lock-storage", "checkout-lock-storage.checkout-locks.collection.get", "list check-out locks").
			reads("userId", "offset", "limit").answers(200, "checkout-locks.json"),
		stor(InterfaceCheckOutLockStorage, "GET", "/check-out-lock-storage/{id}", "checkout-lock-storage.checkout-locks.item.get", "read a check-out lock").
			answers(200, "checkout-lock.json"),
		stor(InterfaceCheckOutLockStorage, "GET", "/check-out-lock-storage/history", "checkout-lock-storage.checkout-locks.history.get", "read the check-out lock history").
			reads("userId", "from", "to", "query", "offset", "limit").answers(200, "checkout-lock-history.json"),
		stor(InterfaceCheckOutLockStorage, "DELETE", "/check-out-lock-storage/{id}", "checkout-lock-storage.checkout-locks.item.delete", "release a check-out lock").
			answers(204, ""),

		// circulation-storage: the times doors saw each self-check machine
		// on line
		stor(InterfaceKioskPresence, "PUT", "/kiosk-presence-storage/spans/{id}", "kiosk-presence-storage.spans.item.put",
			"record that the calling self-check machine is on line now, in a span of its presence").answers(204, ""),
		stor(InterfaceKioskPresence, "GET", "/kiosk-presence-storage/spans", "kiosk-presence-storage.spans.collection.get",
			"read the spans of time the calling self-check machine was seen on line").reads("from", "to").answers(200, "kiosk-presence.json"),

		// circulation-storage: closed loans forget their borrower
		stor(InterfaceFeeFineStorage, "POST", "/fee-fine-storage/actions", PermissionFeeFineAct,
			"pay, waive, transfer, refund or cancel fees/fines, as one write").heeds(HeaderWriteID, HeaderWriteDigest).
			takes("fee-fine-storage-action.json").answers(201, "fee-fine-action-response.json"),
		stor(InterfaceFeeFineStorage, "POST", "/fee-fine-storage/checks", PermissionFeeFineCheck,
			"check whether an action on fees/fines would be allowed").
			takes("fee-fine-storage-check.json").answers(200, "fee-fine-check-response.json"),
		stor(InterfaceAnonymizeStorageLoans, "POST", "/anonymize-storage-loans", PermissionAnonymizeLoans,
			"forget the borrower of closed loans, by id").takes("anonymize-storage-loans-request.json").answers(200, "anonymize-storage-loans-response.json"),

		// circulation-storage: an item's request queue reordered
		stor(InterfaceRequestQueueStorage, "POST", "/request-storage/queues/{id}/reorder", PermissionQueueReorderStorage,
			"give an item's open requests new positions, judged under the queue's lock as one write").
			heeds(HeaderWriteID, HeaderWriteDigest).takes("reorder-queue-request.json").answers(204, ""),

		// circulation-storage: whether a write with an id landed
		stor(InterfaceLoanStorage, "GET", "/write-storage/writes/{id}", PermissionWriteGet,
			"read the write with an id as it landed: its kind and answer").answers(200, "write.json"),

		// circulation-storage: the item limit and the rules
		stor(InterfaceLoanStorage, "GET", "/check-out-storage/validation", "circulation-storage.check-out.validation.get", "read everything a check-out's validation needs").
			reads("itemBarcode", "userBarcode", "itemId", "userId").answers(200, "check-out-validation.json"),
		stor(InterfaceLoanStorage, "POST", "/check-out-storage/check-outs", PermissionCheckOutInOne,
			"check an item out by barcode in one call: validation's reads and the check-out's write").
			heeds(HeaderLockID, HeaderReleaseLock, HeaderAcquireLock, HeaderWriteID, HeaderWriteDigest).
			takes("check-out-storage-request.json").answers(201, "check-out-storage-written.json"),
		stor(InterfaceLoanStorage, "GET", "/check-out-storage/patron", PermissionPatronSummary,
			"read a patron's loans out, item limit and blocks, as a self-check machine shows them").reads("userBarcode").answers(200, "patron-summary.json"),
		stor(InterfaceLoanStorage, "GET", "/loan-storage/loans/open-count", "circulation-storage.loans.open-count.get", "count a patron's open loans").
			reads("userId", "materialTypeId", "loanTypeId").answers(200, "open-loan-count.json"),
		stor(InterfaceCirculationRules, "GET", "/circulation-rules-storage", "circulation-storage.circulation-rules.get", "read the circulation rules").
			answers(200, "circulation-rules.json"),
		stor(InterfaceCirculationRules, "PUT", "/circulation-rules-storage", "circulation-storage.circulation-rules.put", "change the circulation rules").
			takes("circulation-rules.json").answers(204, ""),
		stor(InterfaceCirculationRules, "GET", "/circulation-rules-storage/loan-policy", "circulation-storage.circulation-rules.loan-policy.get", "find the loan policy that applies").
			reads("patronGroupId", "materialTypeId", "loanTypeId").answers(200, "loan-policy-match.json"),
		stor(InterfaceCirculationRules, "GET", "/circulation-rules-storage/allowed-service-points", PermissionAllowedServicePointsStorage,
			"find the pickup service points a requester may name for each request type of an item, as a request placed is judged").
			reads("requesterId", "itemId", "ignoreItemStatus").answers(200, "allowed-service-points-response.json"),

		// circulation-storage: the tenant interface, called by the platform
		stor(InterfaceTenant, "POST", "/_/tenant", "circulation-storage.tenant.post", "initialise, upgrade or purge a tenant").
			takes("tenant-attributes.json").answers(201, "tenant-job.json").answers(204, ""),
		stor(InterfaceTenant, "GET", "/_/tenant/{id}", "circulation-storage.tenant.get", "read a tenant job").answers(200, "tenant-job.json"),
		stor(InterfaceTenant, "DELETE", "/_/tenant/{id}", "circulation-storage.tenant.delete", "forget a tenant job").answers(204, ""),
	},
	crud(InterfaceUserGroups, "/groups", "usergroups", "patron groups", "group.json", "usergroups.json"),
	crud(InterfaceMaterialTypes, "/material-types", "inventory-storage.material-types", "material types", "material-type.json", "mtypes.json"),
	crud(InterfaceLoanTypes, "/loan-types", "inventory-storage.loan-types", "loan types", "loan-type.json", "loantypes.json"),
	crud(InterfaceUsers, "/users", "users", "users", "user.json", "users.json"),
	// An item's replacement naming a service point is a check-in of an
	// item with no open loan, answered with what it wrote.
	identifiedWrites(amend(crud(InterfaceItemStorage, "/item-storage/items", "inventory-storage.items", "items", "item.json", "items.json"),
		"PUT", "/item-storage/items/{id}", func(r Route) Route {
			return r.heeds(HeaderCheckInServicePoint).answers(200, "check-in-written.json")
		})),
	crud(InterfaceLoanPolicyStorage, "/loan-policy-storage/loan-policies", "circulation-storage.loan-policies", "loan policies", "loan-policy.json", "loan-policies.json"),
	crud(InterfaceRequestPolicyStorage, "/request-policy-storage/request-policies", "circulation-storage.request-policies", "request policies", "request-policy.json", "request-policies.json"),
	// A loan's creation is a check-out's write under the patron's lock; its
	// replacement a check-in (answered with what it wrote), a renewal
	// (answered with the loan) or a claim or declaration (204).
	identifiedWrites(amend(amend(crud(InterfaceLoanStorage, "/loan-storage/loans", "circulation-storage.loans", "loans", "loan.json", "loans.json"),
		"POST", "/loan-storage/loans", func(r Route) Route {
			return r.heeds(HeaderLockID, HeaderItemVersion, HeaderReleaseLock, HeaderAcquireLock, HeaderCheckOutOverride)
		}),
		"PUT", "/loan-storage/loans/{id}", func(r Route) Route {
			return r.heeds(HeaderCheckInItemVersion, HeaderRenewalCount, HeaderRenewalOverride, HeaderLoanActionItemVersion, HeaderLoanActionServicePoint).
				answers(200, "check-in-written.json").answers(200, "loan.json")
		})),
	crud(InterfaceSettings, "/settings/entries", "mod-settings.entries", "settings entries", "setting.json", "settings.json"),
	crud(InterfaceManualBlocks, "/manualblocks", "manualblocks", "manual patron blocks", "manualblock.json", "manualblocks.json"),
	fixedSet(InterfaceBlockConditions, "/patron-block-conditions", "patron-blocks.patron-block-conditions", "patron block conditions", "patron-block-condition.json", "patron-block-conditions.json"),
	crud(InterfaceBlockLimits, "/patron-block-limits", "patron-blocks.patron-block-limits", "patron block limits", "patron-block-limit.json", "patron-block-limits.json"),
	identifiedWrites(amend(amend(crud(InterfaceRequestStorage, "/request-storage/requests", "request-storage.requests", "requests", "request.json", "requests.json"),
		"POST", "/request-storage/requests", func(r Route) Route { return r.heeds(HeaderRequestRules) }),
		"PUT", "/request-storage/requests/{id}", func(r Route) Route { return r.heeds(HeaderRequestRules) })),
	crud(InterfaceAccounts, "/sign-in-accounts", "circulation-storage.accounts", "accounts", "account.json", "accounts.json"),
	crud(InterfaceFeesFines, "/owners", "owners", "fee/fine owners", "fee-fine-owner.json", "fee-fine-owners.json"),
	crud(InterfaceFeesFines, "/feefines", "feefines", "fee/fine types", "fee-fine-type.json", "fee-fine-types.json"),
	crud(InterfaceFeesFines, "/payments", "payments", "payment methods", "payment-method.json", "payment-methods.json"),
	crud(InterfaceFeesFines, "/overdue-fines-policies", "overdue-fines-policies", "overdue fine policies", "overdue-fine-policy.json", "overdue-fine-policies.json"),
	crud(InterfaceFeesFines, "/lost-item-fees-policies", "lost-item-fees-policies", "lost item fee policies", "lost-item-fee-policy.json", "lost-item-fee-policies.json"),
	movedSignIn(crud(InterfaceFeesFines, "/accounts", "accounts", "fee/fine records", "fee-fine-account.json", "fee-fine-accounts.json")),
	readOnly(crud(InterfaceFeesFines, "/feefineactions", "feefineactions", "fee/fine actions", "fee-fine-action.json", "fee-fine-actions.json")),
	feeFineActionRoutes(),
	calendarRoutes(),
	crud(InterfaceNoticePolicyStorage, "/patron-notice-policy-storage/patron-notice-policies", "circulation-storage.patron-notice-policies",
		"patron notice policies", "patron-notice-policy.json", "patron-notice-policies.json"),
	crud(InterfaceTemplates, "/templates", "templates", "templates", "template.json", "templates.json"),
	// Scheduled notices are written by the notice sender only.
	readOnly(crud(InterfaceScheduledNoticeStorage, "/scheduled-notice-storage/scheduled-notices", "scheduled-notice-storage.scheduled-notices",
		"scheduled notices", "scheduled-notice.json", "scheduled-notices.json")),
	crud(InterfaceServicePoints, "/service-points", "inventory-storage.service-points", "service points", "service-point.json", "service-points.json"),
	[]Route{
		// FOLIO's login: signing in, refreshing and signing out need no
		// permission (they are how a caller gets one); setting a password
		// is the administrator's.
		stor(InterfaceLogin, "POST", "/authn/login-with-expiry", "", "sign in").takes("login-request.json").answers(201, "login-answer.json"),
		stor(InterfaceLogin, "POST", "/authn/refresh", "", "refresh a sign-in's tokens").answers(201, "login-answer.json"),
		stor(InterfaceLogin, "POST", "/authn/logout", "", "sign out").answers(204, ""),
		stor(InterfaceLogin, "POST", "/authn/credentials", "login.item.post", "set an account's password").takes("credentials.json").answers(201, ""),
		stor(InterfaceLogin, "GET", "/authn/sessions/{id}", PermissionSessionGet, "read whether a sign-in's session is alive").answers(200, "login-session.json"),
		stor(InterfacePatronPin, "POST", "/patron-pin", "users.patron-pin.set", "set a patron's PIN").takes("patron-pin.json").answers(201, ""),
		stor(InterfacePatronPin, "POST", "/patron-pin/verify", PermissionVerifyPin, "verify a patron's PIN").takes("patron-pin.json").answers(204, ""),
	},
	// Open on both services.
	openRoutes(ServiceCirculation), openRoutes(ServiceStorage),
	// circulation's pages: static files; every call they make needs its
	// own permission.
	[]Route{
		Route{Service: ServiceCirculation, Interface: InterfaceAdmin, Method: "GET", Path: "/"}.answersText(200, "text/html"),
		Route{Service: ServiceCirculation, Interface: InterfaceAdmin, Method: "GET", Path: "/ui/{file}"}.answersText(200, "*/*"),
		// The pages' sign-in, passed on to storage's login, and who is
		// signed in (in jwt mode, a valid token of any permission).
		Route{Service: ServiceCirculation, Interface: InterfaceAdmin, Method: "POST", Path: "/authn/login-with-expiry"}.
			takes("login-request.json").answers(201, "login-answer.json"),
		Route{Service: ServiceCirculation, Interface: InterfaceAdmin, Method: "POST", Path: "/authn/refresh"}.answers(201, "login-answer.json"),
		Route{Service: ServiceCirculation, Interface: InterfaceAdmin, Method: "POST", Path: "/authn/logout"}.answers(204, ""),
		Route{Service: ServiceCirculation, Interface: InterfaceAdmin, Method: "GET", Path: "/bl-users/_self",
			ModulePermissions: []string{namesAccount, PermissionSessionGet}}.answers(200, ""),
	},
)

func openRoutes(service string) []Route {
	return []Route{
		Route{Service: service, Interface: InterfaceAdmin, Method: "GET", Path: "/admin/health"}.answers(200, ""),
		Route{Service: service, Interface: InterfaceAdmin, Method: "GET", Path: "/admin/ready"}.answers(200, ""),
		Route{Service: service, Interface: InterfaceAdmin, Method: "GET", Path: "/metrics"}.answersText(200, "text/plain"),
		Route{Service: service, Interface: InterfaceAdmin, Method: "GET", Path: OpenAPIPath}.answers(200, ""),
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
	r, ok := RouteFor(service, method, path)
	return r.Permission, ok
}

// RouteFor is the route of service that method and path name, path in
// FOLIO's notation or a router's; found false for a route not in the
// table.
func RouteFor(service, method, path string) (Route, bool) {
	r, ok := routeIndex[routeKey{service, method, path}]
	if !ok {
		return Route{}, false
	}
	return *r, true
}

// routeKey names a route of a service.
type routeKey struct{ service, method, path string }

// routeIndex is Routes by service, method and path, the path in FOLIO's
// notation ("/users/{id}") and in a router's ("/users/:id"): asked on
// every request.
var routeIndex = func() map[routeKey]*Route {
	m := make(map[routeKey]*Route, 2*len(Routes))
	for i := range Routes {
		r := &Routes[i]
		m[routeKey{r.Service, r.Method, r.Path}] = r
		m[routeKey{r.Service, r.Method, routerPath(r.Path)}] = r
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

// stor is a route of circulation-storage.
func stor(iface, method, path, permission, display string) Route {
	return Route{Service: ServiceStorage, Interface: iface, Method: method, Path: path, Permission: permission, Display: display}
}

// circ is a route of circulation whose handler calls storage with the
// module permissions modulePerms, and asks storage whether its caller's
// session is alive (PermissionSessionGet).
func circ(method, path, permission, display string, modulePerms ...string) Route {
	return Route{Service: ServiceCirculation, Interface: InterfaceCirculation, Method: method, Path: path,
		Permission: permission, Display: display, ModulePermissions: append(modulePerms, PermissionSessionGet)}
}

// FOLIO's override permissions: beside the check-out route's own, each
// lets a check-out override one kind of block (overrideBlocks). The
// librarian holds them; a self-check machine never does.
const (
	PermissionOverridePatronBlock     = "circulation.override-patron-block.post"
	PermissionOverrideItemLimit       = "circulation.override-item-limit-block.post"
	PermissionOverrideItemNotLoanable = "circulation.override-item-not-loanable-block.post"
	// PermissionOverrideLoanDate lets a check-out be dated more than
	// MaxLoanDateBehind before now (a loan recorded late). The librarian
	// holds it; a self-check machine never does.
	PermissionOverrideLoanDate = "circulation.override-loan-date.post"
	// PermissionOverrideRenewalBlock lets a renewal override the loan
	// policy's refusals (overrideBlocks' renewalBlock and
	// renewalDueDateRequiredBlock). The librarian holds it.
	PermissionOverrideRenewalBlock = "circulation.override-renewal-block.post"
)

// OverridePermissions are the override permissions with their blocks'
// names in overrideBlocks, in FOLIO's order.
var OverridePermissions = []struct{ Block, Permission, Display string }{
	{"patronBlock", PermissionOverridePatronBlock, "override a patron block at check-out"},
	{"itemLimitBlock", PermissionOverrideItemLimit, "override the item limit at check-out"},
	{"itemNotLoanableBlock", PermissionOverrideItemNotLoanable, "lend an item its loan policy does not lend"},
}

// PermissionCheckOutOverride lets a check-out's write at storage pass the
// limits an override lifts (HeaderCheckOutOverride): circulation's
// check-out holds it, having checked the caller's override permission;
// nobody's token reaches storage with it but the tenant administrator's.
const PermissionCheckOutOverride = "circulation-storage.loans.check-out.override"

// RenewalOverridePermissions are the permissions a renewal's
// overrideBlocks take, by block, in the order FOLIO checks them (the
// patron's blocks, then the renewal's).
var RenewalOverridePermissions = []struct{ Block, Permission string }{
	{OverridePatronBlock, PermissionOverridePatronBlock},
	{OverrideRenewalBlock, PermissionOverrideRenewalBlock},
	{OverrideRenewalDueDateRequiredBlock, PermissionOverrideRenewalBlock},
}

// PermissionRenewalOverride lets a renewal's write at storage pass the
// refusals an override lifts (HeaderRenewalOverride): circulation's
// renewal holds it, having checked the caller's override permissions.
const PermissionRenewalOverride = "circulation-storage.loans.renewal.override"

// PermissionPresencePut and PermissionPresenceGet record and read the
// times a SIP2 door saw the calling self-check machine on line: the door
// asks them with the machine's own sign-in.
const (
	PermissionPresencePut = "circulation.kiosks.presence.put"
	PermissionPresenceGet = "circulation.kiosks.presence.get"
)

// PermissionFailedNotices lists the patron notices storage's sender gave
// up on (GET /circulation/notices/failed): the console's dead letters.
const PermissionFailedNotices = "circulation.notices.failed.get"

// PermissionSelfCheckSettings reads the tenant's self-check settings as
// they apply (GET /circulation/settings/self-check): a SIP2 door asks it
// for a kiosk's status (offline ok).
const PermissionSelfCheckSettings = "circulation.settings.self-check.get"

// PermissionSessionGet reads at storage whether a sign-in's session is
// alive: every handler of circulation holds it, to refuse the tokens of a
// session that has ended.
const PermissionSessionGet = "login.sessions.item.get"

// PermissionVerifyPin verifies a patron's PIN at storage: circulation's
// verification for a self-check machine holds it.
const PermissionVerifyPin = "users.patron-pin.verify"

// PermissionWriteGet reads, at storage, the write with an id as it landed
// (its kind and answer): circulation's write routes hold it, to answer a
// call sent again with an Idempotency-Key whose write landed.
const PermissionWriteGet = "circulation-storage.writes.item.get"

// PermissionCheckOutInOne checks an item out at storage in one call
// (POST /check-out-storage/check-outs): circulation's check-out holds it.
const PermissionCheckOutInOne = "circulation-storage.check-out.post"

// PermissionPatronSummary reads, at storage, what a self-check machine
// shows a patron: circulation's patron summary holds it.
const PermissionPatronSummary = "circulation-storage.check-out.patron.get"

// PermissionPatronSummaryDetails lets a caller read, in a patron summary,
// who the patron is and their loans out without the patron's PIN, and act
// for a patron without it: the librarian holds it; a self-check machine
// gets them only with the PIN the patron typed, and otherwise the verdict
// and the counts, and renews a loan without the PIN only where the tenant
// does not require it (selfcheck), told of the borrower no more than the
// verdict tells.
const PermissionPatronSummaryDetails = "circulation.patron-summary.details.get"

// PermissionReleaseOthers lets a caller release a live check-out lock that
// another identity acquired (a lock id alone is not enough): beside the
// release route's own permission, it is what the operator's release through
// circulation's lock console holds. Every such release is in the lock
// history, naming who released it.
const PermissionReleaseOthers = "checkout-lock-storage.checkout-locks.release-others"

// PermissionAnonymizeUser is FOLIO's permission to anonymize a patron's
// closed loans through circulation (the librarian's);
// PermissionAnonymizeLoans anonymizes closed loans by id at storage, which
// circulation's route holds.
const (
	PermissionAnonymizeUser  = "circulation.loans.collection.anonymize.user.post"
	PermissionAnonymizeLoans = "anonymize-storage-loans.post"
)

// PermissionClaimItemReturned and PermissionDeclareItemLost are FOLIO's
// loan actions that keep a loan open and change its item;
// PermissionChangeDueDate is FOLIO's change of an open loan's due date,
// PermissionReplaceLoan its replacement of a loan, which its Users app
// sends to change one, and PermissionAddInfo its note added to a loan.
const (
	PermissionClaimItemReturned = "circulation.loans.claim-item-returned.post"
	PermissionDeclareItemLost   = "circulation.loans.declare-item-lost.post"
	PermissionChangeDueDate     = "circulation.loans.change-due-date.post"
	PermissionReplaceLoan       = "circulation.loans.item.put"
	PermissionAddInfo           = "circulation.loans.add-info.post"
)

// FOLIO's permissions to write requests through circulation.
const (
	PermissionRequestPost = "circulation.requests.item.post"
	PermissionRequestPut  = "circulation.requests.item.put"
	PermissionRequestMove = "circulation.requests.item.move.post"
)

// PermissionQueueGet and PermissionQueueReorder are FOLIO's permissions
// to read an item's request queue and to reorder it through circulation;
// PermissionQueueReorderStorage reorders it at storage, which
// circulation's route holds.
const (
	PermissionQueueGet            = "circulation.requests.queue-item.collection.get"
	PermissionQueueReorder        = "circulation.requests.queue.item-reorder.collection.post"
	PermissionQueueReorderStorage = "request-storage.queues.reorder.post"
)

// PermissionAllowedServicePoints is FOLIO's permission to read where a
// request may be picked up; PermissionAllowedServicePointsStorage reads,
// at storage, the set a request placed is judged by, which circulation's
// route answers.
const (
	PermissionAllowedServicePoints        = "circulation.requests.allowed-service-points.get"
	PermissionAllowedServicePointsStorage = "circulation-storage.circulation-rules.allowed-service-points.get"
)

// What circulation's handlers may do in storage (their module
// permissions). A check-out reads what validation needs and the settings,
// takes and gives back the patron's lock, and writes the loan (reading it
// back when the write's answer is lost); a renewal reads the same and the
// tenant's self-check settings, checks a patron's PIN, and writes the
// loan (reading, for its answer, the policy the loan names by its id
// where that is not the one the call read); a check-in finds the item and
// its open loan and writes the check-in (an item without a loan changes
// alone).
var (
	checkOutModule = []string{
		"circulation-storage.check-out.validation.get", PermissionCheckOutInOne,
		"mod-settings.entries.collection.get", SettingsScopeRead("mod-circulation"),
		"checkout-lock-storage.checkout-locks.item.post", "checkout-lock-storage.checkout-locks.item.delete",
		"circulation-storage.loans.item.post", "circulation-storage.loans.item.get", PermissionCheckOutOverride, PermissionWriteGet,
		// A PIN sent with the check-out (X-Patron-Pin), checked against
		// the patron validation read.
		PermissionVerifyPin,
	}
	renewModule = []string{"circulation-storage.check-out.validation.get",
		"mod-settings.entries.collection.get", SettingsScopeRead("mod-circulation"), PermissionVerifyPin,
		"circulation-storage.loans.item.get", "circulation-storage.loans.item.put", "circulation-storage.loan-policies.item.get",
		PermissionRenewalOverride, PermissionWriteGet}
	loanActionModule = []string{"circulation-storage.loans.item.get", "circulation-storage.loans.item.put",
		"inventory-storage.items.item.get", PermissionWriteGet}
	checkInModule = []string{
		"inventory-storage.items.collection.get", "inventory-storage.items.item.get", "inventory-storage.items.item.put",
		"circulation-storage.loans.collection.get", "circulation-storage.loans.item.get", "circulation-storage.loans.item.put",
		PermissionWriteGet,
	}
	settingsReadModule = []string{"mod-settings.entries.collection.get", SettingsScopeRead("mod-circulation"),
		namesAccount, namesUser}
	// FOLIO's summaries of a page of loans and of requests read each kind
	// of record they name in one query.
	loanSummaries = []string{"inventory-storage.items.collection.get", findUsers, "circulation-storage.loan-policies.collection.get",
		"usergroups.collection.get", "inventory-storage.service-points.collection.get"}
	requestSummaries = []string{"inventory-storage.items.collection.get", findUsers, "usergroups.collection.get",
		"inventory-storage.service-points.collection.get", "circulation-storage.loans.collection.get"}
	settingsWriteModule = []string{"mod-settings.entries.collection.get", SettingsScopeRead("mod-circulation"),
		"mod-settings.entries.item.post", "mod-settings.entries.item.put", SettingsScopeWrite("mod-circulation"), namesAccount, namesUser}
)

// What circulation reads to show people and service points by name on the
// pages.
const (
	namesAccount = "circulation-storage.accounts.item.get"
	// The console's history finds patrons by barcode or name, and
	// accounts by username.
	findUsers         = "users.collection.get"
	findAccounts      = "circulation-storage.accounts.collection.get"
	namesUser         = "users.item.get"
	namesServicePoint = "inventory-storage.service-points.item.get"
)

// ModulePermissionsOf is every permission service's handlers may hold when
// they call another service (the union of its routes' ModulePermissions):
// a module token of service holding anything else is refused.
func ModulePermissionsOf(service string) []string {
	var out []string
	for _, r := range Routes {
		if r.Service != service {
			continue
		}
		for _, p := range r.ModulePermissions {
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	return out
}

// ModulePermissionsFor is the module permissions of service's route
// (method, and path in FOLIO's notation or a router's); nil for a route
// that calls nothing or is not in the table.
func ModulePermissionsFor(service, method, path string) []string {
	return modulePermissionIndex[routeKey{service, method, path}]
}

// modulePermissionIndex is ModulePermissions by route, as permissionIndex.
var modulePermissionIndex = func() map[routeKey][]string {
	m := map[routeKey][]string{}
	for _, r := range Routes {
		if len(r.ModulePermissions) > 0 {
			m[routeKey{r.Service, r.Method, r.Path}] = r.ModulePermissions
			m[routeKey{r.Service, r.Method, routerPath(r.Path)}] = r.ModulePermissions
		}
	}
	return m
}()

// The roles hold permissions of circulation only: whoever checks out,
// changes the settings or watches the locks does it through circulation,
// which calls storage as itself. Only the tenant administrator reaches
// storage directly.
var (
	selfCheckRole = []string{"circulation.check-out-by-barcode.post", PermissionCheckOutOffline, "circulation.check-in-by-barcode.post",
		"circulation.renew-by-barcode.post", PermissionSelfCheckSettings,
		"circulation.patron-summary.get", "circulation.item-summary.get", "circulation.patron-pin.verify.post",
		PermissionPresencePut, PermissionPresenceGet, FeeFineActionPermission(ActionPay), FeeFineCheckPermission(ActionPay),
		PermissionPayPatronFees}
	librarianRole = slices.Concat(selfCheckRole, []string{PermissionPatronSummaryDetails,
		"circulation.renew-by-id.post", "circulation.loans.collection.get", "circulation.loans.item.get", PermissionClaimItemReturned, PermissionDeclareItemLost,
		PermissionChangeDueDate, PermissionReplaceLoan, PermissionAddInfo, "circulation.requests.collection.get", "circulation.requests.item.get",
		PermissionRequestPost, PermissionRequestPut, PermissionRequestMove, PermissionQueueGet, PermissionQueueReorder,
		PermissionAllowedServicePoints, PermissionAnonymizeUser, "circulation.settings.check-out-lock.get", "circulation.settings.check-out-lock.put",
		PermissionOverridePatronBlock, PermissionOverrideItemLimit, PermissionOverrideItemNotLoanable, PermissionOverrideLoanDate,
		PermissionOverrideRenewalBlock},
		feeFineDesk())
	operatorRole = []string{"circulation.check-out-locks.collection.get", "circulation.check-out-locks.history.get",
		"circulation.check-out-locks.item.delete", "circulation.settings.check-out-lock.get", "circulation.kiosks.collection.get",
		PermissionFailedNotices}
)

// feeFineDesk is what a librarian does with fees/fines beyond a
// kiosk's payment: every other action and check.
func feeFineDesk() []string {
	var out []string
	for _, a := range FeeFineActions {
		if a != ActionPay {
			out = append(out, FeeFineActionPermission(a))
			if a.Checked() {
				out = append(out, FeeFineCheckPermission(a))
			}
		}
	}
	return out
}

// PermissionSets are the roles.
var PermissionSets = []PermissionSet{
	{RoleSelfCheck, "Circulation: self-check machine", "Check items out and in, renew loans, take a patron's payment of a fee/fine, and read what a kiosk shows a patron and of an item.", selfCheckRole},
	{RoleLibrarian, "Circulation: librarian", "A self-check machine's permissions (paying a fee/fine among them), waiving, transferring, refunding and cancelling fees/fines, reading and changing the check-out lock settings, reading loans, claiming them returned and declaring them lost, placing, changing, cancelling and moving requests and finding where they may be picked up, anonymizing a patron's closed loans on their request, and overriding blocks at check-out.",
		librarianRole},
	{RoleOperator, "Circulation: operator", "Read the check-out locks and their history through the lock console, release a lock, see the connected self-check machines and the patron notices that could not be sent, and read the lock settings.",
		operatorRole},
	{RoleTenantAdmin, "Circulation: tenant administrator", "Every permission of both modules: initialise, upgrade and purge tenants, load the library's records, call storage directly, and set the tenant's locale (its time zone and currency).",
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
	return append(out, SettingsScopeRead("mod-circulation"), SettingsScopeWrite("mod-circulation"),
		SettingsScopeRead(LocaleScope), SettingsScopeWrite(LocaleScope), PermissionReleaseOthers,
		PermissionOverridePatronBlock, PermissionOverrideItemLimit, PermissionOverrideItemNotLoanable, PermissionOverrideLoanDate,
		PermissionOverrideRenewalBlock, PermissionPatronSummaryDetails, PermissionCheckOutOverride, PermissionRenewalOverride, PermissionCheckOutOffline)
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

// roleWords are the roles a person is told of, in the order they are
// said: the tenant administrator, who holds everything, goes unsaid.
var roleWords = []struct{ set, word string }{{RoleLibrarian, "librarian"}, {RoleOperator, "operator"}, {RoleSelfCheck, "self-check"}}

// RolesHolding says which roles hold permission, as the pages tell a
// person who may not do something: "the librarian role", "the librarian
// or the self-check role"; "the tenant administrator's role" when no
// other does.
func RolesHolding(permission string) string {
	var words []string
	for _, r := range roleWords {
		if set, ok := PermissionSetNamed(r.set); ok && slices.Contains(set.Permissions, permission) {
			words = append(words, "the "+r.word)
		}
	}
	switch len(words) {
	case 0:
		return "the tenant administrator's role"
	case 1:
		return words[0] + " role"
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1] + " role"
}
