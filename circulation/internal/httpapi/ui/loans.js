// The circulation desk's page: find a patron by barcode or name and act
// on their open loans (renew, change the due date, claim returned,
// declare lost, check in),
// each through circulation's own route. An action is offered only where
// the server says it would be done (the loan's actions, from the one
// table the routes refuse by, and the renewal judged against the loan's
// policy) and the caller's permission allows it; where not, the button
// is disabled and says why, in words a touch screen shows too. Claim
// returned, declare lost and check in ask first, naming the item and
// the patron, a change of due date asks the date and a check-in of an
// item claimed returned how the claim is resolved; Cancel is the
// default. A renewal refused only for what an
// override lifts (a patron block, the policy's refusals) is offered to
// be overridden, as FOLIO's Users app offers it: the librarian says why
// and, where the policy gives no due date, the due date.
"use strict";

const FIND = "GET /circulation/patron-loans";

// actions are the loan actions, keyed as the server's answer keys them
// (loan.actions), each with the route it calls (whose permission the
// server answers) and the call it makes; ask is the question a
// confirmation puts, details the question that asks for details (the
// due date, a claim's resolution; null where the loan needs none) the
// call sends (neither: done at once), done says what happened.
const actions = [
  { id: "renew", key: "renew", text: "Renew", route: "POST /circulation/renew-by-id",
    call: (p, l, sp) => api("POST", "/circulation/renew-by-id", { itemId: l.itemId, userId: p.id, servicePointId: sp }),
    done: (l, answer) => `Renewed ${titleOf(l)}: due ${new Date(answer.dueDate).toLocaleString()}.` },
  { id: "due", key: "changeDueDate", text: "Change due date", route: "POST /circulation/loans/{id}/change-due-date",
    details: (p, l) => ({ text: `Change the due date of ${itemOf(l)}, on loan to ${patronOf(p)} and due ${new Date(l.dueDate).toLocaleString()}?`,
      ok: "Change due date", due: { value: localDateTime(new Date(l.dueDate)), at: l.dueDate } }),
    call: (p, l, sp, d) => api("POST", `/circulation/loans/${encodeURIComponent(l.id)}/change-due-date`, { dueDate: d.dueDate }),
    done: (l, answer, d) => `${titleOf(l)} is now due ${new Date(d.dueDate).toLocaleString()}.` },
  { id: "claim", key: "claimReturned", text: "Claim returned", route: "POST /circulation/loans/{id}/claim-item-returned",
    ask: (p, l) => `Record that ${patronOf(p)} says they returned ${itemOf(l)}? The item becomes Claimed returned; the loan stays open.`,
    confirm: "Claim returned",
    call: (p, l) => api("POST", `/circulation/loans/${encodeURIComponent(l.id)}/claim-item-returned`, { itemClaimedReturnedDateTime: new Date().toISOString() }),
    done: (l) => `${titleOf(l)} is claimed returned.` },
  { id: "lost", key: "declareLost", text: "Declare lost", route: "POST /circulation/loans/{id}/declare-item-lost",
    ask: (p, l, spName) => `Declare ${itemOf(l)}, on loan to ${patronOf(p)}, lost at ${spName}? The loan stays open.`,
    confirm: "Declare lost",
    call: (p, l, sp) => api("POST", `/circulation/loans/${encodeURIComponent(l.id)}/declare-item-lost`, { servicePointId: sp }),
    done: (l) => `${titleOf(l)} is declared lost.` },
  { id: "checkin", key: "checkIn", text: "Check in", route: "POST /circulation/check-in-by-barcode",
    ask: (p, l, spName) => `Check in ${itemOf(l)}, on loan to ${patronOf(p)}, at ${spName}? The loan is closed.`,
    confirm: "Check in",
    // An item claimed returned is checked in with its claim resolved:
    // the librarian says how (FOLIO's claimedReturnedResolution, which
    // decides whether the overdue fine is charged).
    details: (p, l, spName) => !(l.actions.checkIn.resolutions || []).length ? null : {
      text: `Check in ${itemOf(l)}, claimed returned by ${patronOf(p)}, at ${spName}? The loan is closed. Was it found by the library (no overdue fine) or returned by the patron?`,
      ok: "Check in", choice: { label: "Claim resolved", options: l.actions.checkIn.resolutions } },
    call: (p, l, sp, d) => api("POST", "/circulation/check-in-by-barcode",
      { itemBarcode: l.itemBarcode, servicePointId: sp, ...(d.resolution ? { claimedReturnedResolution: d.resolution } : {}) }),
    done: (l) => `${titleOf(l)} is checked in.` },
];

const loanColumns = ["Title", "Barcode", "Due", "Renewals", "Actions"];

// feeActions are what the desk does with a fee/fine: take a payment, or
// waive some of it, each through mod-feesfines' route at circulation,
// asked first (naming the amount in the library's currency, the fee/fine
// and the patron) with Cancel the default.
const feeActions = [
  { id: "pay", text: "Pay", route: "POST /accounts/{id}/pay",
    ask: (p, f, amount, method) => `Take ${money(amount)} from ${patronOf(p)} for ${feeOf(f)}, paid by ${method}?`,
    confirm: "Take payment",
    call: (f, amount, method, sp) => api("POST", `/accounts/${encodeURIComponent(f.id)}/pay`,
      { amount, paymentMethod: method, notifyPatron: false, servicePointId: sp, userName: personName(session.me) || "desk" }),
    done: (f, answer) => `Paid ${money(answer.amount)} of ${feeOf(f)}: ${money(answer.remainingAmount)} remains.` },
  { id: "waive", text: "Waive", route: "POST /accounts/{id}/waive",
    ask: (p, f, amount) => `Waive ${money(amount)} of ${feeOf(f)}, owed by ${patronOf(p)}?`,
    confirm: "Waive",
    call: (f, amount, method, sp) => api("POST", `/accounts/${encodeURIComponent(f.id)}/waive`,
      { amount, paymentMethod: "Waived at the desk", notifyPatron: false, servicePointId: sp, userName: personName(session.me) || "desk" }),
    done: (f, answer) => `Waived ${money(answer.amount)} of ${feeOf(f)}: ${money(answer.remainingAmount)} remains.` },
];

const feeColumns = ["Fee/fine", "Item", "Charged", "Remaining", "Pay or waive"];

// currency is the library's, as the server says; methods are the ways a
// payment is taken.
let currency = "USD";
let methods = [];

// money is an amount (a decimal as the server writes it) in the library's
// currency, for people: the amount itself is sent as typed.
function money(amount) {
  const n = Number(amount);
  if (!Number.isFinite(n)) return `${amount} ${currency}`;
  return new Intl.NumberFormat(undefined, { style: "currency", currency }).format(n);
}

function feeOf(f) {
  return `the ${f.feeFineType}${f.title ? " for “" + f.title + "”" : ""}`;
}

function titleOf(l) {
  return l.title || l.itemBarcode || "the item";
}

// itemOf and patronOf name an item and a patron in a question: the title
// and the barcode, the name and the barcode.
function itemOf(l) {
  return `“${l.title || "an untitled item"}” (barcode ${l.itemBarcode || "none"})`;
}

function patronOf(p) {
  return `${p.name || "the patron"} (barcode ${p.barcode || "none"})`;
}

function searchedFor() {
  return new URLSearchParams(location.search).get("patron") || "";
}

// shown is what the page shows of each patron's loans, in its order
// (patron id → the loans as last drawn): after an action the loans are
// drawn again in that order, and a loan gone (checked in) keeps its row,
// said to be closed, so the row under the pointer is the loan it was.
// A search draws afresh.
let shown = new Map();

async function find({ keepRows = false } = {}) {
  const text = searchedFor();
  const results = document.getElementById("results");
  if (!text) {
    results.replaceChildren();
    return;
  }
  const gen = generation;
  try {
    const answer = await api("GET", "/circulation/patron-loans?" + new URLSearchParams({ patron: text }));
    if (gen !== generation) return;
    showServicePoints(answer.servicePoints);
    currency = answer.currency || "USD";
    methods = answer.paymentMethods || [];
    render(keepRows ? inShownOrder(answer.patrons) : answer.patrons);
    if (answer.patrons.length === 0) say("status", `No patron has the barcode or the name “${text}”.`, false);
  } catch (err) {
    if (gen === generation) say("status", err.message, false);
  }
}

// The service point is remembered per browser and tenant; nothing
// remembered (or a point the tenant no longer has), it is the tenant's
// first by name.
function servicePointKey() {
  return "servicePoint." + session.tenant;
}

function showServicePoints(points) {
  const select = document.getElementById("service-point");
  const sorted = [...points].sort((a, b) => a.name.localeCompare(b.name));
  const chosen = select.value || localStorage.getItem(servicePointKey()) || "";
  select.replaceChildren(...sorted.map((sp) => el("option", { value: sp.id, text: sp.name })));
  if (sorted.some((sp) => sp.id === chosen)) select.value = chosen;
  else if (sorted.length > 0) select.value = sorted[0].id;
}

// judged is what the page says of an action on a loan: whether it is
// offered and, when not, why.
function judged(a, l) {
  if (!may(a.route)) return { allowed: false, reason: `${a.text} needs ${needs(a.route)}` };
  const verdict = (l.actions || {})[a.key];
  if (!verdict) return { allowed: false, reason: "The server did not say whether this may be done" };
  return verdict;
}

function renewalsText(l) {
  const used = `${l.renewalCount} used`;
  if (!l.loanPolicyName) return used;
  if (!l.renewable) return `${used} · not renewable`;
  return `${used} · ${l.renewalsLeft === "unlimited" ? "unlimited" : l.renewalsLeft + " left"}`;
}

// disable disables button b, saying why: the title for a pointer, the
// text below the button (in cell, with id) for a touch screen, its
// description for a screen reader.
function disable(b, id, reason, cell) {
  b.disabled = true;
  b.title = reason;
  b.setAttribute("aria-describedby", id);
  cell.append(el("small", { id, class: "desk-reason", text: reason }));
}

// overrideButton is the Override button under a refused renewal (v, its
// verdict): it opens the override's question, or is disabled saying who
// may override where the librarian may not.
function overrideButton(v, p, l) {
  const b = el("button", { type: "button", class: "danger", "data-override": "renew", text: "Override",
    "aria-label": `Override the refusal to renew ${titleOf(l)}` });
  const cell = el("div", { class: "desk-override" }, b);
  if (v.override.allowed) b.addEventListener("click", () => askOverride(v, p, l, b));
  else disable(b, `why-${l.id}-override`, v.override.reason, cell);
  return cell;
}

// askOverride asks for the override of a refused renewal (ask): what was
// refused, naming the item and the patron; why it is overridden (FOLIO
// keeps the comment with the loan); and the due date where the server
// says the override needs one, later than the loan's. Overridden, the
// renewal is sent with the blocks the server named (FOLIO's
// overrideBlocks).
function askOverride(v, p, l, button) {
  say("status", "", true);
  const due = v.override.dueDateRequired ? { min: l.dueDate ? localDateTime(laterMinute(l.dueDate)) : "" } : null;
  ask(`Renewing ${itemOf(l)} for ${patronOf(p)} is refused: ${v.reason}. Renew it through an override?`,
    { ok: "Override and renew", comment: "Why (kept with the loan)", due }, (comment, dueDate) => {
      const blocks = { comment };
      for (const b of v.override.blocks) {
        blocks[b] = b === "renewalDueDateRequiredBlock" && dueDate ? { dueDate } : {};
      }
      const sp = document.getElementById("service-point").value;
      perform("loan " + l.id, button,
        () => api("POST", "/circulation/renew-by-id", { itemId: l.itemId, userId: p.id, servicePointId: sp, overrideBlocks: blocks }),
        (answer) => `Renewed ${titleOf(l)} through an override: due ${new Date(answer.dueDate).toLocaleString()}.`,
        (err) => `Not done (override the refusal to renew ${titleOf(l)}): ${err.message}`);
    }, () => button.focus());
}

// laterMinute is the first whole minute after the instant at: the
// earliest a date field, which holds minutes, can give that is later.
function laterMinute(at) {
  return new Date(Math.floor(Date.parse(at) / 60000) * 60000 + 60000);
}

// localDateTime is d as a datetime-local field holds it: the browser's
// time, to the minute.
function localDateTime(d) {
  const two = (n) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${two(d.getMonth() + 1)}-${two(d.getDate())}T${two(d.getHours())}:${two(d.getMinutes())}`;
}

// inShownOrder is patrons with each one's loans in the order the page
// shows them, a loan no longer open kept at its place (closed: true), the
// loans the page did not show after them.
function inShownOrder(patrons) {
  return patrons.map((p) => {
    const before = shown.get(p.id);
    if (!before) return p;
    const now = new Map(p.loans.map((l) => [l.id, l]));
    const loans = before.map((l) => now.get(l.id) || { ...l, closed: true, actions: {} });
    for (const l of p.loans) if (!before.some((b) => b.id === l.id)) loans.push(l);
    return { ...p, loans };
  });
}

function render(patrons) {
  shown = new Map(patrons.map((p) => [p.id, p.loans]));
  const results = document.getElementById("results");
  results.replaceChildren(...patrons.map((p) => {
    const title = `${p.name || "A patron"}${p.barcode ? " (" + p.barcode + ")" : ""}`;
    const head = el("h2", { id: "patron-" + p.id, text: title });
    const fees = renderFees(p);
    if (p.loans.length === 0) return el("section", { "data-patron": p.id }, head, el("p", { class: "hint", text: "No open loan." }), fees);
    const rows = p.loans.map((l) => {
      if (l.closed) {
        // Checked in since the page drew it: its row stays, without
        // buttons, until the next search.
        return el("tr", { "data-loan": l.id, class: "closed" },
          el("td", { "data-label": loanColumns[0], text: titleOf(l) }),
          el("td", { "data-label": loanColumns[1], class: "barcode", text: l.itemBarcode || "" }),
          el("td", { "data-label": loanColumns[2], text: "" }),
          el("td", { "data-label": loanColumns[3] }),
          el("td", { "data-label": loanColumns[4] }, el("small", { class: "desk-reason", text: "Checked in: no longer on loan" })));
      }
      const cells = actions.map((a) => {
        const v = judged(a, l);
        const b = el("button", { type: "button", class: a.id === "lost" ? "danger" : "secondary", "data-action": a.id, text: a.text,
          "aria-label": `${a.text}: ${titleOf(l)}` });
        const cell = el("div", { class: "desk-action" }, b);
        if (v.allowed) b.addEventListener("click", () => (a.details ? detailAction(a, p, l, b) : a.ask ? confirmAction(a, p, l, b) : act(a, p, l, b)));
        else {
          disable(b, `why-${l.id}-${a.id}`, v.reason, cell);
          if (v.override) cell.append(overrideButton(v, p, l));
        }
        return cell;
      });
      const due = l.dueDate ? new Date(l.dueDate).toLocaleString() : "";
      // A loan a self-check machine made offline says so, and what it broke.
      const what = titleOf(l) + (l.itemStatus && l.itemStatus !== "Checked out" ? ` (${l.itemStatus})` : "") +
        (l.offline ? ` · ${l.offline}` : "");
      return el("tr", { "data-loan": l.id },
        el("td", { "data-label": loanColumns[0], text: what }),
        el("td", { "data-label": loanColumns[1], class: "barcode", text: l.itemBarcode || "" }),
        el("td", { "data-label": loanColumns[2], text: due }),
        // One box for the count and the policy, a space between: as a
        // card's two flex items they would split its width, breaking
        // words.
        el("td", { "data-label": loanColumns[3] }, el("div", {},
          el("span", { class: "renewals", text: renewalsText(l) }), " ",
          el("span", { class: "policy", text: l.loanPolicyName || "" }))),
        el("td", { "data-label": loanColumns[4] }, el("div", { class: "desk-actions" }, ...cells)));
    });
    // Fixed widths (app.css, the desk page's block): the columns stay put
    // when a loan's actions change.
    const table = el("table", { class: "cards desk-loans", "aria-labelledby": "patron-" + p.id },
      el("colgroup", {}, ...loanColumns.map((c) => el("col", { class: "col-" + c.toLowerCase() }))),
      el("thead", {}, el("tr", {}, ...loanColumns.map((c) => el("th", { scope: "col", text: c })))), el("tbody", {}, ...rows));
    return el("section", { "data-patron": p.id }, head, el("div", { class: "table-wrap" }, table), fees);
  }));
}

// renderFees is what the patron owes: the balance and each open
// fee/fine, with the amount to pay or waive (what remains, at first) and
// how a payment is made; Pay and Waive are offered where the person may
// call their routes, and say why not where not.
function renderFees(p) {
  const fees = p.feesFines || [];
  const head = el("h3", { id: "fees-" + p.id, class: "fees-head",
    text: fees.length ? `Fees/fines: ${money(p.feeFineBalance)} owed` : "Fees/fines: nothing owed" });
  if (fees.length === 0) return el("div", { class: "fees", "data-fees": p.id }, head);
  const rows = fees.map((f) => {
    const amount = el("input", { type: "text", inputmode: "decimal", class: "fee-amount", value: f.remaining,
      "aria-label": `Amount for ${feeOf(f)}`, autocomplete: "off" });
    const method = el("select", { class: "fee-method", "aria-label": `How ${feeOf(f)} is paid` },
      ...methods.map((m) => el("option", { value: m, text: m })));
    const buttons = feeActions.map((a) => {
      const b = el("button", { type: "button", class: a.id === "waive" ? "secondary" : "", "data-fee-action": a.id, text: a.text,
        "aria-label": `${a.text}: ${feeOf(f)}` });
      const cell = el("div", { class: "desk-action" }, b);
      const why = !may(a.route) ? `${a.text} needs ${needs(a.route)}` : a.id === "pay" && methods.length === 0 ?
        "No payment method is set up for this library" : "";
      if (why) {
        disable(b, `why-${f.id}-${a.id}`, why, cell);
      } else {
        b.addEventListener("click", () => confirmFee(a, p, f, amount.value.trim(), method.value, b));
      }
      return cell;
    });
    return el("tr", { "data-fee": f.id },
      el("td", { "data-label": feeColumns[0], text: f.feeFineType }),
      el("td", { "data-label": feeColumns[1], text: f.title || f.itemBarcode || "" }),
      el("td", { "data-label": feeColumns[2], text: money(f.amount) }),
      el("td", { "data-label": feeColumns[3], class: "fee-remaining", text: money(f.remaining) }),
      el("td", { "data-label": feeColumns[4] }, el("div", { class: "fee-inputs" }, amount, method),
        el("div", { class: "desk-actions" }, ...buttons)));
  });
  const table = el("table", { class: "cards desk-fees", "aria-labelledby": "fees-" + p.id },
    el("thead", {}, el("tr", {}, ...feeColumns.map((c) => el("th", { scope: "col", text: c })))), el("tbody", {}, ...rows));
  return el("div", { class: "fees", "data-fees": p.id }, head, el("div", { class: "table-wrap" }, table));
}

// confirmFee asks before money moves, naming the amount, the fee/fine
// and the patron; Cancel (or Escape) moves nothing.
function confirmFee(a, p, f, amount, method, button) {
  say("status", "", true);
  askFirst(a.ask(p, f, amount, method), { ok: a.confirm }, () => actOnFee(a, f, amount, method, button), () => button.focus());
}

// actOnFee takes the payment or the waiver (perform); a refusal says the
// server's reason, which the librarian can act on (more than remains, a
// method the desk does not take).
function actOnFee(a, f, amount, method, button) {
  const sp = document.getElementById("service-point").value;
  return perform("fee " + f.id, button, () => a.call(f, amount, method, sp), (answer) => a.done(f, answer),
    (err) => `Not done (${a.text.toLowerCase()} ${money(amount)} of ${feeOf(f)}): ${err.message}`);
}

// confirmAction asks before an action that changes the item for good,
// naming the item and the patron; Cancel (or Escape) does nothing.
function confirmAction(a, p, l, button) {
  // A message belongs to the action that caused it: a new question
  // clears the last answer.
  say("status", "", true);
  askFirst(a.ask(p, l, servicePointName()), { ok: a.confirm }, () => act(a, p, l, button), () => button.focus());
}

// servicePointName is the name of the service point chosen.
function servicePointName() {
  const select = document.getElementById("service-point");
  return select.selectedOptions.length ? select.selectedOptions[0].textContent : "no service point";
}

// detailAction asks for what an action sends (ask), naming the item and
// the patron; Cancel (or Escape) does nothing. An action that needs no
// details for this loan (details answers null) is confirmed as asked.
function detailAction(a, p, l, button) {
  const q = a.details(p, l, servicePointName());
  if (!q) return confirmAction(a, p, l, button);
  say("status", "", true);
  ask(q.text, q, (comment, dueDate, resolution) => act(a, p, l, button, { comment, dueDate, resolution }), () => button.focus());
}

// act does the action on a loan (perform), with the details asked.
function act(a, p, l, button, details = {}) {
  const sp = document.getElementById("service-point").value;
  return perform("loan " + l.id, button, () => a.call(p, l, sp, details), (answer) => a.done(l, answer, details),
    (err) => `Not done (${a.text.toLowerCase()} ${titleOf(l)}): ${err.message}`);
}

// inFlight are the loans and fees/fines an action is being done on.
const inFlight = new Set();

// perform calls the server with button disabled, says what was done (or,
// refused, why not, in the server's words) and draws the patrons again;
// the list is busy (aria-busy) until they are drawn. One action at a time
// on a record (what): a second, asked while the first is on its way (its
// button drawn again meanwhile), is not sent.
async function perform(what, button, call, done, notDone) {
  if (inFlight.has(what)) return;
  inFlight.add(what);
  const results = document.getElementById("results");
  button.disabled = true;
  say("status", "", true);
  results.setAttribute("aria-busy", "true");
  try {
    say("status", done((await call()) || {}), true);
  } catch (err) {
    say("status", notDone(err), false);
  } finally {
    button.disabled = false;
    inFlight.delete(what);
  }
  try {
    await find({ keepRows: true });
  } finally {
    results.removeAttribute("aria-busy");
  }
  document.getElementById("status").focus();
}

let generation = 0;

function clear() {
  generation++;
  document.getElementById("results").replaceChildren();
  say("status", "", true);
}

function start() {
  clear();
  if (!may(FIND)) {
    document.getElementById("content").hidden = true;
    say("page-status", `${personName(session.me) || "You"} may not see patrons' loans: that needs ${needs(FIND)}.`, false);
    return;
  }
  say("page-status", "", true);
  document.getElementById("patron").value = searchedFor();
  find();
}

document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("find").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const url = new URL(location.href);
    url.searchParams.set("patron", document.getElementById("patron").value.trim());
    history.replaceState(null, "", url);
    say("status", "", true);
    find();
  });
  document.getElementById("service-point").addEventListener("change", (ev) => localStorage.setItem(servicePointKey(), ev.target.value));
  boot({ start, clear });
});
