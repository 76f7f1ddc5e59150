// Shared by the check-out lock pages: the tenant and, when the service
// asks for one, the token; calls to circulation's API in FOLIO's envelope.
"use strict";

const session = {
  get tenant() {
    return new URLSearchParams(location.search).get("tenant") || localStorage.getItem("tenant") || "diku";
  },
  set tenant(v) { localStorage.setItem("tenant", v); },
  get token() { return sessionStorage.getItem("token") || ""; },
  set token(v) { if (v) sessionStorage.setItem("token", v); else sessionStorage.removeItem("token"); },
};

// The token dialog: asked once when a call answers 401 (jwt mode), kept for
// the browser session.
// Calls that are refused together share one question.
let pendingToken = null;

function askToken(message) {
  if (pendingToken) return pendingToken;
  const dialog = document.getElementById("token-dialog");
  document.getElementById("token-reason").textContent = message;
  const input = document.getElementById("token-input");
  input.value = "";
  dialog.showModal();
  input.focus();
  pendingToken = new Promise((resolve) => {
    dialog.onclose = () => {
      pendingToken = null;
      resolve(dialog.returnValue === "ok" ? input.value.trim() : "");
    };
  });
  return pendingToken;
}

// api calls circulation and answers the decoded body; an error answer
// throws an Error whose message is the envelope's messages.
async function api(method, path, body) {
  for (let attempt = 0; attempt < 3; attempt++) {
    const headers = { "X-Okapi-Tenant": session.tenant };
    if (session.token) headers["X-Okapi-Token"] = session.token;
    if (body !== undefined) headers["Content-Type"] = method === "PATCH" ? "application/merge-patch+json" : "application/json";
    const res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    if (res.status === 401) {
      const token = await askToken(await errorText(res));
      if (!token) throw new Error("A token is needed to go on.");
      session.token = token;
      continue;
    }
    if (res.status === 204) return null;
    const data = await res.json().catch(() => null);
    if (!res.ok) {
      const err = new Error(envelopeText(data) || `${res.status} ${res.statusText}`);
      err.status = res.status;
      err.errors = (data && data.errors) || [];
      throw err;
    }
    return data;
  }
  throw new Error("The token was not accepted.");
}

async function errorText(res) {
  return envelopeText(await res.json().catch(() => null)) || `${res.status} ${res.statusText}`;
}

function envelopeText(data) {
  if (!data || !Array.isArray(data.errors)) return "";
  return data.errors.map((e) => e.message).join("; ");
}

// The header's tenant field and token button, on every page.
function setupHeader(onChange) {
  const tenant = document.getElementById("tenant");
  tenant.value = session.tenant;
  document.getElementById("tenant-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    session.tenant = tenant.value.trim();
    onChange();
  });
  document.getElementById("forget-token").addEventListener("click", () => {
    session.token = "";
    onChange();
  });
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
  node.className = "status " + (ok ? "ok" : "error");
}
