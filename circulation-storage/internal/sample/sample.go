// Package sample is what a tenant may be initialised with (LoadData):
// FOLIO's reference records, under FOLIO's ids, and a sample library of
// loan policies and circulation rules, patrons, items, a block, loans and
// requests, under ids the same on every load.
package sample

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/circulation-storage/internal/record"
	"github.com/checkoutlock/circulation-storage/internal/rules"
	"github.com/checkoutlock/schemas"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	storage "github.com/checkoutlock/circulation-storage"
)

// Reference records carry FOLIO's reference-data ids, so that data moved
// between FOLIO and this service keeps its meaning.
const (
	GroupFaculty   = "503a81cd-6c26-400f-b620-14c08943697c"
	GroupGraduate  = "ad0bc554-d5bc-463c-85d1-5562127ae91b"
	GroupStaff     = "3684a786-6671-4268-8ed0-9db82ebca60b"
	GroupUndergrad = "bdc2b6d4-5ceb-4a12-ab46-249b9a68473e"

	MaterialBook = "1a54b431-2e4f-452d-9cae-9cee66c9a892"
	MaterialDVD  = "5ee11d91-f7e8-481d-b079-65d708582ccc"

	LoanTypeCanCirculate = "2b94c631-fca9-4892-a730-03ee529ffe27"
	LoanTypeReadingRoom  = "2e48e713-17f3-4c13-a9f8-23845bb210a4"

	ServicePointDesk1 = "3a40852d-49fd-4df2-a1f9-6e2641a6e91f"
	ServicePointDesk2 = "c4c90014-c8c9-4ade-8f24-b5e313319f4b"
)

// The sample library's money: the desk that owns what is charged at
// either service point, its overdue fine and lost item fee policies.
const (
	FeeFineOwner       = "0b5c2c3f-5d0e-4b5e-9a0c-6f4a1c2d3e10"
	OverdueFinePolicy  = "0b5c2c3f-5d0e-4b5e-9a0c-6f4a1c2d3e11"
	LostItemFeePolicy  = "0b5c2c3f-5d0e-4b5e-9a0c-6f4a1c2d3e12"
	overdueFineType    = "9523cb96-e752-40c2-89da-60f3961a488d"
	graduateFeeLimitID = "0b5c2c3f-5d0e-4b5e-9a0c-6f4a1c2d3e13"
)

// The sample library's patron notices: its notice policy (the rules'
// fallback), telling a patron their hold is ready for pickup and that a
// loan is due tomorrow, and the two notices' templates.
const (
	NoticePolicy        = "0b5c2c3f-5d0e-4b5e-9a0c-6f4a1c2d3e30"
	TemplateHoldReady   = "0b5c2c3f-5d0e-4b5e-9a0c-6f4a1c2d3e31"
	TemplateDueTomorrow = "0b5c2c3f-5d0e-4b5e-9a0c-6f4a1c2d3e32"
)

// Sample loan policies.
const (
	PolicyStandard    = "d9cd0bed-1b49-4b5e-a7bd-064b8d177231"
	PolicyUndergrad   = "0b5c2c3f-5d0e-4b5e-9a0c-6f4a1c2d3e01"
	PolicyDVD         = "0b5c2c3f-5d0e-4b5e-9a0c-6f4a1c2d3e02"
	PolicyReadingRoom = "0b5c2c3f-5d0e-4b5e-9a0c-6f4a1c2d3e03"
)

// sampleNamespace makes the sample's item and patron ids from their barcodes,
// the same on every load.
var sampleNamespace = uuid.MustParse("6f9f1c54-0c2e-4f57-9d51-7a0c1b3e9a10")

// ID is the id the sample data gives the record with this barcode.
func ID(barcode string) string { return uuid.NewSHA1(sampleNamespace, []byte(barcode)).String() }

type seed struct {
	r   storage.Resource
	id  string
	doc map[string]any
}

func referenceSeeds() []seed {
	return []seed{
		{storage.PatronGroups, GroupFaculty, map[string]any{"group": "faculty", "desc": "Faculty member"}},
		{storage.PatronGroups, GroupGraduate, map[string]any{"group": "graduate", "desc": "Graduate student"}},
		{storage.PatronGroups, GroupStaff, map[string]any{"group": "staff", "desc": "Staff member"}},
		{storage.PatronGroups, GroupUndergrad, map[string]any{"group": "undergrad", "desc": "Undergraduate student"}},
		{storage.MaterialTypes, MaterialBook, map[string]any{"name": "book"}},
		{storage.MaterialTypes, MaterialDVD, map[string]any{"name": "dvd"}},
		{storage.LoanTypes, LoanTypeCanCirculate, map[string]any{"name": "Can circulate"}},
		{storage.LoanTypes, LoanTypeReadingRoom, map[string]any{"name": "Reading room"}},
		{storage.ServicePoints, ServicePointDesk1, map[string]any{"name": "Circ Desk 1", "code": "cd1",
			"discoveryDisplayName": "Circulation Desk -- Hallway", "pickupLocation": true}},
		{storage.ServicePoints, ServicePointDesk2, map[string]any{"name": "Circ Desk 2", "code": "cd2",
			"discoveryDisplayName": "Circulation Desk -- Back Entrance", "pickupLocation": true}},
	}
}

// Rules are the sample library's circulation rules.
var Rules = storage.CirculationRules{
	FallbackLoanPolicyID:        PolicyStandard,
	FallbackOverdueFinePolicyID: OverdueFinePolicy,
	FallbackLostItemPolicyID:    LostItemFeePolicy,
	FallbackNoticePolicyID:      NoticePolicy,
	Rules: []storage.CirculationRule{
		{PatronGroupID: GroupUndergrad, LoanTypeID: LoanTypeCanCirculate, LoanPolicyID: PolicyUndergrad},
		{MaterialTypeID: MaterialDVD, LoanPolicyID: PolicyDVD},
		{LoanTypeID: LoanTypeReadingRoom, LoanPolicyID: PolicyReadingRoom},
	},
}

var titles = []string{
	"Middlemarch", "The Left Hand of Darkness", "Things Fall Apart", "A Brief History of Time",
	"The Name of the Rose", "Beloved", "Gödel, Escher, Bach", "One Hundred Years of Solitude",
	"The Structure of Scientific Revolutions", "Invisible Cities",
}

var films = []string{"Metropolis", "Seven Samurai", "Spirited Away", "Casablanca", "Stalker"}

func sampleSeeds(now time.Time) []seed {
	period := func(n int, unit string) map[string]any { return map[string]any{"duration": n, "intervalId": unit} }
	// A renewal counts its new loan period from the due date, so that a
	// renewal made the day of the check-out moves the due date too.
	renewals := func(n int) map[string]any {
		return map[string]any{"unlimited": false, "numberAllowed": n, "renewFromId": "CURRENT_DUE_DATE"}
	}
	seeds := []seed{
		{storage.LoanPolicies, PolicyStandard, map[string]any{"name": "Standard three-week loan, renewable twice", "loanable": true,
			"renewable": true, "renewalsPolicy": renewals(2),
			"loansPolicy": map[string]any{"profileId": "Rolling", "period": period(3, "Weeks")}}},
		{storage.LoanPolicies, PolicyUndergrad, map[string]any{"name": "Undergraduate: 3 items, renewable once", "loanable": true,
			"renewable": true, "renewalsPolicy": renewals(1),
			"loansPolicy": map[string]any{"profileId": "Rolling", "period": period(2, "Weeks"), "itemLimit": 3}}},
		{storage.LoanPolicies, PolicyDVD, map[string]any{"name": "DVD: 2 items for a week, not renewable", "loanable": true,
			"loansPolicy": map[string]any{"profileId": "Rolling", "period": period(1, "Weeks"), "itemLimit": 2,
				"closedLibraryDueDateManagementId": "MOVE_TO_THE_END_OF_THE_NEXT_OPEN_DAY"}, "renewable": false}},
		{storage.LoanPolicies, PolicyReadingRoom, map[string]any{"name": "Reading room only", "loanable": false}},
	}
	seeds = append(seeds, notices()...)
	patron := func(barcode, first, last, group string, active bool) seed {
		return seed{storage.Patrons, ID(barcode), map[string]any{"barcode": barcode, "active": active, "patronGroup": group,
			"personal": map[string]any{"firstName": first, "lastName": last, "email": strings.ToLower(first) + "@library.test"}}}
	}
	seeds = append(seeds,
		patron("1001", "Alice", "Archer", GroupUndergrad, true),
		patron("1002", "Bob", "Baker", GroupGraduate, true),
		patron("1003", "Carol", "Cole", GroupUndergrad, false),
		patron("1004", "Dave", "Dunn", GroupFaculty, true),
		patron("1005", "Erin", "Ellis", GroupGraduate, true),
		patron("1006", "Frank", "Foster", GroupGraduate, true),
		patron("1007", "Grace", "Green", GroupUndergrad, true),
		patron("1008", "Hana", "Hill", GroupGraduate, true),
	)
	// Frank's registration has ended: he is refused as inactive.
	seeds[len(seeds)-3].doc["expirationDate"] = "2025-06-30T23:59:59.000Z"
	// Erin is blocked from borrowing.
	seeds = append(seeds, seed{storage.ManualBlocks, ID("block-1005"), map[string]any{"userId": ID("1005"),
		"type": "Manual", "desc": "Library card reported stolen", "patronMessage": "Please come to the circulation desk",
		"borrowing": true, "renewals": true, "requests": true}})
	item := func(barcode, title, material, loanType string) seed {
		return seed{storage.Items, ID(barcode), map[string]any{"barcode": barcode, "title": title,
			"status": map[string]any{"name": schemas.ItemAvailable}, "materialTypeId": material, "permanentLoanTypeId": loanType}}
	}
	// Grace's are the last three, out of the way of the hundred and fifty
	// on the shelf.
	for i := 1; i <= 150+len(GracesLoans)+len(HanasBooks); i++ {
		seeds = append(seeds, item(numbered("book-", 3, i), titles[(i-1)%len(titles)], MaterialBook, LoanTypeCanCirculate))
	}
	for i := 1; i <= 40; i++ {
		seeds = append(seeds, item(numbered("dvd-", 2, i), films[(i-1)%len(films)], MaterialDVD, LoanTypeCanCirculate))
	}
	// book-020 waits on the hold shelf for Bob: the first request of its
	// queue is his. Grace's books are out.
	for _, s := range seeds {
		switch barcode, _ := s.doc["barcode"].(string); {
		case s.r.Path != storage.Items.Path:
		case barcode == "book-020":
			s.doc["status"] = map[string]any{"name": schemas.ItemAwaitingPickup}
		case slices.Contains(GracesLoans, barcode), barcode == HanasBooks[0]:
			s.doc["status"] = map[string]any{"name": schemas.ItemCheckedOut}
		}
	}
	seeds = append(seeds, seed{storage.Requests, ID("hold-book-020"), map[string]any{"requestType": "Hold",
		"requestLevel": "Item", "requestDate": "2026-01-05T09:00:00.000Z", "requesterId": ID("1002"),
		"itemId": ID("book-020"), "status": schemas.RequestAwaitingPickup, "position": 1, "fulfillmentPreference": "Hold Shelf"}})
	for i := 1; i <= 10; i++ {
		seeds = append(seeds, item(numbered("reading-", 2, i), titles[(i-1)%len(titles)], MaterialBook, LoanTypeReadingRoom))
	}
	seeds = append(seeds, calendar(now))
	seeds = append(seeds, money(now)...)
	return append(seeds, gracesLoans(now)...)
}

// HanasBooks are Hana's (1008, graduate): the first out with her, to be
// declared lost, the second brought back three weeks late, whose fine
// she owes (7.50, over her group's 5.00: she may not borrow until she
// pays).
var HanasBooks = []string{"book-154", "book-155"}

// OpenLoans is how many open loans the sample holds: Grace's and Hana's
// first.
var OpenLoans = len(GracesLoans) + 1

// money is the sample library's fees and fines: a desk owning what is
// charged at either service point, taking cash and cards; an overdue fine
// of 0.25 a day (at most 10.00) and a lost item's bill of 25.00 and a
// processing fee of 5.00, the circulation rules' for every loan; a
// graduate owing more than 5.00 blocked from borrowing (the condition's
// message is set by LoadData); and Hana's loans: one out, one returned
// late with its fine.
func money(now time.Time) []seed {
	lent, due, back := now.AddDate(0, 0, -63), now.AddDate(0, 0, -42), now.AddDate(0, 0, -12)
	return []seed{
		{storage.FeeFineOwners, FeeFineOwner, map[string]any{"owner": "Main circulation desk", "desc": "Owns what is charged at the circulation desks",
			"servicePointOwner": []map[string]any{{"value": ServicePointDesk1, "label": "Circ Desk 1"}, {"value": ServicePointDesk2, "label": "Circ Desk 2"}}}},
		{storage.PaymentMethods, "0b5c2c3f-5d0e-4b5e-9a0c-6f4a1c2d3e14", map[string]any{"nameMethod": "Cash", "ownerId": FeeFineOwner}},
		{storage.PaymentMethods, "0b5c2c3f-5d0e-4b5e-9a0c-6f4a1c2d3e15", map[string]any{"nameMethod": "Credit card", "ownerId": FeeFineOwner}},
		{storage.OverdueFinePolicies, OverdueFinePolicy, map[string]any{"name": "Overdue: 0.25 a day, at most 10.00",
			"overdueFine": map[string]any{"quantity": json.Number("0.25"), "intervalId": "day"}, "maxOverdueFine": json.Number("10.00"),
			"countClosed": true, "forgiveOverdueFine": false,
			"overdueRecallFine": map[string]any{"quantity": json.Number("0.50"), "intervalId": "day"}, "maxOverdueRecallFine": json.Number("10.00")}},
		{storage.LostItemFeePolicies, LostItemFeePolicy, map[string]any{"name": "Lost: 25.00 and 5.00 for processing",
			"chargeAmountItem":      map[string]any{"chargeType": "anotherCost", "amount": json.Number("25.00")},
			"lostItemProcessingFee": json.Number("5.00"), "chargeAmountItemPatron": true, "chargeAmountItemSystem": false,
			"returnedLostItemProcessingFee": true, "lostItemReturned": "Remove"}},
		{storage.PatronBlockLimits, graduateFeeLimitID, map[string]any{"patronGroupId": GroupGraduate,
			"conditionId": schemas.ConditionFeeFineBalance, "value": json.Number("5.00")}},
		{storage.Loans, ID("loan-" + HanasBooks[0]), map[string]any{"userId": ID("1008"), "itemId": ID(HanasBooks[0]),
			"loanDate": at(now), "dueDate": at(now.AddDate(0, 0, 21)), "action": schemas.LoanCheckedOut, "status": map[string]any{"name": schemas.LoanOpen},
			"loanPolicyId": PolicyStandard, "checkoutServicePointId": ServicePointDesk2, "renewalCount": 0}},
		{storage.Loans, ID("loan-" + HanasBooks[1]), map[string]any{"userId": ID("1008"), "itemId": ID(HanasBooks[1]),
			"loanDate": at(lent), "dueDate": at(due), "returnDate": at(back), "action": schemas.LoanCheckedIn, "status": map[string]any{"name": schemas.LoanClosed},
			"loanPolicyId": PolicyStandard, "checkoutServicePointId": ServicePointDesk2, "checkinServicePointId": ServicePointDesk2}},
		{storage.FeeFineAccounts, ID("fine-" + HanasBooks[1]), map[string]any{"amount": json.Number("7.50"), "remaining": json.Number("7.50"),
			"status": map[string]any{"name": schemas.FeeFineOpen}, "paymentStatus": map[string]any{"name": schemas.PaymentStatusOutstanding},
			"feeFineId": overdueFineType, "feeFineType": schemas.FeeFineOverdueFine, "ownerId": FeeFineOwner, "feeFineOwner": "Main circulation desk",
			"userId": ID("1008"), "loanId": ID("loan-" + HanasBooks[1]), "itemId": ID(HanasBooks[1]), "barcode": HanasBooks[1],
			"title": titles[(155-1)%len(titles)], "dueDate": at(due), "returnedDate": at(back),
			"loanPolicyId": PolicyStandard, "overdueFinePolicyId": OverdueFinePolicy}},
	}
}

// GracesLoans are the items Grace (1007, undergraduate, at most three)
// has out when the sample is loaded: she is at her limit, each loan may
// be renewed once, and Bob waits for the first and the last (holds), so
// that their check-ins put them on the hold shelf at Circ Desk 2.
var GracesLoans = []string{"book-151", "book-152", "book-153"}

// Calendar is the sample library's calendar: both desks open 09:00 to
// 21:00 every day of the year from the load, but a week after it, closed
// for stocktaking (StocktakingDay): a DVD lent on the day of the load is
// due the day after that, at its end.
const Calendar = "0b5c2c3f-5d0e-4b5e-9a0c-6f4a1c2d3e20"

// StocktakingDay is the day the sample's calendar closes the desks, a
// week after now.
func StocktakingDay(now time.Time) time.Time { return now.UTC().AddDate(0, 0, 7) }

func calendar(now time.Time) seed {
	var open []map[string]string
	for _, day := range []string{"MONDAY", "TUESDAY", "WEDNESDAY", "THURSDAY", "FRIDAY", "SATURDAY", "SUNDAY"} {
		open = append(open, map[string]string{"startDay": day, "startTime": "09:00", "endDay": day, "endTime": "21:00"})
	}
	closed := StocktakingDay(now).Format(time.DateOnly)
	return seed{storage.Calendars, Calendar, map[string]any{"name": "Opening hours", "startDate": now.UTC().AddDate(0, 0, -1).Format(time.DateOnly),
		"endDate": now.UTC().AddDate(1, 0, 0).Format(time.DateOnly), "assignments": []string{ServicePointDesk1, ServicePointDesk2},
		"normalHours": open, "exceptions": []map[string]any{{"name": "Stocktaking", "startDate": closed, "endDate": closed, "openings": []any{}}}}}
}

// notices are the sample library's notice templates and policy.
func notices() []seed {
	template := func(id, name, category, header, body string) seed {
		return seed{storage.NoticeTemplates, id, map[string]any{"name": name, "active": true, "category": category,
			"templateResolver": "mustache", "outputFormats": []string{"text/plain"},
			"localizedTemplates": map[string]any{"en": map[string]any{"header": header, "body": body}}}}
	}
	return []seed{
		template(TemplateHoldReady, "Hold ready for pickup", "Request", "Your hold is ready: {{item.title}}",
			"Dear {{user.firstName}},\n\n{{item.title}} ({{item.barcode}}) is waiting for you at {{request.servicePointPickup}}"+
				"{{#request.holdShelfExpirationDate}} until {{request.holdShelfExpirationDate}}{{/request.holdShelfExpirationDate}}.\n\nYour library"),
		template(TemplateDueTomorrow, "Due tomorrow", "Loan", "Due tomorrow: {{item.title}}",
			"Dear {{user.firstName}},\n\n{{item.title}} ({{item.barcode}}) is due back {{loan.dueDate}}. "+
				"Renew it at a kiosk or the desk if you need it longer.\n\nYour library"),
		{storage.PatronNoticePolicies, NoticePolicy, map[string]any{"name": "Hold ready and due tomorrow", "active": true,
			"loanNotices": []map[string]any{{"name": "Due tomorrow", "templateId": TemplateDueTomorrow, "format": "Email",
				"frequency": "One time", "realTime": false, "sendOptions": map[string]any{"sendWhen": schemas.NoticeDueDate,
					"sendHow": schemas.NoticeBefore, "sendBy": map[string]any{"duration": 1, "intervalId": "Days"}}}},
			"requestNotices": []map[string]any{{"name": "Hold ready", "templateId": TemplateHoldReady, "format": "Email",
				"frequency": "One time", "realTime": true, "sendOptions": map[string]any{"sendWhen": schemas.NoticeAvailable,
					"sendHow": schemas.NoticeUponAt}}}}},
	}
}

// at is a sample record's time on the wire, to the second.
func at(t time.Time) string { return schemas.FormatTime(t.Truncate(time.Second)) }

// gracesLoans are Grace's loans, made now at Circ Desk 2 for the
// undergraduates' two weeks, and Bob's holds.
func gracesLoans(now time.Time) []seed {
	var seeds []seed
	for _, barcode := range GracesLoans {
		seeds = append(seeds, seed{storage.Loans, ID("loan-" + barcode), map[string]any{"userId": ID("1007"), "itemId": ID(barcode),
			"loanDate": at(now), "dueDate": at(now.AddDate(0, 0, 14)), "action": schemas.LoanCheckedOut, "status": map[string]any{"name": schemas.LoanOpen},
			"loanPolicyId": PolicyUndergrad, "checkoutServicePointId": ServicePointDesk2, "renewalCount": 0}})
	}
	for _, barcode := range []string{GracesLoans[0], GracesLoans[2]} {
		seeds = append(seeds, seed{storage.Requests, ID("hold-" + barcode), map[string]any{"requestType": schemas.RequestTypeHold,
			"requestLevel": "Item", "requestDate": at(now), "requesterId": ID("1002"), "itemId": ID(barcode),
			"status": schemas.RequestNotYetFilled, "position": 1, "fulfillmentPreference": "Hold Shelf", "pickupServicePointId": ServicePointDesk2}})
	}
	return seeds
}

// LoadData is the tenant Loader for the loadReference and loadSample
// parameters. Records that exist (by id) are left as they are, and the
// sample rules are set only where no rules are, so loading twice changes
// nothing and never overwrites a librarian's edits.
func LoadData(ctx context.Context, tx pgx.Tx, t storage.Tenant, attrs storage.TenantAttributes) ([]string, error) {
	reference := paramTrue(attrs, "loadReference")
	sample := paramTrue(attrs, "loadSample")
	var msgs []string
	if reference || sample {
		n, err := loadSeeds(ctx, tx, t, referenceSeeds())
		if err != nil {
			return nil, fmt.Errorf("load reference data: %w", err)
		}
		msgs = append(msgs, "reference data: "+strconv.Itoa(n)+" new records")
	}
	if sample {
		n, err := loadSeeds(ctx, tx, t, sampleSeeds(time.Now()))
		if err != nil {
			return nil, fmt.Errorf("load sample data: %w", err)
		}
		msgs = append(msgs, "sample data: "+strconv.Itoa(n)+" new records")
		var exists bool
		if err := tx.QueryRow(ctx, postgres.WithTables(`SELECT EXISTS (SELECT 1 FROM %s WHERE tenant_id = $1)`, postgres.TableCirculationRules), string(t)).Scan(&exists); err != nil {
			return nil, postgres.Interpret(err, t)
		}
		if !exists {
			if err := rules.Write(ctx, tx, t, Rules); err != nil {
				return nil, fmt.Errorf("load sample rules: %w", err)
			}
			msgs = append(msgs, "sample data: circulation rules with "+strconv.Itoa(len(Rules.Rules))+" rules")
		}
		// The balance blocks borrowing, in the library's words, unless a
		// librarian has said otherwise of the condition.
		if _, err := tx.Exec(ctx, postgres.WithTables(`UPDATE %s SET jsonb = jsonb || jsonb_build_object('blockBorrowing', true,
			'message', 'Patron has fees/fines over the limit: please pay at the kiosk or the desk')
			WHERE tenant_id = $1 AND id = $2 AND jsonb ->> 'message' = '' AND jsonb ->> 'blockBorrowing' = 'false'`, postgres.TableBlockCondition),
			string(t), schemas.ConditionFeeFineBalance); err != nil {
			return nil, postgres.Interpret(err, t)
		}
	}
	return msgs, nil
}

func paramTrue(attrs storage.TenantAttributes, key string) bool {
	v, _ := attrs.Parameter(key)
	return v == "true"
}

func loadSeeds(ctx context.Context, tx pgx.Tx, t storage.Tenant, seeds []seed) (int, error) {
	n := 0
	for _, s := range seeds {
		doc, err := json.Marshal(s.doc)
		if err != nil {
			return n, err
		}
		stored, err := record.Insert(ctx, tx, t, s.r, s.id, doc, true)
		if err != nil {
			return n, err
		}
		if stored != nil {
			n++
		}
	}
	return n, nil
}

// numbered is prefix and n, zero-padded to width digits: a sample barcode.
func numbered(prefix string, width, n int) string {
	digits := strconv.Itoa(n)
	return prefix + strings.Repeat("0", max(0, width-len(digits))) + digits
}
