// Signing in (issue 22, Security): no ambient credential reaches another
// server on this host; the token never lands in the browser's history; the
// sign-in form, signing out and a second tab; an operator of
// --tokens-file is audited as ui:NAME.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync }
  from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";
import { TOKEN, api, openPage, ref, screenshot, startUi, waitFor } from "./lib.mjs";

// A plain HTTP server on another port of 127.0.0.1 that records the
// headers of every request it gets: another web application on this host.
async function otherServer(t) {
  const seen = [];
  const server = createServer((req, res) => {
    seen.push({ url: req.url, headers: req.headers });
    res.writeHead(200, { "Content-Type": "text/html" });
    res.end("<!doctype html><title>other</title><p>another application</p>");
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.after(() => server.close());
  return { seen, base: "http://127.0.0.1:" + server.address().port };
}

test("no credential of duro's reaches another server on this host", async (t) => {
  const ui = await startUi(t);
  const other = await otherServer(t);
  const { context, page, problems } = await openPage(t);
  await page.goto(ui.url);
  await page.locator("#rows tr[data-ref]").first().waitFor();
  const session = await page.evaluate(() => sessionStorage.getItem("duro_session")) || "-";
  // the other application, opened in the same browser (two ways of naming
  // this host), with a page load and its own fetch
  const page2 = await context.newPage();
  for (const base of [other.base, other.base.replace("127.0.0.1", "localhost")]) {
    await page2.goto(base + "/page");
    await page2.evaluate(() => fetch("/fetched", { credentials: "include" }));
  }
  await page2.close();
  assert.ok(other.seen.length >= 4, JSON.stringify(other.seen.map((r) => r.url)));
  for (const r of other.seen) {
    assert.equal(r.headers.cookie, undefined, "a Cookie header: " + JSON.stringify(r));
    const all = JSON.stringify(r.headers);
    assert.ok(!all.includes(TOKEN), "the token was sent: " + all);
    assert.ok(!all.includes(session), "the session was sent: " + all);
  }
  assert.match(session, /^[0-9a-f]{64}$/);
  assert.deepEqual(await context.cookies(), [], "duro set a cookie");
  assert.deepEqual(problems, []);
});

// Every file under @p dir (recursively), as Buffers.
function filesUnder(dir) {
  const out = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    const st = statSync(p, { throwIfNoEntry: false });
    if (!st) continue;
    if (st.isDirectory()) out.push(...filesUnder(p));
    else if (st.isFile()) out.push({ path: p, bytes: readFileSync(p) });
  }
  return out;
}

test("the token is never in the browser's history or profile", async (t) => {
  const ui = await startUi(t);
  // a profile of our own (launchPersistentContext), read after Chromium
  // has closed it: its History SQLite file, and every other file
  const profile = mkdtempSync(join(tmpdir(), "duro-browser-profile-"));
  t.after(() => rmSync(profile, { recursive: true, force: true }));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: "/usr/bin/chromium",
    args: ["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"],
    timeout: 30000,
  });
  let closed = false;
  t.after(() => { if (!closed) return context.close(); });
  const page = context.pages()[0] || await context.newPage();
  page.setDefaultTimeout(15000);
  await page.goto(ui.url);
  await page.locator("#rows tr[data-ref]").first().waitFor();
  assert.ok(!page.url().includes("login="), page.url());
  await page.evaluate((r) => { location.hash = "#/instance?ref=" + r; }, ref("hello-1"));
  await page.locator("h2.id").waitFor();
  await page.goBack();
  await page.locator("#rows tr[data-ref]").first().waitFor();
  await context.close();
  closed = true;
  const files = filesUnder(profile);
  const history = files.find((f) => /[/\\]Default[/\\]History$/.test(f.path));
  assert.ok(history, "no History file in " + files.map((f) => f.path).join(", "));
  const port = new URL(ui.base).port;
  assert.ok(history.bytes.includes("127.0.0.1:" + port),
    "the History file does not hold the console's visit: is it the right file?");
  for (const f of files) {
    assert.ok(!f.bytes.includes(TOKEN), "the token is in " + f.path);
  }
});

test("the sign-in form, signing out, a used login URL, a second tab", async (t) => {
  const ui = await startUi(t);
  const { context, page, problems } = await openPage(t);
  // the printed URL signs in once: spent here, in a context thrown away
  const spent = await context.browser().newContext();
  t.after(() => spent.close());
  const first = await spent.newPage();
  await first.goto(ui.url);
  await first.locator("#rows tr[data-ref]").first().waitFor();

  await t.test("a used login URL shows the form, saying why", async () => {
    await page.goto(ui.url);
    await page.locator("#signin-token").waitFor();
    await page.locator("#status").filter({ hasText: /used or expired|unknown or used/ })
      .waitFor();
    assert.ok(!page.url().includes("login="), page.url());
  });

  await t.test("a wrong token is refused and the form stays", async () => {
    await page.locator("#signin-token").fill("not-the-token-0123456789");
    await page.locator("#signin button[type=submit]").click();
    await page.locator("#status.error").filter({ hasText: /wrong token/ }).waitFor();
    assert.equal(await page.locator("#signin-token").isVisible(), true);
    assert.equal(await page.locator("#signin-token").inputValue(), "");
  });

  await t.test("the token signs in; the page shows the operator", async () => {
    await page.locator("#signin-token").fill(TOKEN);
    await page.locator("#signin button[type=submit]").click();
    await page.locator("#rows tr[data-ref]").first().waitFor();
    await page.locator("#mode").filter({ hasText: /^as ui:/ }).waitFor();
    assert.deepEqual(await context.cookies(), []);
    await screenshot(page, "signed-in");
  });

  await t.test("a second tab shares the session; a reload keeps it", async () => {
    const tab = await context.newPage();
    await tab.goto(ui.base + "/");
    await tab.locator("#rows tr[data-ref]").first().waitFor();
    assert.equal(await tab.locator("#signin-token").count(), 0);
    await tab.reload();
    await tab.locator("#rows tr[data-ref]").first().waitFor();
    await tab.close();
  });

  await t.test("signing out ends the session on the server", async () => {
    const id = await page.evaluate(() => sessionStorage.getItem("duro_session"));
    await page.locator("#signout").click();
    await page.locator("#signin-token").waitFor();
    assert.equal(await page.evaluate(() => sessionStorage.getItem("duro_session")), null);
    const status = await page.evaluate(async (s) =>
      (await fetch("/api/v1/summary", { headers: { "X-Duro-Session": s } })).status, id);
    assert.equal(status, 401);
  });

  await t.test("a session ended elsewhere brings the form back", async () => {
    await page.locator("#signin-token").fill(TOKEN);
    await page.locator("#signin button[type=submit]").click();
    await page.locator("#rows tr[data-ref]").first().waitFor();
    // the server ends it (as an expiry or a restart would); the page
    // notices at its next request (the list refreshes every 2 s)
    const status = await page.evaluate(async () => (await fetch("/api/v1/logout", {
      method: "POST",
      headers: { "Content-Type": "application/json",
        "X-Duro-Session": sessionStorage.getItem("duro_session") },
      body: "{}",
    })).status);
    assert.equal(status, 200);
    await page.locator("#signin-token").waitFor();
    await page.locator("#status").filter({ hasText: /ended or expired/ }).waitFor();
    assert.equal(await page.evaluate(() => sessionStorage.getItem("duro_session")), null);
  });

  await t.test("a token in the URL is dropped, never used", async () => {
    await page.goto(ui.base + "/#token=" + TOKEN);
    await page.locator("#signin-token").waitFor();
    assert.ok(!page.url().includes(TOKEN), page.url());
    await page.locator("#status").filter({ hasText: /never taken from the URL/ }).waitFor();
  });
  assert.deepEqual(problems.filter((p) => !/401|429/.test(p)), []);
});

test("an operator of --tokens-file is audited as ui:NAME", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "duro-browser-tokens-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const alice = "alice-browser-token-0123456789";
  writeFileSync(join(dir, "tokens"), "# operators\nalice " + alice + "\n", { mode: 0o600 });
  const ui = await startUi(t, { runtime: true,
    args: ["--tokens-file", join(dir, "tokens"), "--operator", "bob"] });
  const { page, problems } = await openPage(t);
  await page.goto(ui.base + "/");
  await page.locator("#signin-token").fill(alice);
  await page.locator("#signin button[type=submit]").click();
  await page.locator("#mode").filter({ hasText: /^as ui:alice$/ }).waitFor();
  await page.evaluate((r) => { location.hash = "#/instance?ref=" + r; }, ref("w-3"));
  await page.locator('#card dd[data-field="Status"]').filter({ hasText: "running" })
    .waitFor({ timeout: 20000 });
  await page.locator("#cancel-reason").fill("alice was here");
  await page.locator("#do-cancel").click();
  await page.locator("#confirm-cancel").click();
  await page.locator('#card dd[data-field="Cancel requested by"]')
    .filter({ hasText: /^ui:alice$/ }).waitFor({ timeout: 20000 });
  const events = await waitFor("the cancellation in w-3's history", async () => {
    const h = await api(page, "history?ref=" + ref("w-3"));
    return h.events.find((e) => e.requested_by === "ui:alice") ? h.events : null;
  });
  assert.ok(events.some((e) => e.kind === "OrchestrationCancelRequested" &&
    e.requested_by === "ui:alice"), JSON.stringify(events));
  await waitFor("the action log line", async () => /cancel w-3 by ui:alice/.test(ui.stderr()));
  assert.ok(!ui.stderr().includes(alice), "alice's token in the log");
  assert.deepEqual(problems, []);
});
