// The views on the store query API, over the seeded store (no runtime):
// the order (newest created, recently changed) and the page size; the
// number of matches; the status counts follow the filter; names by
// prefix or substring and several statuses from the form; an instance's
// children with their status; and "Recent actions", the cancels,
// terminates, suspends and resumes across instances with who and why,
// newest first, paged.
import { test } from "node:test";
import assert from "node:assert/strict";
import { api, openPage, ref, screenshot, startUi } from "./lib.mjs";

const rowCount = (page) => page.locator("#rows tr[data-ref]").count();

// Waits until the rows are @p n (a new page has been drawn).
async function rows(page, n) {
  await page.waitForFunction((want) =>
    document.querySelectorAll("#rows tr[data-ref]").length === want, n);
}

test("query views", async (t) => {
  const ui = await startUi(t);
  const { page, problems } = await openPage(t);
  await page.goto(ui.url);
  await page.locator("#rows tr[data-ref]").first().waitFor();
  const summary = await api(page, "summary");

  await t.test("order: newest first, recently changed; the page size", async () => {
    await page.locator("#f-order").selectOption("created");
    await page.locator("#f-limit").selectOption("20");
    await page.locator("form.filters button[type=submit]").click();
    await page.waitForURL((u) => u.hash.includes("order=created") && u.hash.includes("limit=20"));
    await rows(page, 20);
    const newest = await api(page, "instances?order=created&limit=20");
    assert.deepEqual(await page.locator("#rows tr[data-ref]").evaluateAll((trs) =>
      trs.map((tr) => tr.dataset.ref)), newest.instances.map((i) => i.ref));
    const times = newest.instances.map((i) => i.created_at_ms);
    assert.deepEqual(times, [...times].sort((a, b) => b - a));
    // the number of matches and the page's place
    await page.locator("#matches").filter({ hasText: "· 1–20 of " + summary.total +
      " matching" }).waitFor();
    await page.locator("#next").click();
    await page.locator("#matches").filter({ hasText: /^· 21–/ }).waitFor();
    const second = await page.locator("#rows td.id").allTextContents();
    assert.ok(!second.includes(newest.instances[0].id));
    // recently changed first, kept across a reload
    await page.locator("#f-order").selectOption("updated");
    await page.locator("form.filters button[type=submit]").click();
    await page.waitForURL((u) => u.hash.includes("order=updated") && !u.hash.includes("cursor"));
    const changed = await api(page, "instances?order=updated&limit=20");
    await page.waitForFunction((first) =>
      document.querySelector("#rows td.id")?.textContent === first, changed.instances[0].id);
    await page.reload();
    await page.waitForFunction((first) =>
      document.querySelector("#rows td.id")?.textContent === first, changed.instances[0].id);
    assert.equal(await page.locator("#f-order").inputValue(), "updated");
    assert.equal(await page.locator("#f-limit").inputValue(), "20");
    await screenshot(page, "instances-newest");
  });

  await t.test("several statuses from the form, and their count", async () => {
    await page.evaluate(() => { location.hash = "#/"; });
    await page.locator("#rows tr[data-ref]").first().waitFor();
    await page.locator("#f-st-running").check();
    await page.locator("#f-st-suspended").check();
    await page.locator("form.filters button[type=submit]").click();
    await page.waitForURL((u) => decodeURIComponent(u.hash).includes("status=running,suspended"));
    const want = summary.counts.running + summary.counts.suspended;
    await rows(page, want);
    const statuses = await page.locator("#rows td.status").allTextContents();
    assert.ok(statuses.every((s) => /^(running|suspended)/.test(s)), statuses.join());
    await page.locator("#matches").filter({ hasText: "of " + want + " matching" }).waitFor();
    for (const st of ["running", "suspended"]) {
      await page.locator(`button[data-status="${st}"][aria-pressed="true"]`).waitFor();
    }
    // a count takes its status out of the filter, or adds it
    await page.locator('button[data-status="running"]').click();
    await page.waitForURL((u) => /status=suspended(&|$)/.test(u.hash));
    await rows(page, summary.counts.suspended);
  });

  await t.test("names by prefix and by substring; the counts follow the filter", async () => {
    await page.evaluate(() => { location.hash = "#/"; });
    await page.locator("#rows tr[data-ref]").first().waitFor();
    await page.locator("#f-name-mode").selectOption("name_prefix");
    await page.locator("#f-name").fill("Wai");
    await page.locator("form.filters button[type=submit]").click();
    await page.waitForURL((u) => u.hash.includes("name_prefix=Wai"));
    const wai = await api(page, "counts?name_prefix=Wai");
    await rows(page, Math.min(wai.total, 50));
    const names = await page.locator('#rows td[data-label="Name"]').allTextContents();
    assert.ok(names.every((n) => n.startsWith("Wai")), names.join());
    // the counts are this filter's, not the store's
    for (const st of ["running", "completed", "cancelled"]) {
      await page.waitForFunction(([s, n]) =>
        document.querySelector(`button[data-status="${s}"] .n`)?.textContent === String(n),
      [st, wai.counts[st]]);
    }
    assert.notEqual(wai.counts.completed, summary.counts.completed);
    await page.locator("#matches").filter({ hasText: "of " + wai.total + " matching" }).waitFor();
    assert.match(await page.locator("ul.counts").getAttribute("aria-label"), /in this filter/);
    // a substring, with a hidden character in the name
    await page.locator("#f-name-mode").selectOption("name_contains");
    await page.locator("#f-name").fill("oof");
    await page.locator("form.filters button[type=submit]").click();
    await page.waitForURL((u) => u.hash.includes("name_contains=oof"));
    await rows(page, 1);
    assert.deepEqual(await page.locator("#rows td.id").allTextContents(), ["spoof-name-1"]);
    assert.equal(await page.locator("#f-name-mode").inputValue(), "name_contains");
    // "Cancel all matching" cannot take a substring: it says so
    await page.locator("#cancel-matching").click();
    await page.locator("#bulk-matched").filter({ hasText: /Nothing to cancel: a name prefix/ })
      .waitFor();
    assert.equal(await page.locator("#bulk-apply").isDisabled(), true);
    await page.locator("#bulk-close").click();
    await screenshot(page, "instances-name-contains");
  });

  await t.test("an instance's children, with their status", async () => {
    await page.evaluate((r) => { location.hash = "#/instance?ref=" + r; }, ref("parent-1"));
    await page.locator("#children-section").waitFor();
    await page.locator("#children-count").filter({ hasText: "(2, newest first)" }).waitFor();
    const kids = await page.locator("#children tr").evaluateAll((trs) => trs.map((tr) =>
      [tr.querySelector("td.id").textContent, tr.querySelector("td.status").textContent]));
    assert.deepEqual(kids, [["kid-2", "running"], ["kid-1", "completed"]]);
    await page.locator("#children a", { hasText: "kid-2" }).click();
    await page.locator("h2.id").filter({ hasText: "kid-2" }).waitFor();
    await page.locator("#parent-link").waitFor();
    assert.equal(await page.locator("#children-section").isHidden(), true);
    await screenshot(page, "instance-children");
  });

  await t.test("recent actions: who and why, newest first, paged", async () => {
    await page.evaluate(() => { location.hash = "#/"; });
    await page.locator("#nav-actions").click();
    await page.waitForURL(/#\/actions/);
    await page.locator("#action-rows tr[data-ref]").first().waitFor();
    const all = await page.locator("#action-rows tr[data-ref]").evaluateAll((trs) =>
      trs.map((tr) => ({
        id: tr.querySelector("td.id").textContent,
        action: tr.dataset.action,
        by: tr.querySelector("td.by").textContent,
        reason: tr.querySelector("td.reason").textContent,
        at: tr.querySelector("time").getAttribute("datetime"),
      })));
    const has = (id, action, by, reason) => all.some((r) => r.id === id &&
      r.action === action && r.by === by && r.reason === reason);
    assert.ok(has("slow-1", "cancel", "user:alice", "bad deploy"), JSON.stringify(all));
    assert.ok(has("term-1", "terminate", "user:carol", "stuck"), JSON.stringify(all));
    assert.ok(has("susp-1", "suspend", "user:bob", "maintenance"), JSON.stringify(all));
    assert.ok(all.some((r) => r.id === "resumed-1" && r.action === "resume" &&
      r.by === "user:erin"), JSON.stringify(all));
    // escaped, as every store string
    assert.ok(has("spoof-cancel-1", "cancel", "user:\\u202Eecila", "re\\u202Enosae\\u200Bx"),
      JSON.stringify(all));
    const times = all.map((r) => r.at);
    assert.deepEqual(times, [...times].sort().reverse());
    await screenshot(page, "recent-actions");
    // filtered by action, then by requester
    await page.locator("#a-action").selectOption("terminate");
    await page.locator("form.filters button[type=submit]").click();
    await page.waitForURL(/action=terminate/);
    await page.waitForFunction(() => {
      const r = [...document.querySelectorAll("#action-rows tr[data-ref]")];
      return r.length > 0 && r.every((tr) => tr.dataset.action === "terminate");
    });
    await page.locator("#a-action").selectOption("");
    await page.locator("#a-by").fill("user:alice");
    await page.locator("form.filters button[type=submit]").click();
    await page.waitForURL(/requested_by=user%3Aalice|requested_by=user:alice/);
    await page.waitForFunction(() => {
      const r = [...document.querySelectorAll("#action-rows td.by")];
      return r.length > 0 && r.every((td) => td.textContent === "user:alice");
    });
    // paged two at a time: the second page is the next two
    await page.evaluate(() => { location.hash = "#/actions?limit=2"; });
    await page.waitForFunction(() =>
      document.querySelectorAll("#action-rows tr[data-ref]").length === 2);
    const key = () => page.locator("#action-rows tr[data-ref]").evaluateAll((trs) =>
      trs.map((tr) => tr.querySelector("td.id").textContent + " " + tr.dataset.action));
    const first = await key();
    assert.deepEqual(first, all.slice(0, 2).map((r) => r.id + " " + r.action));
    await page.locator("#actions-next").click();
    await page.waitForFunction((f) => {
      const r = [...document.querySelectorAll("#action-rows tr[data-ref]")];
      return r.length === 2 && r[0].querySelector("td.id").textContent !== f[0].split(" ")[0];
    }, first);
    assert.deepEqual(await key(), all.slice(2, 4).map((r) => r.id + " " + r.action));
    // to an instance and back to this page of actions
    await page.locator("#action-rows td.id a").first().click();
    await page.locator("h2.id").waitFor();
    assert.equal(await page.locator("#back").textContent(), "← Recent actions");
    await page.locator("#back").click();
    await page.waitForURL(/#\/actions\?limit=2&cursor=/);
    await page.waitForFunction((want) => {
      const r = [...document.querySelectorAll("#action-rows tr[data-ref]")];
      return r.length === 2 && r[0].querySelector("td.id").textContent === want;
    }, all[2].id);
    await page.locator("#actions-prev").click();
    await page.waitForFunction((want) =>
      document.querySelector("#action-rows td.id")?.textContent === want, all[0].id);
  });

  assert.deepEqual(problems, []);
});
