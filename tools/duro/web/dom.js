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
  s.textContent = text;
  s.className = isError ? "error" : "";
}

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

async function request(path, options) {
  const r = await fetch("/api/v1/" + path,
    Object.assign({ credentials: "same-origin" }, options));
  return r;
}

async function check(r) {
  if (r.ok) return r;
  const body = await r.json().catch(() => null);
  const e = body && body.error ? body.error : { code: "http", message: r.statusText };
  throw new ApiError(r.status, e.code, e.message || e.code);
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
