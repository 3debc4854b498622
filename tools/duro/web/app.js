// duro ui: the minimal page. Exchanges the #token= fragment for the
// session cookie, then shows the counts and the instance list. Every
// string from the store is rendered with textContent only (ids may hold
// quotes, '<', newlines): no HTML is ever built from data.

const api = "/api/v1/";

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  for (const c of children) {
    e.append(typeof c === "string" ? document.createTextNode(c) : c);
  }
  return e;
}

function say(text, isError) {
  const s = document.getElementById("status");
  s.textContent = text;
  s.className = isError ? "error" : "";
}

async function call(path, options) {
  const r = await fetch(api + path, Object.assign({ credentials: "same-origin" }, options));
  const body = await r.json().catch(() => null);
  if (!r.ok) {
    const msg = body && body.error ? body.error.message : r.statusText;
    throw new Error(msg);
  }
  return body;
}

async function login() {
  const m = /(?:^#|&)token=([^&]*)/.exec(location.hash);
  if (!m) return;
  // Drop the token from the address bar and history at once.
  history.replaceState(null, "", location.pathname + location.search);
  await call("session", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ token: decodeURIComponent(m[1]) }),
  });
}

async function showSummary() {
  const s = await call("summary");
  const ul = document.getElementById("counts");
  ul.replaceChildren();
  for (const [status, n] of Object.entries(s.counts)) {
    ul.append(el("li", {}, status + ": " + n));
  }
  document.getElementById("mode").textContent = s.read_only ? "read-only" : "";
}

let cursor = null;

async function showInstances(more) {
  const q = new URLSearchParams({ limit: "50" });
  if (more && cursor) q.set("cursor", cursor);
  const page = await call("instances?" + q.toString());
  const tbody = document.getElementById("rows");
  if (!more) tbody.replaceChildren();
  for (const i of page.instances) {
    tbody.append(el("tr", { "data-ref": i.ref },
      el("td", { class: "id" }, i.id),
      el("td", {}, i.name || ""),
      el("td", { class: "st-" + i.status }, i.status + (i.cancelling ? " (cancelling)" : "")),
      el("td", {}, i.created_at || "-"),
      el("td", {}, i.updated_at || "-")));
  }
  cursor = page.next_cursor;
  document.getElementById("more").hidden = !cursor;
}

async function main() {
  document.getElementById("more").addEventListener("click", () => {
    showInstances(true).catch((e) => say(e.message, true));
  });
  try {
    await login();
    await showSummary();
    await showInstances(false);
    say("");
  } catch (e) {
    say(e.message + " (open the URL duro ui printed)", true);
  }
}

main();
