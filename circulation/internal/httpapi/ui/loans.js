// The circulation desk's page: find a patron by barcode or name and act
// on their open loans (renew, claim returned, declare lost, check in),
// each through circulation's own route, each button usable only with its
// permission, each refusal in FOLIO's words.
"use strict";

const FIND = "GET /circulation/patron-loans";

// actions are the loan actions, each with the route it calls (whose
// permission the server answers) and the call it makes; done says what
// happened, in words.
const actions = [
  { id: "renew", text: "Renew", route: "POST /circulation/renew-by-barcode",
    call: (p, l, sp) => api("POST", "/circulation/renew-by-barcode", { itemBarcode: l.itemBarcode, userBarcode: p.barcode, servicePointId: sp }),
    done: (l, answer) => `Renewed ${titleOf(l)}: due ${new Date(answer.dueDate).toLocaleString()}.` },
  { id: "claim", text: "Claim returned", route: "POST /circulation/loans/{id}/claim-item-returned",
    call: (p, l) => api("POST", `/circulation/loans/${encodeURIComponent(l.id)}/claim-item-returned`, { itemClaimedReturnedDateTime: new Date().toISOString() }),
    done: (l) => `${titleOf(l)} is claimed returned.` },
  { id: "lost", text: "Declare lost", route: "POST /circulation/loans/{id}/declare-item-lost",
    call: (p, l, sp) => api("POST", `/circulation/loans/${encodeURIComponent(l.id)}/declare-item-lost`, { servicePointId: sp }),
    done: (l) => `${titleOf(l)} is declared lost.` },
  { id: "checkin", text: "Check in", route: "POST /circulation/check-in-by-barcode",
    call: (p, l, sp) => api("POST", "/circulation/check-in-by-barcode", { itemBarcode: l.itemBarcode, servicePointId: sp }),
    done: (l) => `${titleOf(l)} is checked in.` },
];

const loanColumns = ["Title", "Barcode", "Due", "Renewals", "Actions"];

function titleOf(l) {
  return l.title || l.itemBarcode || "the item";
}

function searchedFor() {
  return new URLSearchParams(location.search).get("patron") || "";
}

async function find() {
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
    render(answer.patrons);
    if (answer.patrons.length === 0) say("status", `No patron has the barcode or the name “${text}”.`, false);
  } catch (err) {
    if (gen === generation) say("status", err.message, false);
  }
}

function showServicePoints(points) {
  const select = document.getElementById("service-point");
  const chosen = select.value || localStorage.getItem("servicePoint") || "";
  select.replaceChildren(...points.map((sp) => el("option", { value: sp.id, text: sp.name })));
  if (points.some((sp) => sp.id === chosen)) select.value = chosen;
}

function render(patrons) {
  const results = document.getElementById("results");
  results.replaceChildren(...patrons.map((p) => {
    const title = `${p.name || "A patron"}${p.barcode ? " (" + p.barcode + ")" : ""}`;
    const head = el("h2", { id: "patron-" + p.id, text: title });
    if (p.loans.length === 0) return el("section", { "data-patron": p.id }, head, el("p", { class: "hint", text: "No open loan." }));
    const rows = p.loans.map((l) => {
      const buttons = actions.map((a) => {
        const b = el("button", { type: "button", class: a.id === "lost" ? "danger" : "secondary", "data-action": a.id, text: a.text,
          "aria-label": `${a.text}: ${titleOf(l)}` });
        if (may(a.route)) b.addEventListener("click", () => act(a, p, l, b));
        else {
          b.disabled = true;
          b.title = `${a.text} needs ${needs(a.route)}`;
        }
        return b;
      });
      const due = l.dueDate ? new Date(l.dueDate).toLocaleString() : "";
      // A loan a self-check machine made offline says so, and what it broke.
      const texts = [titleOf(l) + (l.itemStatus && l.itemStatus !== "Checked out" ? ` (${l.itemStatus})` : "") +
        (l.offline ? ` · ${l.offline}` : ""), l.itemBarcode || "", due, String(l.renewalCount)];
      return el("tr", { "data-loan": l.id },
        ...texts.map((text, i) => el("td", { "data-label": loanColumns[i], text })),
        el("td", { "data-label": "Actions" }, el("div", { class: "row actions" }, ...buttons)));
    });
    const table = el("table", { class: "cards", "aria-labelledby": "patron-" + p.id },
      el("thead", {}, el("tr", {}, ...loanColumns.map((c) => el("th", { scope: "col", text: c })))), el("tbody", {}, ...rows));
    return el("section", { "data-patron": p.id }, head, el("div", { class: "table-wrap" }, table));
  }));
}

async function act(a, p, l, button) {
  const sp = document.getElementById("service-point").value;
  button.disabled = true;
  try {
    const answer = await a.call(p, l, sp);
    say("status", a.done(l, answer || {}), true);
  } catch (err) {
    say("status", `Not done (${a.text.toLowerCase()} ${titleOf(l)}): ${err.message}`, false);
  } finally {
    button.disabled = false;
  }
  await find();
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
  document.getElementById("service-point").addEventListener("change", (ev) => localStorage.setItem("servicePoint", ev.target.value));
  boot({ start, clear });
});
