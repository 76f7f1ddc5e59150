// The librarian's settings page: shows the settings in effect and where
// each comes from, gives each field set here a way back to the default
// (the environment's value), checks a change against the bounds before saving,
// and saves only what was changed, as a JSON merge patch. The page says
// and takes times in seconds; the API's are FOLIO's milliseconds. A person who may
// read the settings but not change them sees them read-only, with why.
"use strict";

const READ = "GET /circulation/settings/check-out-lock";
const WRITE = "PUT /circulation/settings/check-out-lock";

let current = null; // the effective settings as last read
let shownFor = ""; // who the settings on screen were read for (draftOwner)
// draft is the unsaved edits of the fields when the settings left the
// screen (the session ended, another account signed in), with whose they
// are: they come back when the same person signs in again.
let draft = null;
const EDITABLE = ["enabled", "lockTtl", "waits"];

function fieldValues() {
  const v = {};
  for (const id of EDITABLE) {
    const node = document.getElementById(id);
    v[id] = node.type === "checkbox" ? node.checked : node.value;
  }
  return v;
}

// The environment's value is, to a librarian, the default: what applies
// while the library has set nothing.
const sourceText = { environment: "the default", settings: "set here" };

// secs writes ms as seconds, to the millisecond: 250 as "0.25".
function secs(ms) {
  return String(ms / 1000);
}

// msOf reads seconds written to the millisecond at most ("0.25", "5") as
// ms, null for anything else.
function msOf(text) {
  if (!/^\d+(\.\d{1,3})?$/.test(text)) return null;
  return Math.round(Number(text) * 1000);
}

// formatWaits writes a list of waits (ms) readably, in seconds: a run of
// three or more of the same wait as "n × wait"; no waits as "none".
function formatWaits(waits) {
  if (waits.length === 0) return NONE;
  const parts = [];
  for (let i = 0; i < waits.length;) {
    let j = i;
    while (j < waits.length && waits[j] === waits[i]) j++;
    const n = j - i;
    if (n >= 3) parts.push(`${n} × ${secs(waits[i])}`);
    else for (let k = i; k < j; k++) parts.push(secs(waits[k]));
    i = j;
  }
  return parts.join(", ");
}

// NONE is what the waits field says for no retries: an empty field is
// not read as that, but refused.
const NONE = "none";

// parseWaits reads what formatWaits writes, and plain lists: waits
// separated by commas (or spaces), "n × wait" (or "n x wait", "n*wait")
// for n of the same, and "none" for no waits, in seconds; it answers ms,
// or null for what it cannot read, an empty field among it.
function parseWaits(text) {
  if (text.trim().toLowerCase() === NONE) return [];
  if (text.trim() === "") return null;
  const out = [];
  for (const item of text.split(/[,|;]/).map((s) => s.trim()).filter(Boolean)) {
    const run = item.match(/^(\d+)\s*[×xX*]\s*(\S+)$/);
    if (run) {
      const n = Number(run[1]);
      const ms = msOf(run[2]);
      if (n > 1000 || ms === null) return null;
      for (let k = 0; k < n; k++) out.push(ms);
      continue;
    }
    for (const w of item.split(/\s+/)) {
      const ms = msOf(w);
      if (ms === null) return null;
      out.push(ms);
    }
  }
  return out;
}

function waitsSummary(waits) {
  if (waits.length === 0) return "No retries: a check-out that finds the lock held is refused at once.";
  const sum = waits.reduce((a, w) => a + w, 0);
  return `${waits.length} retr${waits.length === 1 ? "y" : "ies"}, waiting up to ${duration(sum)} in all.`;
}

function valueText(field, v) {
  if (field === "enabled") return v ? "on" : "off";
  // A lifetime of whole seconds as a duration ("10 min"); else exact, as
  // its field writes it.
  if (field === "lockTtl") return v % 1000 === 0 ? duration(v) : `${secs(v)} s`;
  return v.length ? `${formatWaits(v)} s` : "no retries";
}

const fields = [
  { id: "enabled", key: "checkOutLockFeatureEnabled", nulls: ["checkOutLockFeatureEnabled"] },
  { id: "lockTtl", key: "lockTtl", nulls: ["lockTtl"] },
  { id: "waits", key: "retryIntervalsMs", nulls: ["retryIntervalsMs", "noOfRetryAttempts", "retryInterval"] },
];

// labelOf is the words the page shows for a setting's field in the API
// (lockTtl: "Lock lifetime (s)"), read from the field's label.
function labelOf(key) {
  const f = fields.find((x) => x.key === key || x.nulls.includes(key));
  if (!f) return key;
  const input = document.getElementById(f.id);
  const label = input.closest("label") || document.querySelector(`label[for="${f.id}"]`);
  return label ? label.textContent.trim() : key;
}

// refusalText is the API's refusal as the page says it: each field's
// message under the field's label ("Lock lifetime (s) must be from 100
// to 600000"; the API's numbers are ms, as its field's name says).
function refusalText(err) {
  if (!err.errors || err.errors.length === 0) return err.message;
  return err.errors.map((e) => {
    const key = e.parameters && e.parameters.length ? e.parameters[0].key : "";
    return key && e.message.startsWith(key + " ") ? labelOf(key) + e.message.slice(key.length) : e.message;
  }).join("; ");
}

function show(s) {
  current = s;
  shownFor = draftOwner();
  const writable = may(WRITE);
  document.getElementById("enabled").checked = s.checkOutLockFeatureEnabled;
  document.getElementById("lockTtl").value = secs(s.lockTtl);
  document.getElementById("waits").value = formatWaits(s.retryIntervalsMs);
  document.getElementById("waits-summary").textContent = waitsSummary(s.retryIntervalsMs);
  for (const f of fields) {
    document.getElementById(f.id + "-source").textContent = sourceText[s.sources[f.key]] || s.sources[f.key];
    const back = document.getElementById(f.id + "-default");
    back.hidden = !writable || s.sources[f.key] !== "settings";
    back.textContent = `Back to the default: ${valueText(f.id, s.environment[f.key])}`;
    document.getElementById(f.id).disabled = !writable;
  }
  const b = s.bounds;
  document.getElementById("lockTtl-hint").textContent = `From ${duration(b.lockTtl.minimum)} to ${duration(b.lockTtl.maximum)}.`;
  document.getElementById("waits-hint").textContent =
    `In seconds, separated by commas; write “30 × 0.25” for thirty waits of a quarter of a second, and “none” for no retries. Up to ${b.maxRetries} waits, ` +
    `each from ${duration(b.retryWaitMs.minimum)} to ${duration(b.retryWaitMs.maximum)}, adding up to at most ${duration(b.maxTotalWaitMs)}. ` +
    "A check-out waits for a held lock up to their sum.";
  // settingsError is the operators' account of why; a librarian reads
  // what it means, the account on hover.
  const unusable = document.getElementById("settings-error");
  unusable.textContent = s.settingsError ? UNUSABLE : "";
  unusable.title = s.settingsError || "";
  const last = s.lastChange;
  const lastChange = document.getElementById("last-change");
  lastChange.textContent = last
    ? `Last changed ${new Date(last.date).toLocaleString()}${last.userName ? " by " + last.userName : last.userId ? " by user " + last.userId : ""}.` : "";
  lastChange.title = (last && last.userId) || "";
  for (const id of ["lockTtl-error", "waits-error"]) document.getElementById(id).textContent = "";
  document.getElementById("actions").hidden = !writable;
  const note = document.getElementById("readonly-note");
  note.hidden = writable;
  note.textContent = writable ? "" :
    `${personName(session.me) || "You"} may read these settings but not change them: that needs ${needs(WRITE)}.`;
  document.getElementById("settings").hidden = false;
}

const UNUSABLE = "Some of the library's settings could not be used just now: each field shows the value that applies instead.";

// changes returns the patch of what differs from current, and the
// problems found against the bounds, by field.
function changes() {
  const b = current.bounds;
  const patch = {};
  const problems = {};
  const enabled = document.getElementById("enabled").checked;
  if (enabled !== current.checkOutLockFeatureEnabled) patch.checkOutLockFeatureEnabled = enabled;

  const ttl = msOf(document.getElementById("lockTtl").value.trim());
  if (ttl === null) problems.lockTtl = "Enter a number of seconds, such as 5 or 0.5 (to the thousandth at most).";
  else if (ttl < b.lockTtl.minimum || ttl > b.lockTtl.maximum)
    problems.lockTtl = `Must be from ${duration(b.lockTtl.minimum)} to ${duration(b.lockTtl.maximum)}.`;
  else if (ttl !== current.lockTtl) patch.lockTtl = ttl;

  const waits = parseWaits(document.getElementById("waits").value);
  if (waits === null) {
    problems.waits = "Enter seconds (such as 0.25, to the thousandth at most) separated by commas, “30 × 0.25” for a run of the same, or “none” for no retries.";
  } else {
    const sum = waits.reduce((a, w) => a + w, 0);
    if (waits.length > b.maxRetries) problems.waits = `At most ${b.maxRetries} waits, not ${waits.length}.`;
    else if (waits.some((w) => w < b.retryWaitMs.minimum || w > b.retryWaitMs.maximum))
      problems.waits = `Each wait must be from ${duration(b.retryWaitMs.minimum)} to ${duration(b.retryWaitMs.maximum)}.`;
    else if (sum > b.maxTotalWaitMs) problems.waits = `The waits add up to ${duration(sum)}, more than ${duration(b.maxTotalWaitMs)}.`;
    else if (waits.join(",") !== current.retryIntervalsMs.join(",")) patch.retryIntervalsMs = waits;
  }
  return { patch, problems };
}

function showProblems(problems, focus) {
  document.getElementById("lockTtl-error").textContent = problems.lockTtl || "";
  document.getElementById("waits-error").textContent = problems.waits || "";
  const first = problems.lockTtl ? "lockTtl" : problems.waits ? "waits" : null;
  for (const id of ["lockTtl", "waits"]) {
    document.getElementById(id).setAttribute("aria-invalid", problems[id] ? "true" : "false");
  }
  if (first && focus) document.getElementById(first).focus();
  return first === null;
}

let generation = 0;

async function load() {
  const gen = generation;
  say("page-status", "Loading…", true);
  try {
    const s = await api("GET", "/circulation/settings/check-out-lock");
    if (gen !== generation) return;
    show(s);
    say("page-status", "", true);
    restoreDraft();
  } catch (err) {
    if (gen === generation) say("page-status", err.message, false);
  }
}

async function send(patch, what) {
  const gen = generation;
  document.getElementById("save").disabled = true;
  try {
    const s = await api("PATCH", "/circulation/settings/check-out-lock", patch);
    if (gen !== generation) return;
    show(s);
    say("save-status", `Saved: ${what}. It applies at every desk and self-check machine within a few seconds.`, true);
  } catch (err) {
    if (gen === generation) say("save-status", "Not saved: " + refusalText(err), false);
  } finally {
    document.getElementById("save").disabled = false;
  }
}

function save(ev) {
  ev.preventDefault();
  if (!current || !may(WRITE)) return;
  const { patch, problems } = changes();
  if (!showProblems(problems, true)) {
    say("save-status", "Nothing was saved: correct the fields marked.", false);
    return;
  }
  if (Object.keys(patch).length === 0) {
    say("save-status", "Nothing to save: no setting was changed.", true);
    return;
  }
  send(patch, Object.keys(patch).map(labelOf).join(", "));
}

// backToDefault removes a field from the stored settings: the default (the
// environment's value) applies to it again.
function backToDefault(f) {
  if (!current) return;
  const patch = {};
  for (const k of f.nulls) patch[k] = null;
  send(patch, `${labelOf(f.key)} back to the default, ${valueText(f.id, current.environment[f.key])}`);
}

// keepDraft remembers the fields the person changed and did not save, if
// any, before the settings leave the screen: only those, so that what
// others saved meanwhile to the other fields stays.
function keepDraft() {
  if (!current) return;
  const now = fieldValues();
  const shown = { enabled: current.checkOutLockFeatureEnabled, lockTtl: secs(current.lockTtl), waits: formatWaits(current.retryIntervalsMs) };
  const edited = {};
  for (const id of EDITABLE) if (now[id] !== shown[id]) edited[id] = now[id];
  if (Object.keys(edited).length) draft = { owner: shownFor, values: edited };
}

// draftOwner is whose edits a draft holds: the person and the tenant.
function draftOwner() {
  return session.me ? `${session.tenant} ${session.me.user.id}` : "";
}

// restoreDraft puts back the edits kept for the person signed in now, in
// this tenant; another's are never shown, and wait for their author.
function restoreDraft() {
  const d = draft;
  if (!d || !session.me || d.owner !== draftOwner() || !may(WRITE)) return;
  draft = null;
  for (const [id, value] of Object.entries(d.values)) {
    const node = document.getElementById(id);
    if (node.type === "checkbox") node.checked = value;
    else node.value = value;
  }
  showProblems(changes().problems);
  say("save-status", "Your unsaved changes are back: save them, or undo them.", true);
}

function clear() {
  keepDraft();
  generation++;
  current = null;
  shownFor = "";
  document.getElementById("settings").hidden = true;
  for (const id of ["lockTtl", "waits"]) document.getElementById(id).value = "";
  document.getElementById("enabled").checked = false;
  for (const id of ["last-change", "settings-error", "waits-summary", "lockTtl-error", "waits-error"]) {
    document.getElementById(id).textContent = "";
  }
  say("save-status", "", true);
}

function start() {
  clear();
  if (!may(READ)) {
    document.getElementById("content").hidden = true;
    say("page-status", `${personName(session.me) || "You"} may not see the settings: that needs ${needs(READ)}.`, false);
    return;
  }
  load();
}

document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("settings").addEventListener("submit", save);
  document.getElementById("reset").addEventListener("click", () => { if (current) show(current); say("save-status", "", true); });
  for (const id of ["lockTtl", "waits"]) {
    document.getElementById(id).addEventListener("input", () => {
      if (!current) return;
      showProblems(changes().problems);
      const waits = parseWaits(document.getElementById("waits").value);
      if (waits !== null) document.getElementById("waits-summary").textContent = waitsSummary(waits);
    });
  }
  for (const f of fields) document.getElementById(f.id + "-default").addEventListener("click", () => backToDefault(f));
  boot({ start, clear });
});
