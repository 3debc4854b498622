// app.js - duro ui: exchanges the #token= fragment for the session cookie,
// then routes on the fragment: "#/" (instances, filters in its query) or
// "#/instance?ref=REF" (one instance). Ids travel as refs (base64url of
// the id's bytes), never as display strings.
import { get, post, say } from "./dom.js";
import { showList } from "./list.js";
import { showInstance } from "./instance.js";

let stopPage = null;
let readOnly = false; // the session's, from the session or summary answer

function showMode(s) {
  readOnly = !!s.read_only;
  document.getElementById("mode").textContent =
    (s.read_only ? "read-only, " : "") + "as " + s.requested_by;
}

async function login() {
  const m = /(?:^#|&)token=([^&]*)/.exec(location.hash);
  if (!m) { // a reload: the cookie is the session
    showMode(await get("summary"));
    return;
  }
  // Drop the token from the address bar and history at once.
  history.replaceState(null, "", location.pathname + location.search + "#/");
  showMode(await post("session", { token: decodeURIComponent(m[1]) }));
}

function route() {
  if (stopPage) stopPage();
  stopPage = null;
  const hash = location.hash.replace(/^#/, "") || "/";
  const qpos = hash.indexOf("?");
  const path = qpos < 0 ? hash : hash.slice(0, qpos);
  const params = new URLSearchParams(qpos < 0 ? "" : hash.slice(qpos + 1));
  const view = document.getElementById("view");
  view.replaceChildren();
  say("");
  if (path === "/instance" && params.get("ref")) {
    stopPage = showInstance(view, params.get("ref"), { readOnly });
  } else {
    stopPage = showList(view, params);
  }
}

async function main() {
  try {
    await login();
  } catch (e) {
    say(e.message + " (open the URL duro ui printed)", true);
    return;
  }
  window.addEventListener("hashchange", route);
  route();
}

main();
