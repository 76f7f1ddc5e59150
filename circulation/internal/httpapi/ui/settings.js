// The librarian's settings page: shows the settings in effect and where
// each comes from, checks a change against the bounds before saving, and
// saves only what was changed, as a JSON merge patch.
"use strict";

let current = null; // the effective settings as last read

const sourceText = { environment: "from the environment", settings: "set here", default: "FOLIO's default" };

function show(s) {
  current = s;
  document.getElementById("enabled").checked = s.checkOutLockFeatureEnabled;
  document.getElementById("lockTtl").value = s.lockTtl;
  document.getElementById("waits").value = s.retryIntervalsMs.join(", ");
  for (const [id, key] of [["enabled", "checkOutLockFeatureEnabled"], ["lockTtl", "lockTtl"], ["waits", "retryIntervalsMs"]]) {
    document.getElementById(id + "-source").textContent = sourceText[s.sources[key]] || s.sources[key];
  }
  const b = s.bounds;
  document.getElementById("lockTtl-hint").textContent = `From ${b.lockTtl.minimum} to ${b.lockTtl.maximum} ms.`;
  document.getElementById("waits-hint").textContent =
    `Up to ${b.maxRetries} waits, each from ${b.retryWaitMs.minimum} to ${b.retryWaitMs.maximum} ms, ` +
    `adding up to at most ${b.maxTotalWaitMs} ms. A check-out waits for a held lock up to their sum.`;
  document.getElementById("settings-error").textContent = s.settingsError || "";
  const last = s.lastChange;
  document.getElementById("last-change").textContent = last
    ? `Last changed ${new Date(last.date).toLocaleString()}${last.userId ? " by user " + last.userId : ""}.` : "";
  for (const id of ["lockTtl-error", "waits-error"]) document.getElementById(id).textContent = "";
  document.getElementById("settings").hidden = false;
}

// changes returns the patch of what differs from current, and the
// problems found against the bounds, by field.
function changes() {
  const b = current.bounds;
  const patch = {};
  const problems = {};
  const enabled = document.getElementById("enabled").checked;
  if (enabled !== current.checkOutLockFeatureEnabled) patch.checkOutLockFeatureEnabled = enabled;

  const ttlText = document.getElementById("lockTtl").value.trim();
  const ttl = Number(ttlText);
  if (!/^\d+$/.test(ttlText)) problems.lockTtl = "Enter a whole number of milliseconds.";
  else if (ttl < b.lockTtl.minimum || ttl > b.lockTtl.maximum) problems.lockTtl = `Must be from ${b.lockTtl.minimum} to ${b.lockTtl.maximum} ms.`;
  else if (ttl !== current.lockTtl) patch.lockTtl = ttl;

  const waitsText = document.getElementById("waits").value.trim();
  const parts = waitsText === "" ? [] : waitsText.split(/[\s,|]+/).filter((x) => x !== "");
  if (parts.some((p) => !/^\d+$/.test(p))) {
    problems.waits = "Enter whole numbers of milliseconds, separated by commas.";
  } else {
    const waits = parts.map(Number);
    const sum = waits.reduce((a, w) => a + w, 0);
    if (waits.length > b.maxRetries) problems.waits = `At most ${b.maxRetries} waits.`;
    else if (waits.some((w) => w < b.retryWaitMs.minimum || w > b.retryWaitMs.maximum))
      problems.waits = `Each wait must be from ${b.retryWaitMs.minimum} to ${b.retryWaitMs.maximum} ms.`;
    else if (sum > b.maxTotalWaitMs) problems.waits = `The waits add up to ${sum} ms, more than ${b.maxTotalWaitMs} ms.`;
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

async function load() {
  say("load-status", "Loading…", true);
  try {
    show(await api("GET", "/circulation/settings/check-out-lock"));
    say("load-status", "", true);
  } catch (err) {
    document.getElementById("settings").hidden = true;
    say("load-status", err.message, false);
  }
}

async function save(ev) {
  ev.preventDefault();
  const { patch, problems } = changes();
  if (!showProblems(problems, true)) {
    say("save-status", "Nothing was saved: correct the fields marked.", false);
    return;
  }
  if (Object.keys(patch).length === 0) {
    say("save-status", "Nothing to save: no setting was changed.", true);
    return;
  }
  document.getElementById("save").disabled = true;
  try {
    show(await api("PATCH", "/circulation/settings/check-out-lock", patch));
    say("save-status", "Saved: " + Object.keys(patch).join(", ") + ". Every instance applies it within seconds.", true);
  } catch (err) {
    say("save-status", "Not saved: " + err.message, false);
  } finally {
    document.getElementById("save").disabled = false;
  }
}

document.addEventListener("DOMContentLoaded", () => {
  setupHeader(load);
  document.getElementById("settings").addEventListener("submit", save);
  document.getElementById("reset").addEventListener("click", () => { if (current) show(current); say("save-status", "", true); });
  for (const id of ["lockTtl", "waits"]) {
    document.getElementById(id).addEventListener("input", () => { if (current) showProblems(changes().problems); });
  }
  load();
});
