// app.js - duro ui: signs in, then routes on the fragment: "#/"
// (instances, filters in its query), "#/instance?ref=REF" (one
// instance), "#/actions" (recent actions), "#/schedules" (the schedules)
// or "#/schedule?ref=REF" (one schedule). Ids travel as refs (base64url of the id's bytes), never as
// display strings.
//
// Signing in gives a session id (never the token) kept in this tab's
// sessionStorage (dom.js); it comes from, in this order: the one-time
// #login=CODE of the URL duro ui printed (dropped from the address bar
// before it is used), the session this tab already has (a reload), another
// open tab of this console (asked over a BroadcastChannel, which is scoped
// to this origin), or the sign-in form, where an operator pastes a token.
import { get, post, say, h, session, whenSignedOut } from "./dom.js";
import { showList } from "./list.js";
import { showInstance } from "./instance.js";
import { showActions } from "./actions.js";
import { showSchedules, showSchedule } from "./schedules.js";

let stopPage = null;
let readOnly = false; // the session's, from the session or summary answer
let routing = false; // signed in: the fragment picks the page

function showMode(s) {
  readOnly = !!s.read_only;
  document.getElementById("mode").textContent =
    (s.read_only ? "read-only, " : "") + "as " + s.requested_by;
  signOutButton().hidden = false;
}

function signOutButton() {
  let b = document.getElementById("signout");
  if (!b) {
    b = h("button", { type: "button", id: "signout", class: "link", hidden: true,
      onclick: signOut }, "Sign out");
    document.querySelector("header").append(b);
  }
  return b;
}

async function signOut() {
  try {
    await post("logout", {});
  } catch { /* ended anyway: the page forgets it */ }
  session.clear();
  showSignIn("Signed out.");
}

// Other tabs of this console share their session with a new one.
const channel = "BroadcastChannel" in window ? new BroadcastChannel("duro-session") : null;
if (channel) {
  channel.onmessage = (e) => {
    if (e.data && e.data.ask && session.get()) channel.postMessage({ session: session.get() });
  };
}

function askOtherTabs() {
  if (!channel) return Promise.resolve(null);
  return new Promise((resolve) => {
    const listen = (e) => {
      if (e.data && typeof e.data.session === "string") done(e.data.session);
    };
    const timer = setTimeout(() => done(null), 300);
    function done(id) {
      clearTimeout(timer);
      channel.removeEventListener("message", listen);
      resolve(id);
    }
    channel.addEventListener("message", listen);
    channel.postMessage({ ask: true });
  });
}

function stopPageNow() {
  if (stopPage) stopPage();
  stopPage = null;
}

// The sign-in form: a token (the first line of --token-file, a line of
// --tokens-file, or $DURO_UI_TOKEN), exchanged for a session.
function showSignIn(message, isError) {
  routing = false;
  stopPageNow();
  document.getElementById("mode").textContent = "";
  signOutButton().hidden = true;
  const token = h("input", { id: "signin-token", type: "password", autocomplete: "off",
    spellcheck: "false", required: true });
  const form = h("form", { id: "signin", class: "filters" },
    h("label", { for: "signin-token" }, "Token "), token, " ",
    h("button", { type: "submit" }, "Sign in"));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const value = token.value;
    token.value = "";
    try {
      adopt(await post("session", { token: value }));
    } catch (err) {
      say(err.message, true);
      token.focus();
    }
  });
  const view = document.getElementById("view");
  view.replaceChildren(
    h("h2", {}, "Sign in"),
    h("p", {}, "Open the URL duro ui printed (it signs you in once, for a few " +
      "minutes; kill -USR1 its pid for a new one), or paste your token."),
    form);
  say(message || "", isError);
  token.focus();
}

// A session answer: kept, and the page starts.
function adopt(s) {
  session.set(s.session);
  showMode(s);
  say("");
  start();
}

function route() {
  stopPageNow();
  const hash = location.hash.replace(/^#/, "") || "/";
  const qpos = hash.indexOf("?");
  const path = qpos < 0 ? hash : hash.slice(0, qpos);
  const params = new URLSearchParams(qpos < 0 ? "" : hash.slice(qpos + 1));
  const view = document.getElementById("view");
  view.replaceChildren();
  say("");
  if (path === "/instance" && params.get("ref")) {
    stopPage = showInstance(view, params.get("ref"), { readOnly });
  } else if (path === "/actions") {
    stopPage = showActions(view, params);
  } else if (path === "/schedules") {
    stopPage = showSchedules(view, { readOnly });
  } else if (path === "/schedule" && params.get("ref")) {
    stopPage = showSchedule(view, params.get("ref"), { readOnly });
  } else {
    stopPage = showList(view, params);
  }
}

function start() {
  routing = true;
  route();
}

// A #login=CODE (or a #token=, refused) in the fragment: at load, or
// pasted into the address bar of an open console (a hashchange).
async function signInFromFragment() {
  const code = /(?:^#|&)login=([^&]*)/.exec(location.hash);
  const token = /(?:^#|&)token=/.test(location.hash);
  if (!code && !token) return false;
  // Out of the address bar (and this history entry) before anything else.
  history.replaceState(null, "", location.pathname + location.search + "#/");
  if (token) {
    session.clear();
    showSignIn("A token is never taken from the URL: paste it here.", true);
    return true;
  }
  try {
    adopt(await post("session", { code: decodeURIComponent(code[1]) }));
  } catch (e) {
    if (e.status !== 401 && e.status !== 429) throw e;
    // used or expired: a tab that is signed in already goes on
    if (!session.get()) showSignIn(e.message, true);
    else start();
  }
  return true;
}

async function main() {
  whenSignedOut(() => showSignIn("The session has ended or expired: sign in again.", true));
  window.addEventListener("hashchange", () => {
    signInFromFragment().then((took) => {
      if (!took && routing && session.get()) route();
    }).catch((e) => say(e.message, true));
  });
  if (await signInFromFragment()) return;
  if (!session.get()) {
    const borrowed = await askOtherTabs();
    if (borrowed) session.set(borrowed);
  }
  if (!session.get()) return showSignIn();
  try {
    showMode(await get("summary"));
  } catch (e) {
    if (e.status === 401) return; // whenSignedOut shows the form
    throw e;
  }
  start();
}

main().catch((e) => say(e.message, true));
