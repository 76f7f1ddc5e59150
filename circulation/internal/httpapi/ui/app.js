// Shared by the check-out lock pages: the tenant (always the one in the
// address), signing in with a name and a password, who is signed in, and
// calls to circulation's API in FOLIO's envelope. A page gives boot() its
// start (show the data) and clear (forget it) and is told when the data on
// screen must go: on sign-out, on a session that ended, on a refusal and on
// a change of tenant.
"use strict";

// The tenant is the address's ?tenant=, else the last one used here, else
// diku; the address is made to say it, so the two always agree.
function currentTenant() {
  return new URLSearchParams(location.search).get("tenant") || localStorage.getItem("tenant") || "diku";
}

function showTenantInAddress(tenant) {
  const url = new URL(location.href);
  if (url.searchParams.get("tenant") === tenant) return;
  url.searchParams.set("tenant", tenant);
  history.replaceState(null, "", url);
}

const session = {
  tenant: "",
  me: null, // GET /bl-users/_self while signed in
  page: null,
};

// Whether the signed-in person may call a route of circulation ("POST
// /circulation/renew-by-barcode"), as the server answers it from its one
// permission table (/bl-users/_self's routes): the pages name no
// permission and no role of their own.
function may(route) {
  const r = session.me && session.me.routes && session.me.routes[route];
  return !!(r && r.allowed);
}

// What a route takes, in a person's words: "the librarian role". The
// permission's name is the API's, for the operators' docs, never a page's.
function needs(route) {
  const r = (session.me && session.me.routes && session.me.routes[route]) || {};
  return r.roles || "a role you do not hold";
}

function personName(me) {
  const p = (me && me.user && me.user.personal) || {};
  return [p.firstName, p.lastName].filter(Boolean).join(" ") || (me && me.user && me.user.username) || "";
}

// An API error: status, FOLIO's errors, and Retry-After in seconds (0
// when not said). Its message is what a person on a page reads
// (peopleWords), the API's own in errors.
class ApiError extends Error {
  constructor(status, data, fallback, retryAfter) {
    super(envelopeText(data) || fallback);
    this.status = status;
    this.errors = (data && data.errors) || [];
    this.retryAfter = retryAfter || 0;
    this.message = peopleWords(this) || this.message;
  }
  get code() { return this.errors.length ? this.errors[0].code : ""; }
}

// peopleWords is what the pages say of an API error whose own words are
// for operators, "" for the rest: the API keeps its code and message.
function peopleWords(err) {
  const param = (key) => {
    const p = ((err.errors[0] && err.errors[0].parameters) || []).find((x) => x.key === key);
    return p ? p.value : "";
  };
  const later = err.retryAfter ? `try again in ${duration(err.retryAfter * 1000)}.` : "try again later.";
  switch (err.code) {
    case "TENANT_NOT_INITIALIZED": return `No library called ${param("tenant") || session.tenant} here.`;
    case "LOGIN_LOCKED": return `Too many failed sign-ins: ${later}`;
    case "LOGIN_BUSY": return `Too many sign-ins are being checked from here at once: ${later}`;
  }
  return "";
}

// duration says a time in ms as people read it: "45 s", "0.25 s" (to the
// millisecond) under a minute; "4 min 29 s", "15 min", "1 h 5 min" (to
// the second) from a minute on. Every page says its durations with it.
function duration(ms) {
  if (ms < 60000) return `${Number((ms / 1000).toFixed(3))} s`;
  const secs = Math.round(ms / 1000);
  const h = Math.floor(secs / 3600), min = Math.floor(secs / 60) % 60, s = secs % 60;
  return [h && `${h} h`, min && `${min} min`, s && `${s} s`].filter(Boolean).join(" ");
}

function envelopeText(data) {
  if (!data || !Array.isArray(data.errors)) return "";
  return data.errors.map((e) => e.message).join("; ");
}

async function call(method, path, body) {
  const headers = { "X-Okapi-Tenant": session.tenant };
  if (body !== undefined) headers["Content-Type"] = method === "PATCH" ? "application/merge-patch+json" : "application/json";
  const res = await fetch(path, { method, headers, credentials: "same-origin",
    body: body === undefined ? undefined : JSON.stringify(body) });
  if (res.status === 204) return { status: 204, data: null };
  const data = await res.json().catch(() => null);
  if (!res.ok) throw new ApiError(res.status, data, `${res.status} ${res.statusText}`, Number(res.headers.get("Retry-After")) || 0);
  return { status: res.status, data };
}

// refreshing is the one refresh of the sign-in under way: calls refused
// together share it.
let refreshing = null;

function refreshSignIn() {
  if (!refreshing) {
    refreshing = call("POST", "/authn/refresh").then(() => true, () => false).finally(() => { refreshing = null; });
  }
  return refreshing;
}

// api calls circulation and answers the decoded body. A 401 refreshes the
// sign-in once and tries again; if the session has ended, the page's data
// goes and the sign-in form says so. A 403, and a refresh, ask again who is
// signed in (recheck): the cookie may be another account's now, signed in
// in another tab, and the page follows it. A 403 that stands takes the
// page's data away: what the person may not see does not stay on screen.
// A call whose page restarted or signed out meanwhile throws an error the
// page does not show (its generation of data is gone).
async function api(method, path, body) {
  const tenant = session.tenant;
  const me = session.me;
  try {
    return (await call(method, path, body)).data;
  } catch (err) {
    if (tenant !== session.tenant || session.me !== me) throw err;
    if (err.status === 403) {
      if (await recheck() !== "same") throw err;
      throw asRefusal(err);
    }
    if (err.status !== 401) throw err;
    if (await refreshSignIn() && tenant === session.tenant && session.me === me) {
      if (await recheck() !== "same") throw err;
      try {
        return (await call(method, path, body)).data;
      } catch (again) {
        if (again.status === 403) throw asRefusal(again);
        if (again.status !== 401) throw again;
      }
    }
    // Calls refused together sign out once, saying why.
    if (tenant === session.tenant && session.me === me) signedOut(me ? "Your session has ended: sign in again." : "");
    throw err;
  }
}

function asRefusal(err) {
  if (err.status === 403) {
    session.page.clear();
    err.message = "You may not do this: " + err.message;
    say("page-status", err.message, false);
  }
  return err;
}

// rechecking is the one recheck under way: calls refused together, a
// focus and another tab's sign-in share it.
let rechecking = null;

// recheck asks who the cookie makes the caller now and makes the page
// follow: another account (or other permissions) restarts the page for
// it, no valid sign-in shows the form. It answers "same" when nothing
// changed (or nothing could be learnt), "changed" or "out" otherwise.
function recheck() {
  if (!rechecking) rechecking = doRecheck().finally(() => { rechecking = null; });
  return rechecking;
}

async function doRecheck() {
  const tenant = session.tenant;
  const before = session.me;
  for (let attempt = 0; attempt < 2; attempt++) {
    let me;
    try {
      me = (await call("GET", "/bl-users/_self")).data;
    } catch (err) {
      if (tenant !== session.tenant || session.me !== before) return "changed";
      // Nobody was signed in here, and nobody is: nothing to refresh.
      if (err.status !== 401 || !before) return "same";
      if (attempt === 0 && await refreshSignIn()) continue;
      signedOut("Your session has ended: sign in again.");
      return "out";
    }
    if (tenant !== session.tenant || session.me !== before) return "changed";
    if (sameSignIn(before, me)) return "same";
    signedIn(me);
    return "changed";
  }
  return "same";
}

// sameSignIn reports whether two answers of /bl-users/_self are the same
// person holding the same permissions.
function sameSignIn(a, b) {
  return !!a && !!b && a.user.id === b.user.id &&
    a.permissions.permissions.join(" ") === b.permissions.permissions.join(" ");
}

// SESSION_POLL_MS is how often a page in view asks who is signed in, for
// a sign-in or sign-out it was not told of (another tab's, in a browser
// that does not pass the word on).
const SESSION_POLL_MS = 5000;

// signins carries word of a sign-in or a sign-out to the other tabs of
// this site: they recheck at once, not at their next call or focus.
const signins = new BroadcastChannel("signin");

function announce() {
  signins.postMessage("changed");
}

// signedOut forgets the person and the data and shows the sign-in form,
// with a note saying why (never an error: signing out is not one).
function signedOut(reason) {
  session.me = null;
  session.page.clear();
  renderWho();
  document.getElementById("content").hidden = true;
  say("page-status", "", true);
  const panel = document.getElementById("signin-panel");
  panel.hidden = false;
  document.getElementById("signin-tenant").textContent = session.tenant;
  note("signin-status", reason);
  document.getElementById("signin-password").value = "";
  document.getElementById("signin-username").focus();
}

function signedIn(me) {
  session.page.clear();
  session.me = me;
  renderWho();
  document.getElementById("signin-panel").hidden = true;
  say("signin-status", "", true);
  say("page-status", "", true);
  document.getElementById("content").hidden = false;
  session.page.start();
}

function renderWho() {
  const who = document.getElementById("who");
  const out = document.getElementById("sign-out");
  const me = session.me;
  if (!me || !me.user.username) {
    who.textContent = "";
    out.hidden = true;
    return;
  }
  who.textContent = `Signed in as ${personName(me)}`;
  who.title = `${me.user.username} · ${me.user.id}`;
  out.hidden = false;
}

// whoIsSignedIn asks who the cookie (or the absence of authentication)
// makes the caller; a sign-in whose access token expired is refreshed.
// reason is what the sign-in form says if nobody is signed in.
async function whoIsSignedIn(reason) {
  const tenant = session.tenant;
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const me = (await call("GET", "/bl-users/_self")).data;
      // A second word of the sign-in the page shows (a recheck that
      // crossed the sign-in) leaves the page, and what the person has
      // typed in it, as it is.
      if (tenant === session.tenant && !sameSignIn(session.me, me)) signedIn(me);
      return;
    } catch (err) {
      if (tenant !== session.tenant) return;
      if (err.status !== 401) {
        session.page.clear();
        say("signin-status", "", true);
        document.getElementById("content").hidden = true;
        say("page-status", err.message, false);
        return;
      }
      if (attempt === 0 && await refreshSignIn()) continue;
      signedOut(reason);
      return;
    }
  }
}

const NOT_KEPT = "The sign-in succeeded, but this browser did not keep its cookie: allow cookies for this site, then sign in again.";

async function signIn(ev) {
  ev.preventDefault();
  const username = document.getElementById("signin-username").value.trim();
  const password = document.getElementById("signin-password").value;
  if (!username || !password) {
    say("signin-status", "Enter your username and your password.", false);
    return;
  }
  const button = document.getElementById("signin-submit");
  button.disabled = true;
  try {
    await call("POST", "/authn/login-with-expiry", { username, password });
    document.getElementById("signin-password").value = "";
    announce();
    // Signed in, and yet no sign-in: the browser did not keep the cookie.
    await whoIsSignedIn(NOT_KEPT);
    if (!session.me) say("signin-status", NOT_KEPT, false);
  } catch (err) {
    document.getElementById("signin-password").value = "";
    let text = err.message;
    if (err.code === "LOGIN_FAILED") text = "Wrong username or password.";
    say("signin-status", text, false);
    document.getElementById("signin-password").focus();
  } finally {
    button.disabled = false;
  }
}

async function signOut() {
  try {
    await call("POST", "/authn/logout");
  } catch (err) {
    // Signed out here whatever storage said: the cookies are HttpOnly,
    // and the refresh token is spent or unknown.
  }
  announce();
  signedOut("You have signed out.");
}

// useTenant switches to tenant: the address says it, the data of the one
// before goes, and the person signs in again if their sign-in is another
// tenant's.
function useTenant(tenant) {
  session.tenant = tenant;
  localStorage.setItem("tenant", tenant);
  showTenantInAddress(tenant);
  document.getElementById("tenant").value = tenant;
  session.page.clear();
  say("page-status", "", true);
  document.getElementById("content").hidden = true;
  const reason = session.me ? `Sign in to tenant ${tenant}.` : "";
  // The page is cleared: whoever the cookie makes the person in this
  // tenant starts it again, even the same account.
  session.me = null;
  whoIsSignedIn(reason);
}

// ask puts a question before an action (the layout's dialog): text, the
// words of its buttons (ok, cancel), and the details the action needs,
// each then required: a reason (comment: the words its field is labelled
// with) and a date and time (due: {value, min, at}, in the browser's
// time; at is the instant value stands for, to the millisecond, sent as
// it is when the value is left alone) and one of a choice's options
// (choice: {label, options}, none chosen at first). With details, the
// first is focused and Enter in the date confirms; without, Cancel is
// focused, so Enter or Escape does nothing. Confirmed, yes runs with the
// reason, the date as an instant (ISO 8601) and the option chosen (""
// for what was not asked); otherwise no. Each question is answered
// once, as its dialog closed, even when the next is asked before the
// browser reports that close (the next is then not asked if the first
// was confirmed). One question at a
// time: a question still open when the next is asked is not answered;
// nor is one the page was cleared under (a sign-out, another tenant).
function ask(text, { ok, cancel = "Cancel", comment = "", due = null, choice = null }, yes, no) {
  const dialog = document.getElementById("confirm-dialog");
  // A question still open is replaced, unanswered; one answered whose
  // close the browser has not yet reported (a key's or a click's next
  // event asking again) is answered now, before its fields are reused,
  // and if it was confirmed, this one is not asked: it is of what the
  // page showed before the action now under way, after which the page
  // draws again.
  if (dialog.open) {
    answering = null;
    dialog.close("cancel");
  } else if (answering && answering()) {
    return;
  }
  document.getElementById("confirm-text").textContent = text;
  document.getElementById("confirm-ok").textContent = ok;
  document.getElementById("confirm-cancel").textContent = cancel;
  const reason = document.getElementById("confirm-comment");
  const date = document.getElementById("confirm-due");
  // A field not asked is not a field of the form: disabled, it is
  // neither required nor read.
  reason.value = "";
  reason.disabled = !comment;
  reason.setCustomValidity("");
  document.getElementById("confirm-comment-label").textContent = comment;
  document.getElementById("confirm-comment-field").hidden = !comment;
  date.value = (due && due.value) || "";
  date.min = (due && due.min) || "";
  date.disabled = !due;
  document.getElementById("confirm-due-field").hidden = !due;
  // A choice starts unchosen: the librarian picks one of its options.
  const picked = document.getElementById("confirm-choice");
  picked.replaceChildren(new Option("Choose…", ""), ...((choice && choice.options) || []).map((o) => new Option(o, o)));
  picked.disabled = !choice;
  document.getElementById("confirm-choice-label").textContent = (choice && choice.label) || "";
  document.getElementById("confirm-choice-field").hidden = !choice;
  const page = questions;
  const answer = () => {
    if (answering !== answer) return false;
    answering = null;
    if (page !== questions) return false;
    if (dialog.returnValue !== "ok") {
      no();
      return false;
    }
    yes(reason.value, date.disabled ? "" : due.at && date.value === due.value ? due.at : new Date(date.value).toISOString(),
      picked.disabled ? "" : picked.value);
    return true;
  };
  answering = answer;
  // A close reported while the dialog is open again is an earlier
  // question's, answered or replaced already.
  dialog.onclose = () => { if (!dialog.open) answer(); };
  dialog.returnValue = "";
  dialog.showModal();
  (comment ? reason : due ? date : choice ? picked : document.getElementById("confirm-cancel")).focus();
}

// askFirst asks whether to do an action (ask), with no details.
function askFirst(text, words, yes, no) {
  ask(text, words, () => yes(), no);
}

// questions counts the page's clearings: a question asked before the
// last is not answered (ask).
let questions = 0;

// answering answers the question last asked, once, as its dialog closed,
// and says whether it was confirmed; null once answered or replaced
// (ask).
let answering = null;

// boot wires the header and the sign-in form and starts the page.
function boot(page) {
  // A question left open goes with the data it was about.
  session.page = { start: page.start, clear: () => {
    questions++;
    const dialog = document.getElementById("confirm-dialog");
    if (dialog.open) dialog.close("cancel");
    page.clear();
  } };
  // A reason of spaces alone is none.
  const reason = document.getElementById("confirm-comment");
  reason.addEventListener("input", () => reason.setCustomValidity(reason.value.trim() ? "" : "Say why"));
  // Enter in the date confirms, as the form's fields allow: Cancel, the
  // form's first button, would take an implicit submission.
  document.getElementById("confirm-due").addEventListener("keydown", (ev) => {
    if (ev.key !== "Enter") return;
    ev.preventDefault();
    document.getElementById("confirm-form").requestSubmit(document.getElementById("confirm-ok"));
  });
  session.tenant = currentTenant();
  localStorage.setItem("tenant", session.tenant);
  showTenantInAddress(session.tenant);
  const field = document.getElementById("tenant");
  field.value = session.tenant;
  document.getElementById("tenant-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const t = field.value.trim();
    if (t) useTenant(t);
  });
  // Back and forward move through addresses: the tenant follows.
  addEventListener("popstate", () => {
    if (currentTenant() !== session.tenant) useTenant(currentTenant());
  });
  document.getElementById("signin-form").addEventListener("submit", signIn);
  document.getElementById("sign-out").addEventListener("click", signOut);
  // Another tab signed in or out, or the person comes back to this one:
  // the page follows whoever the cookie makes them now.
  signins.onmessage = () => recheck();
  setInterval(() => { if (!document.hidden) recheck(); }, SESSION_POLL_MS);
  addEventListener("focus", () => { if (session.me) recheck(); });
  document.addEventListener("visibilitychange", () => { if (!document.hidden && session.me) recheck(); });
  whoIsSignedIn("");
}

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "text") node.textContent = v;
    else node.setAttribute(k, v);
  }
  for (const c of children) node.append(c);
  return node;
}

function say(id, text, ok) {
  const node = document.getElementById(id);
  node.textContent = text;
  node.className = "status " + (text ? (ok ? "ok" : "error") : "");
}

// note says something neutral: neither a success nor an error.
function note(id, text) {
  const node = document.getElementById(id);
  node.textContent = text;
  node.className = "status " + (text ? "info" : "");
}
