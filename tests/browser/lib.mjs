// lib.mjs - what the browser tests share: a copy of the seeded store, a
// `duro ui` child (and, when asked, a runtime from `cli_fixture serve`)
// killed in every path through t.after, and Debian's Chromium driven by
// playwright-core (never a downloaded browser). run.sh sets the env.
import { spawn, spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set (run the tests through ctest)`);
  return v;
};

export const TOKEN = "browser-test-token-0123456789";
export const HOSTILE = "a\"<img src=x onerror=alert(1)>\nb";
// HOSTILE as the page shows it: its newline is a visible escape.
export const HOSTILE_SHOWN = "a\"<img src=x onerror=alert(1)>\\nb";
export const ref = (id) => Buffer.from(id, "utf8").toString("base64url");

const children = new Set();
process.on("exit", () => {
  for (const c of children) c.kill("SIGKILL");
});

function track(t, child) {
  children.add(child);
  child.on("exit", () => children.delete(child));
  t.after(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  });
}

// Resolves with the first stdout line of @p child, or rejects after @p ms.
function firstLine(child, ms) {
  return new Promise((resolve, reject) => {
    let buf = "";
    let err = "";
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`no first line within ${ms} ms; stderr: ${err}`));
    }, ms);
    child.stderr.on("data", (d) => { err += d; });
    child.stdout.on("data", (d) => {
      buf += d;
      const nl = buf.indexOf("\n");
      if (nl >= 0) {
        clearTimeout(timer);
        resolve(buf.slice(0, nl));
      }
    });
    child.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`exited (${code}) before its first line; stderr: ${err}`));
    });
  });
}

// A private copy of the seeded store, `duro ui` over it, and with
// {runtime: true} a runtime so that terminate and suspend take effect;
// {readOnly: true}: duro ui --read-only; {args: [...]}: more options (e.g.
// --tokens-file). Returns {url (the printed one, with its one-time
// #login=CODE), base, db, dir, child, stderr() (what it said so far)}.
export async function startUi(t, opts = {}) {
  const dir = mkdtempSync(join(tmpdir(), "duro-browser-test-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const seed = env("DURO_SEED_DB");
  for (const ext of ["", "-wal"]) {
    if (existsSync(seed + ext)) copyFileSync(seed + ext, join(dir, "s.db" + ext));
  }
  const db = "sqlite:" + join(dir, "s.db");
  if (opts.sql) {
    // a change to this test's copy of the seed (cli_fixture sql)
    const r = spawnSync(env("DURO_FIXTURE"), ["sql", join(dir, "s.db"), opts.sql],
      { encoding: "utf8" });
    if (r.status !== 0) throw new Error("cli_fixture sql: " + r.stderr);
  }
  writeFileSync(join(dir, "token"), TOKEN + "\n");
  const ui = spawn(env("DURO_BIN"), ["--db", db, "ui", "--listen", "127.0.0.1:0",
    "--token-file", join(dir, "token"), ...(opts.readOnly ? ["--read-only"] : []),
    ...(opts.args || [])],
  { stdio: ["ignore", "pipe", "pipe"] });
  track(t, ui);
  let said = "";
  ui.stderr.on("data", (d) => { said += d; });
  const line = await firstLine(ui, 15000);
  const m = /^duro ui: (http:\/\/127\.0\.0\.1:\d+)\/#login=([0-9a-f]+)$/.exec(line);
  if (!m) throw new Error("unexpected first line: " + line);
  if (opts.runtime) {
    const rt = spawn(env("DURO_FIXTURE"), ["serve", db],
      { stdio: ["pipe", "inherit", "inherit"] });
    track(t, rt);
  }
  return { url: line.slice("duro ui: ".length), base: m[1], db, dir, child: ui,
    stderr: () => said };
}

// Chromium and a page whose problems are collected: page errors, console
// messages about the Content Security Policy, and any dialog (dismissed).
// @p opts.timezoneId: the browser's time zone (e.g. "America/New_York").
export async function openPage(t, opts = {}) {
  const browser = await chromium.launch({
    executablePath: "/usr/bin/chromium",
    args: ["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"],
    timeout: 30000,
  });
  t.after(() => browser.close());
  const context = await browser.newContext({ viewport: { width: 1200, height: 900 },
    ...(opts.timezoneId ? { timezoneId: opts.timezoneId } : {}) });
  const page = await context.newPage();
  page.setDefaultTimeout(15000);
  const problems = [];
  page.on("pageerror", (e) => problems.push("pageerror: " + e.message));
  page.on("console", (m) => {
    if (/Content Security Policy/i.test(m.text())) problems.push("csp: " + m.text());
    else if (m.type() === "error") {
      problems.push("console error: " + m.text() + " " + (m.location().url || ""));
    }
  });
  page.on("dialog", (d) => {
    problems.push("dialog: " + d.message());
    d.dismiss().catch(() => {});
  });
  return { browser, context, page, problems };
}

export async function screenshot(page, name) {
  const dir = process.env.DURO_SCREENSHOTS;
  if (dir) await page.screenshot({ path: join(dir, name + ".png"), fullPage: true });
}

// Starts instance @p id of Waiter in the store of @p ui with the CLI.
export function startInstance(ui, id, orchestration = "Waiter") {
  const r = spawnSync(env("DURO_BIN"), ["--db", ui.db, "start", orchestration, id],
    { encoding: "utf8" });
  if (r.status !== 0) throw new Error("duro start " + JSON.stringify(id) + ": " + r.stderr);
}

// GET /api/v1/PATH from inside the page, with its session (sessionStorage),
// as JSON; apiText: as text.
const fetchInPage = (page, path, as) => page.evaluate(async ([p, a]) => {
  const r = await fetch("/api/v1/" + p,
    { headers: { "X-Duro-Session": sessionStorage.getItem("duro_session") || "" } });
  return a === "json" ? r.json() : r.text();
}, [path, as]);
export const api = (page, path) => fetchInPage(page, path, "json");
export const apiText = (page, path) => fetchInPage(page, path, "text");

// Polls fn() until it returns a truthy value (returned); fails after ms.
export async function waitFor(what, fn, ms = 20000) {
  const deadline = Date.now() + ms;
  let last;
  while (Date.now() < deadline) {
    last = await fn();
    if (last) return last;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error("timed out waiting for " + what + ": " + JSON.stringify(last));
}
