// The operator's lock console: the live locks with their patrons, holders
// and service points by name, refreshed every second with a countdown to
// each expiry, the kiosks' day (the self-check machines connected to the
// SIP2 doors and the sessions that ended today), the patron notices that
// could not be sent, the recent lock history, and releasing a lock after a
// confirmation whose default is to keep it.
"use strict";

const LIST = "GET /circulation/check-out-locks";
const HISTORY = "GET /circulation/check-out-locks/history";
const RELEASE = "DELETE /circulation/check-out-locks/{id}";
const KIOSKS = "GET /circulation/kiosks";
const NOTICES = "GET /circulation/notices/failed";
const noticeColumns = ["Patron", "Notice", "Due", "Tries", "Why"];
// The desk's page, where a patron's link in the history leads.
const DESK = "GET /circulation/patron-loans";

const columns = ["Patron", "Held by", "Item", "Service point", "Request", "Held for", "Expires in", "Action"];

// The history's filters live in the address (?patron=&account=&type=&from=
// &to=&offset=), so a refresh of the page, or its link, shows the same rows;
// storage filters them (its CQL over the history), never the page.
const filterNames = ["patron", "account", "type", "from", "to"];
const historyPageSize = 50;

function historyParams() {
  const here = new URLSearchParams(location.search);
  const q = new URLSearchParams();
  for (const name of filterNames) {
    let v = here.get(name);
    if (!v) continue;
    // From and until are the person's local times, sent as instants.
    if (name === "from" || name === "to") v = new Date(v).toISOString();
    q.set(name, v);
  }
  return q;
}

function historyOffset() {
  const n = Number(new URLSearchParams(location.search).get("offset"));
  return Number.isInteger(n) && n > 0 ? n : 0;
}

// historyURL is the page of the history the address asks for; exportURL
// the same rows, every one, as CSV.
function historyURL() {
  const q = historyParams();
  q.set("tz", readersZone());
  q.set("offset", String(historyOffset()));
  q.set("limit", String(historyPageSize));
  return "/circulation/check-out-locks/history?" + q;
}

function exportURL() {
  const q = historyParams();
  q.set("tz", readersZone());
  return "/circulation/check-out-locks/history.csv?" + q;
}

// readersZone is the time zone the history's times are said in: the
// browser's.
function readersZone() {
  return Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
}

function setFilters(values, offset) {
  const url = new URL(location.href);
  for (const name of filterNames) {
    if (values[name]) url.searchParams.set(name, values[name]);
    else url.searchParams.delete(name);
  }
  if (offset > 0) url.searchParams.set("offset", String(offset));
  else url.searchParams.delete("offset");
  history.replaceState(null, "", url);
  say("export-status", "", true);
  refresh(true);
}

function showFilters() {
  const here = new URLSearchParams(location.search);
  for (const name of filterNames) document.getElementById("f-" + name).value = here.get(name) || "";
}

// exportHistory downloads the history's matching rows; what it says
// stays until the person's next action (setFilters, another export), the
// second's refresh leaves it.
async function exportHistory() {
  say("export-status", "", true);
  try {
    const res = await fetch(exportURL(), { headers: { "X-Okapi-Tenant": session.tenant }, credentials: "same-origin" });
    if (!res.ok) throw new ApiError(res.status, await res.json().catch(() => null), `${res.status} ${res.statusText}`);
    const link = el("a", { href: URL.createObjectURL(await res.blob()), download: "lock-history.csv" });
    link.click();
    // The download reads the blob after the click returns: freed later.
    setTimeout(() => URL.revokeObjectURL(link.href), 60000);
    const n = Number(res.headers.get("X-Total-Records"));
    say("export-status", `Exported ${n} event${n === 1 ? "" : "s"} as lock-history.csv.`, true);
  } catch (err) {
    say("export-status", "Not exported: " + err.message, false);
  }
}

function renderHistoryPage(history) {
  const offset = historyOffset();
  const total = history.totalRecords || 0;
  const shown = history.events.length;
  const params = historyParams();
  const filtered = [...params.keys()].length > 0;
  const empty = params.has("from") && params.has("to") && params.get("from") > params.get("to");
  document.getElementById("history-status").textContent = total === 0 ?
    (empty ? "From is after Until: no event can match." : filtered ? "No event matches these filters." : "No event yet.") :
    `Events ${offset + 1}–${offset + shown} of ${total}${filtered ? " matching the filters" : ""}, newest first.`;
  document.getElementById("f-newer").disabled = offset === 0;
  document.getElementById("f-older").disabled = offset + shown >= total;
}
// The history's columns as the page heads them (the server's words).
const historyColumns = () => [...document.querySelectorAll("#history thead th")].map((th) => th.textContent);
const kioskColumns = ["Kiosk", "Address", "Connected", "Ended", "Last message", "Messages", "Refused"];

// sip2Names are the SIP2 messages a kiosk sends, by command code, as the
// kiosks' day names a session's last one.
const sip2Names = { "93": "login", "99": "status", "97": "resend", "11": "check-out", "09": "check-in", "23": "patron status",
  "63": "patron information", "17": "item information", "29": "renew", "65": "renew all", "35": "end session" };

let locks = [];
let fetchedAt = 0;
let busy = false;
let timers = [];
// generation counts the clears: an answer that arrives after one belongs
// to data that went, and is dropped.
let generation = 0;

// ticking is a duration that changes each second: to the second.
function ticking(ms) {
  return ms < 0 ? "expired" : duration(Math.round(ms / 1000) * 1000);
}


function setCell(td, text, title, href) {
  const a = td.querySelector("a");
  if (href) {
    if (!a || a.getAttribute("href") !== href || a.textContent !== text) td.replaceChildren(traceLink(href, text));
  } else if (a || td.textContent !== text) td.textContent = text;
  if ((td.title || "") !== (title || "")) td.title = title || "";
}

// traceLink is a link to a trace in the operators' trace viewer
// (circulation's TRACE_URL), opened beside the console.
function traceLink(href, text) {
  return el("a", { href, target: "_blank", rel: "noopener", text });
}

// renderLocks shows the locks, four times a second for the countdowns. A
// lock's row is made once and then only its cells' text changes: a Release
// button replaced under the pointer would swallow a click whose press and
// release straddled a redraw, and one replaced under the keyboard focus
// would lose it.
function renderLocks() {
  const body = document.querySelector("#locks tbody");
  // The rows of locks that are gone go first, so the rows that stay are
  // already in order and never move (a moved row loses the focus).
  const live = new Set(locks.map((l) => l.id));
  for (const tr of [...body.rows]) {
    if (!live.has(tr.dataset.lock)) tr.remove();
  }
  const rows = new Map([...body.rows].map((tr) => [tr.dataset.lock, tr]));
  const now = Date.now();
  const skew = now - fetchedAt;
  let before = body.firstElementChild;
  for (const l of locks) {
    let tr = rows.get(l.id);
    if (!tr) tr = lockRow(l.id);
    const h = l.holder || {};
    const held = new Date(fetchedAt).getTime() - new Date(l.creationDate).getTime() + skew;
    const left = new Date(l.expiresAt).getTime() - now;
    // The patron and the holder as circulation words them, for this
    // table, the history and the CSV alike.
    const patron = l.patronText;
    const cells = [[patron, l.userId], [l.heldBy, l.holderName], [h.itemBarcode || ""],
      [l.servicePointName || h.servicePointId || "", h.servicePointId], [h.requestId || (l.traceUrl ? "trace" : ""), l.traceUrl ? "Open the trace of this lock's check-out" : "", l.traceUrl], [ticking(held)], [ticking(left)]];
    cells.forEach(([text, title, href], i) => setCell(tr.cells[i], text, title, href));
    const button = tr.querySelector("button");
    const label = "Release the lock of patron " + patron;
    if (button.getAttribute("aria-label") !== label) button.setAttribute("aria-label", label);
    if (tr !== before) body.insertBefore(tr, before);
    before = tr.nextElementSibling;
  }
  document.getElementById("no-locks").hidden = locks.length > 0;
}

// lockRow is an empty row for the lock with this id, its Release button
// asking about the lock as last fetched; read-only, with the reason, for a
// person who may not release locks.
function lockRow(id) {
  const release = el("button", { type: "button", class: "danger", "data-lock": id, text: "Release…" });
  if (may(RELEASE)) {
    release.addEventListener("click", () => {
      const l = locks.find((x) => x.id === id);
      if (l) confirmRelease(l);
    });
  } else {
    release.disabled = true;
    release.title = `Releasing a lock needs ${needs(RELEASE)}`;
  }
  const tds = columns.map((c) => el("td", { "data-label": c }));
  tds[tds.length - 1].append(release);
  return el("tr", { "data-lock": id }, ...tds);
}

function renderHistory(events) {
  const body = document.querySelector("#history tbody");
  const labels = historyColumns();
  body.replaceChildren();
  for (const e of events) {
    const byTitle = e.by ? [e.by.instance, e.by.itemBarcode, e.by.acquiredBy].filter(Boolean).join(" · ") : "";
    // Each cell as the server words it, as the CSV says it (e.row).
    const texts = [[e.row.when], [e.row.what], [e.row.patron, e.userId], [e.row.holder, e.holderName], [e.row.by, byTitle]];
    const cells = texts.map(([text, title], i) => el("td", Object.assign({ "data-label": labels[i], text }, title ? { title } : {})));
    // The trace of the acquisition that caused the event (a waiter's
    // wait), else of the lock's holder.
    const trace = e.byTraceUrl || e.holderTraceUrl;
    if (trace) cells[1].append(" · ", traceLink(trace, "trace"));
    // The patron leads to their loans, at the desk's page, for whom may
    // open it.
    if (e.patron && e.patron.barcode && may(DESK)) {
      const loans = "/ui/loans.html?" + new URLSearchParams({ tenant: session.tenant, patron: e.patron.barcode });
      cells[2].replaceChildren(el("a", { href: loans, text: cells[2].textContent }));
    }
    body.append(el("tr", { "data-event": e.type }, ...cells));
  }
}

// renderKiosks lists the kiosks' day: the self-check machines connected to
// the SIP2 doors, then the sessions that ended, and says which door did not
// answer.
function renderKiosks(answer) {
  const section = document.getElementById("kiosks-section");
  section.hidden = !answer || answer.doors.length === 0;
  if (section.hidden) return;
  const body = document.querySelector("#kiosks tbody");
  body.replaceChildren();
  for (const k of answer.kiosks) {
    const last = new Date(k.lastMessage).toLocaleTimeString() +
      (k.lastCode ? ` (${sip2Names[k.lastCode] || k.lastCode})` : "");
    // A machine is named by the location code it gave at its login, with
    // the account it signed in as (circulation names it, as it names a
    // lock's holder): two behind one address, two names.
    const name = k.name || "not logged in";
    const texts = [name, k.address, new Date(k.since).toLocaleString(),
      k.ended ? new Date(k.ended).toLocaleTimeString() : "connected now", last, String(k.messages), String(k.refusals || 0)];
    body.append(el("tr", { "data-kiosk": k.address + " " + k.since, "data-ended": k.ended ? "true" : "false" },
      ...texts.map((text, i) => el("td", { "data-label": kioskColumns[i], text }))));
  }
  const down = answer.doors.filter((d) => d.error).map((d) => `${d.url}: ${d.error}`);
  const connected = answer.kiosks.filter((k) => !k.ended).length;
  const count = `${connected} connected now, ${answer.kiosks.length - connected} ended in the last 24 hours.`;
  document.getElementById("kiosks-status").textContent = down.length ? `${count} Not heard from ${down.join("; ")}.` : count;
}

// renderNotices lists the patron notices storage's sender gave up on:
// whom each was for, on what, when it was due, its tries and why the last
// failed.
function renderNotices(answer) {
  const section = document.getElementById("notices-section");
  section.hidden = !answer;
  if (!answer) return;
  const body = document.querySelector("#failed-notices tbody");
  body.replaceChildren();
  document.getElementById("failed-notices").closest(".table-wrap").hidden = answer.notices.length === 0;
  for (const n of answer.notices) {
    const texts = [n.patron, n.triggeringEvent, new Date(n.nextRunTime).toLocaleString(), String(n.attempts), n.lastError];
    body.append(el("tr", { "data-notice": n.id }, ...texts.map((text, i) => el("td", { "data-label": noticeColumns[i], text }))));
  }
  const shown = answer.notices.length < answer.totalRecords ? ` (the first ${answer.notices.length} shown)` : "";
  document.getElementById("notices-status").textContent = answer.totalRecords === 0
    ? "None: every notice was sent, or waits its time or its next try."
    : `${answer.totalRecords} notice${answer.totalRecords === 1 ? "" : "s"} could not be sent${shown}.`;
}

// askedAgain is a person's action (a filter, a page, a release) that
// came while a refresh ran, which had read the filters before it: that
// refresh's end refreshes again at once, not at the next second's.
let askedAgain = false;

async function refresh(asked = false) {
  if (busy) {
    askedAgain = askedAgain || asked;
    return;
  }
  busy = true;
  const gen = generation;
  try {
    const [page, history, kiosks, notices] = await Promise.all([
      api("GET", "/circulation/check-out-locks"),
      may(HISTORY) ? api("GET", historyURL()) : Promise.resolve({ events: [], totalRecords: 0 }),
      may(KIOSKS) ? api("GET", "/circulation/kiosks") : Promise.resolve(null),
      may(NOTICES) ? api("GET", "/circulation/notices/failed") : Promise.resolve(null),
    ]);
    if (gen !== generation) return;
    locks = page.checkoutLocks;
    fetchedAt = Date.now();
    renderLocks();
    renderHistory(history.events);
    renderHistoryPage(history);
    renderKiosks(kiosks);
    renderNotices(notices);
    say("status", `${page.totalRecords} lock${page.totalRecords === 1 ? "" : "s"} held. Updated ${new Date().toLocaleTimeString()}.`, true);
  } catch (err) {
    if (gen === generation) say("page-status", err.message, false);
  } finally {
    busy = false;
    if (askedAgain && gen === generation) {
      askedAgain = false;
      refresh();
    }
  }
}

function confirmRelease(l) {
  const patron = l.patronText;
  const question = `Release the lock of patron ${patron}, held by ${l.heldBy}? ` +
    "The check-out holding it will fail if it has not written yet; the release is recorded with your name.";
  askFirst(question, { ok: "Release the lock", cancel: "Keep it" }, () => release(l, patron), () => focusRelease(l.id));
}

// release releases the lock the person confirmed releasing.
async function release(l, patron) {
  // The focus goes to the row after the released one, else to the
  // status that says what happened.
  const row = document.querySelector(`#locks tr[data-lock="${l.id}"]`);
  const next = row && row.nextElementSibling ? row.nextElementSibling.dataset.lock : "";
  try {
    await api("DELETE", "/circulation/check-out-locks/" + encodeURIComponent(l.id));
    say("status", "Released the lock of patron " + patron + ".", true);
  } catch (err) {
    say("status", "Not released: " + err.message, false);
  }
  await refresh(true);
  if (!focusRelease(next)) document.getElementById("status").focus();
}

function focusRelease(id) {
  const button = id && document.querySelector(`#locks tr[data-lock="${id}"] button`);
  if (!button) return false;
  button.focus();
  return true;
}

function clear() {
  generation++;
  askedAgain = false;
  for (const t of timers) clearInterval(t);
  timers = [];
  locks = [];
  document.querySelector("#locks tbody").replaceChildren();
  document.querySelector("#history tbody").replaceChildren();
  document.getElementById("history-status").textContent = "";
  say("export-status", "", true);
  document.querySelector("#kiosks tbody").replaceChildren();
  document.getElementById("kiosks-section").hidden = true;
  document.querySelector("#failed-notices tbody").replaceChildren();
  document.getElementById("notices-section").hidden = true;
  document.getElementById("no-locks").hidden = true;
  say("status", "", true);
}

function start() {
  clear();
  if (!may(LIST)) {
    document.getElementById("content").hidden = true;
    say("page-status", `${personName(session.me) || "You"} may not see the locks: that needs ${needs(LIST)}.`, false);
    return;
  }
  say("page-status", "", true);
  document.getElementById("history-filters").hidden = !may(HISTORY);
  document.getElementById("history-pager").hidden = !may(HISTORY);
  showFilters();
  const note = document.getElementById("release-note");
  note.hidden = may(RELEASE);
  note.textContent = may(RELEASE) ? "" : `You may see the locks but not release them: that needs ${needs(RELEASE)}.`;
  refresh();
  timers.push(setInterval(refresh, 1000), setInterval(renderLocks, 250));
}

document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("history-filters").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const values = {};
    for (const name of filterNames) values[name] = document.getElementById("f-" + name).value.trim();
    setFilters(values, 0);
  });
  document.getElementById("f-clear").addEventListener("click", () => {
    setFilters({}, 0);
    showFilters();
  });
  document.getElementById("f-export").addEventListener("click", exportHistory);
  document.getElementById("f-newer").addEventListener("click", () =>
    setFilters(Object.fromEntries(new URLSearchParams(location.search)), Math.max(0, historyOffset() - historyPageSize)));
  document.getElementById("f-older").addEventListener("click", () =>
    setFilters(Object.fromEntries(new URLSearchParams(location.search)), historyOffset() + historyPageSize));
  boot({ start, clear });
});
