// dom.js - the page's only ways to make DOM and to call the API. Every
// string from the store goes through textContent (h() children) or
// setAttribute: no HTML is ever built from data.

export const STATUSES = ["pending", "running", "suspended", "completed",
  "failed", "cancelled", "terminated"];

// h("td", {class: "id"}, "text", otherNode, null) -> <td class="id">.
// Attributes starting with "on" take a function (addEventListener).
export function h(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") {
      e.addEventListener(k.slice(2), v);
    } else {
      e.setAttribute(k, v === true ? "" : String(v));
    }
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

// Announces in the role="status" region.
export function say(text, isError) {
  const s = document.getElementById("status");
  s.textContent = userPlain(text); // it may quote a store string
  s.className = isError ? "error" : "";
}

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

// The session: a random id POST /api/v1/session returned (never the
// token), kept in this tab's sessionStorage (scoped to this origin: scheme,
// host and port) and sent as X-Duro-Session on every API request. No
// cookie: nothing of duro's is sent by the browser on its own, to this
// server or to another one on this host.
const SESSION_KEY = "duro_session";
let sessionInMemory = null; // when sessionStorage is not available
export const session = {
  get() {
    try { return sessionStorage.getItem(SESSION_KEY); } catch { return sessionInMemory; }
  },
  set(id) {
    sessionInMemory = id;
    try { sessionStorage.setItem(SESSION_KEY, id); } catch { /* memory only */ }
  },
  clear() {
    sessionInMemory = null;
    try { sessionStorage.removeItem(SESSION_KEY); } catch { /* memory only */ }
  },
};

let signedOut = null;
// @p fn runs when the server refuses the session (ended or expired).
export function whenSignedOut(fn) { signedOut = fn; }

async function request(path, options) {
  const o = Object.assign({ credentials: "omit" }, options);
  const id = session.get();
  if (id) o.headers = Object.assign({ "X-Duro-Session": id }, o.headers);
  const r = await fetch("/api/v1/" + path, o);
  if (r.status === 401 && id && session.get() === id) {
    session.clear();
    if (signedOut) signedOut();
  }
  return r;
}

async function check(r) {
  if (r.ok) return r;
  const body = await r.json().catch(() => null);
  const e = body && body.error ? body.error : { code: "http", message: r.statusText };
  const err = new ApiError(r.status, e.code, e.message || e.code);
  err.retryAfter = Number(r.headers.get("Retry-After")) || 0;
  throw err;
}

export async function get(path) {
  return (await check(await request(path))).json();
}

export async function getText(path) {
  return (await check(await request(path))).text();
}

export async function post(path, body) {
  const r = await request(path, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  return (await check(r)).json();
}

export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== null && v !== undefined && v !== "") q.set(k, String(v));
  }
  return q.toString();
}

// "2026-05-01T12:00:00.123Z" -> "2026-05-01 12:00:00.123Z"; null -> "-".
export function time(t) {
  return t ? t.replace("T", " ") : "-";
}

// A payload (any JSON value, or a string) as text, cut to max characters.
export function payloadText(p, max) {
  if (p === null || p === undefined) return "";
  const s = typeof p === "string" ? p : JSON.stringify(p);
  return max && s.length > max ? s.slice(0, max) + "…" : s;
}

// Characters no store string may hide: bidi controls (they reorder what
// follows: "user:\u202Eecila" would read "user:alice"), zero-width and
// other invisible characters (they make two strings look alike), C0/C1
// controls, line separators. Shown as visible escapes.
const HIDDEN = /[\u0000-\u001F\u007F-\u009F\u00AD\u034F\u061C\u115F\u1160\u17B4\u17B5\u180B-\u180F\u200B-\u200F\u2028-\u202E\u2060-\u206F\u3164\uFE00-\uFE0F\uFEFF\uFFA0\uFFF9-\uFFFB]|\uDB40[\uDC00-\uDDEF]/g;
const SHORT = { "\n": "\\n", "\r": "\\r", "\t": "\\t" };

function escapeOf(ch) {
  if (SHORT[ch]) return SHORT[ch];
  const cp = ch.codePointAt(0);
  return cp > 0xFFFF ? "\\u{" + cp.toString(16).toUpperCase() + "}"
    : "\\u" + cp.toString(16).toUpperCase().padStart(4, "0");
}

// The one way the page shows a string that came from the store or from a
// person (ids, names, versions, reasons, requesters, errors, problems,
// payloads, outputs, custom statuses, event names): userText() as a node,
// userPlain() for attributes (aria-label, title) and the status line.

// @p s as plain text with its hidden characters escaped.
export function userPlain(s) {
  return String(s).replace(HIDDEN, escapeOf);
}

// @p s as a node: isolated left-to-right (<bdi dir=ltr>, so neither it
// nor the text around it is reordered), each hidden character a marked
// escape (<span class="esc">\u202E</span>), never the character itself.
// @p opts.lines: a multi-line value (a payload in a <pre>): its line feeds
// and tabs stay what they are; every other hidden character is escaped.
export function userText(s, opts) {
  const e = h("bdi", { dir: "ltr", class: "idt" });
  const str = String(s);
  const keep = opts && opts.lines;
  let at = 0;
  for (const m of str.matchAll(HIDDEN)) {
    if (keep && (m[0] === "\n" || m[0] === "\t")) continue;
    if (m.index > at) e.append(str.slice(at, m.index));
    e.append(h("span", { class: "esc", title: "hidden character " + escapeOf(m[0]) },
      escapeOf(m[0])));
    at = m.index + m[0].length;
  }
  if (at < str.length) e.append(str.slice(at));
  return e;
}

// "HH:MM:SS UTC" of @p d (the page shows UTC everywhere).
export function clock(d) {
  return d.toISOString().slice(11, 19) + " UTC";
}

// A banner for data that could not be refreshed: {el, ok(), fail(e)}.
// fail() shows "Not updated since HH:MM:SS UTC" (the last success) and
// marks @p region stale (dimmed); ok() hides it, clears the region mark
// and the status line when it still holds the failure.
export function staleBanner(region) {
  const el = h("p", { id: "stale", class: "stale", role: "alert", hidden: true });
  let last = null;
  let said = null;
  return {
    el,
    ok() {
      last = new Date();
      el.hidden = true;
      region().forEach((r) => r.classList.remove("is-stale"));
      const s = document.getElementById("status");
      if (said !== null && s.textContent === said) say("");
      said = null;
    },
    fail(e) {
      el.textContent = (last ? "Not updated since " + clock(last) : "Not loaded") +
        ": " + userPlain(e.message) + ". What is shown may be out of date; retrying every 2 s.";
      el.hidden = false;
      region().forEach((r) => r.classList.add("is-stale"));
      said = userPlain(e.message);
      say(said, true);
    },
  };
}

// A modal confirmation whose Enter key can never confirm: no form (Enter
// in the reason box submits nothing), the safe button first and focused,
// Escape closes it. The destructive button acts only when clicked or
// activated once focused (Tab to it, then Enter or Space).
//   opts: {id, title, text, ids (up to 5 shown, "… and N more"),
//          reason: placeholder (a reason box) or undefined, label (the
//          box's, "Reason" by default), extra (an element shown above
//          the reason box, e.g. a choice the caller reads), yes, no}
// Resolves {ok, reason}. Elements: #ID-dialog, #ID-keep, #confirm-ID,
// #ID-reason, #ID-ids (an <ul> of ids).
export function confirmAction(opts) {
  return new Promise((resolve) => {
    const SHOW = 5;
    const ids = opts.ids || [];
    let ok = false;
    const reason = opts.reason === undefined ? null
      : h("input", { id: opts.id + "-reason", autocomplete: "off",
        placeholder: opts.reason });
    const keep = h("button", { type: "button", id: opts.id + "-keep", autofocus: true,
      onclick: () => d.close() }, opts.no || "Keep it");
    const yes = h("button", { type: "button", id: "confirm-" + opts.id, class: "danger",
      onclick: () => { ok = true; d.close(); } }, opts.yes);
    const list = ids.length === 0 ? null
      : h("ul", { id: opts.id + "-ids", class: "sample" },
        ids.slice(0, SHOW).map((i) => h("li", { class: "id" }, userText(i))),
        ids.length > SHOW ? h("li", {}, "… and " + (ids.length - SHOW) + " more") : null);
    const d = h("dialog", { id: opts.id + "-dialog", "aria-labelledby": opts.id + "-title",
      class: "confirm" },
    h("h3", { id: opts.id + "-title" }, opts.title),
    h("p", {}, opts.text),
    list,
    opts.extra || null,
    reason && h("p", {}, h("label", { for: opts.id + "-reason" },
      (opts.label || "Reason") + " "), reason),
    h("p", {}, keep, " ", yes));
    d.addEventListener("close", () => {
      d.remove();
      resolve({ ok, reason: reason ? reason.value : "" });
    });
    document.body.append(d);
    d.showModal();
    keep.focus();
  });
}
