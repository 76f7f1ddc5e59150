// The operator's lock console: the live locks with their patrons and
// holders, refreshed every second with a countdown to each expiry, the
// recent lock history, and releasing a lock after a confirmation.
"use strict";

const eventText = {
  expired: "expired while held",
  taken_over: "expired and taken over",
  released_by_other: "released by someone else",
  waiter_gave_up: "a waiting check-out gave up",
};

let locks = [];
let fetchedAt = 0;
let busy = false;

function seconds(ms) {
  return ms < 0 ? "expired" : (ms / 1000).toFixed(1) + " s";
}

function patronText(p, userId) {
  if (!p) return userId;
  return [p.barcode, p.name].filter(Boolean).join(" · ") || userId;
}

function holderText(h) {
  return (h && h.instance) || "(not said)";
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
    const texts = [patronText(l.patron, l.userId), holderText(h), h.itemBarcode || "", h.servicePointId || "",
      h.requestId || "", seconds(held), seconds(left)];
    texts.forEach((text, i) => {
      if (tr.cells[i].textContent !== text) tr.cells[i].textContent = text;
    });
    const button = tr.querySelector("button");
    const label = "Release the lock of patron " + texts[0];
    if (button.getAttribute("aria-label") !== label) button.setAttribute("aria-label", label);
    if (tr !== before) body.insertBefore(tr, before);
    before = tr.nextElementSibling;
  }
  document.getElementById("no-locks").hidden = locks.length > 0;
}

// lockRow is an empty row for the lock with this id, its Release button
// asking about the lock as last fetched.
function lockRow(id) {
  const release = el("button", { type: "button", class: "danger", "data-lock": id, text: "Release…" });
  release.addEventListener("click", () => {
    const l = locks.find((x) => x.id === id);
    if (l) confirmRelease(l);
  });
  return el("tr", { "data-lock": id }, el("td"), el("td"), el("td"), el("td"), el("td"), el("td"), el("td"), el("td", {}, release));
}

function renderHistory(events) {
  const body = document.querySelector("#history tbody");
  body.replaceChildren();
  for (const e of events) {
    const by = e.by ? [e.by.instance, e.by.itemBarcode, e.by.acquiredBy].filter(Boolean).join(" · ") : "";
    const what = (eventText[e.type] || e.type) + (e.waitedMs ? ` after ${e.waitedMs} ms` : "");
    body.append(el("tr", { "data-event": e.type },
      el("td", { text: new Date(e.occurredAt).toLocaleString() }),
      el("td", { text: what }),
      el("td", { text: patronText(e.patron, e.userId) }),
      el("td", { text: holderText(e.holder) + (e.holder && e.holder.itemBarcode ? " · " + e.holder.itemBarcode : "") }),
      el("td", { text: by })));
  }
}

async function refresh() {
  if (busy) return;
  busy = true;
  try {
    const [page, history] = await Promise.all([
      api("GET", "/circulation/check-out-locks"),
      api("GET", "/circulation/check-out-locks/history"),
    ]);
    locks = page.checkoutLocks;
    fetchedAt = Date.now();
    renderLocks();
    renderHistory(history.events);
    say("status", `${page.totalRecords} lock${page.totalRecords === 1 ? "" : "s"} held. Updated ${new Date().toLocaleTimeString()}.`, true);
  } catch (err) {
    say("status", err.message, false);
  } finally {
    busy = false;
  }
}

function confirmRelease(l) {
  const dialog = document.getElementById("confirm-dialog");
  document.getElementById("confirm-text").textContent =
    `Release the lock of patron ${patronText(l.patron, l.userId)}, held by ${holderText(l.holder)}? ` +
    "The check-out holding it will fail if it has not written yet; the release is recorded with your name.";
  dialog.onclose = async () => {
    if (dialog.returnValue !== "ok") return;
    try {
      await api("DELETE", "/circulation/check-out-locks/" + encodeURIComponent(l.id));
      say("status", "Released the lock of patron " + patronText(l.patron, l.userId) + ".", true);
    } catch (err) {
      say("status", "Not released: " + err.message, false);
    }
    refresh();
  };
  dialog.showModal();
  document.getElementById("confirm-release").focus();
}

document.addEventListener("DOMContentLoaded", () => {
  setupHeader(refresh);
  refresh();
  setInterval(refresh, 1000);
  setInterval(renderLocks, 250);
});
