// The instances page: the #login= code becomes a session and leaves the
// URL; hostile ids are text; the counts filter the rows and the URL;
// paging with the cursor.
import { test } from "node:test";
import assert from "node:assert/strict";
import { HOSTILE_SHOWN, openPage, ref, screenshot, startUi } from "./lib.mjs";

test("instances page", async (t) => {
  const ui = await startUi(t);
  const { context, page, problems } = await openPage(t);
  await page.goto(ui.url);

  await t.test("the login code is exchanged for a session and leaves the URL", async () => {
    await page.locator("#rows tr[data-ref]").first().waitFor();
    assert.ok(!page.url().includes("login="), page.url());
    assert.deepEqual(await context.cookies(), []);
    const id = await page.evaluate(() => sessionStorage.getItem("duro_session"));
    assert.match(id, /^[0-9a-f]{64}$/);
  });

  await t.test("hostile ids are shown as text", async () => {
    const ids = await page.locator("#rows td.id").allTextContents();
    assert.ok(ids.includes(HOSTILE_SHOWN), JSON.stringify(ids));
    assert.ok(ids.includes("<script>alert(2)</script>"), JSON.stringify(ids));
    assert.equal(await page.locator("img").count(), 0);
    assert.equal(await page.locator("script").count(), 1);
  });

  await t.test("a count filters the rows and the URL", async () => {
    const n = Number(await page.locator('button[data-status="completed"] .n').textContent());
    assert.ok(n >= 2, "completed count " + n);
    await page.locator('button[data-status="completed"]').click();
    await page.waitForURL(/status=completed/);
    await page.locator('button[data-status="completed"][aria-pressed="true"]').waitFor();
    await page.waitForFunction((want) => {
      const s = [...document.querySelectorAll("#rows td.status")].map((e) => e.textContent);
      return s.length === want && s.every((x) => x === "completed");
    }, n);
    await screenshot(page, "instances-completed");
    // again: the filter is off
    await page.locator('button[data-status="completed"]').click();
    await page.waitForURL((u) => !u.hash.includes("status=completed"));
  });

  await t.test("the filter form and the URL agree", async () => {
    await page.locator("#f-st-running").check();
    await page.locator("#f-prefix").fill("w-");
    await page.locator("form.filters button[type=submit]").click();
    await page.waitForURL(/status=running.*id_prefix=w-|id_prefix=w-.*status=running/);
    await page.waitForFunction(() => {
      const ids = [...document.querySelectorAll("#rows td.id")].map((e) => e.textContent);
      return ids.length === 4 && ids.every((x) => x.startsWith("w-"));
    });
    // reloading the URL keeps the filter
    await page.reload();
    await page.waitForFunction(() =>
      document.querySelectorAll("#rows td.id").length === 4);
    assert.equal(await page.locator("#f-prefix").inputValue(), "w-");
    // the session (sessionStorage) outlives the reload: who acts is shown again
    await page.locator("#mode").filter({ hasText: /^as ui:/ }).waitFor();
  });

  await t.test("paging with the cursor", async () => {
    await page.evaluate(() => { location.hash = "#/?limit=3"; });
    await page.waitForFunction(() => document.querySelectorAll("#rows tr[data-ref]").length === 3);
    const first = await page.locator("#rows td.id").allTextContents();
    await page.locator("#next").click();
    await page.waitForFunction((f) => {
      const ids = [...document.querySelectorAll("#rows td.id")].map((e) => e.textContent);
      return ids.length > 0 && !ids.includes(f[0]);
    }, first);
    const second = await page.locator("#rows td.id").allTextContents();
    assert.ok(second[0] > first[2], JSON.stringify([first, second]));
    await page.locator("#prev").click();
    await page.waitForFunction((f) =>
      document.querySelector("#rows td.id")?.textContent === f[0], first);
  });

  await t.test("the page is in the URL: reload and Back return to it", async () => {
    await page.evaluate(() => { location.hash = "#/?limit=3"; });
    await page.waitForFunction(() => document.querySelectorAll("#rows tr[data-ref]").length === 3);
    const rowIds = () => page.locator("#rows td.id").allTextContents();
    const first = await rowIds();
    await page.locator("#next").click();
    await page.waitForFunction((f) => {
      const ids = [...document.querySelectorAll("#rows td.id")].map((e) => e.textContent);
      return ids.length > 0 && !ids.includes(f[0]);
    }, first);
    const second = await rowIds();
    await page.locator("#next").click();
    await page.waitForURL((u) => /cursor=[^&]+%2C|cursor=[^&]+,/.test(u.hash));
    await page.waitForFunction((s) => {
      const ids = [...document.querySelectorAll("#rows td.id")].map((e) => e.textContent);
      return ids.length > 0 && !ids.includes(s[0]);
    }, second);
    const third = await rowIds();
    assert.ok(third[0] > first[2], JSON.stringify([first, third]));
    // an instance, then Back
    await page.locator("#rows td.id a").first().click();
    await page.waitForURL(/#\/instance\?ref=/);
    await page.locator("h2.id").filter({ hasText: third[0] }).waitFor();
    await page.goBack();
    await page.waitForFunction((f) =>
      document.querySelector("#rows td.id")?.textContent === f[0], third);
    assert.deepEqual(await rowIds(), third);
    // a reload
    await page.reload();
    await page.waitForFunction((f) =>
      document.querySelector("#rows td.id")?.textContent === f[0], third);
    // Previous walks the trail back to the first page
    await page.locator("#prev").click();
    await page.waitForFunction((f) =>
      document.querySelector("#rows td.id")?.textContent !== f[0], third);
    await page.locator("#prev").click();
    await page.waitForFunction((f) =>
      document.querySelector("#rows td.id")?.textContent === f[0], first);
    assert.equal(await page.locator("#prev").isDisabled(), true);
    assert.ok(!page.url().includes("cursor="), page.url());
  });

  await t.test("a failing refresh marks the rows stale; success clears it", async () => {
    const before = problems.length;
    await page.route("**/api/v1/**", (r) => r.abort());
    await page.locator("#stale").filter({ hasText: /^Not updated since \d\d:\d\d:\d\d UTC/ })
      .waitFor();
    assert.match(await page.locator("#instances").getAttribute("class"), /is-stale/);
    await page.unroute("**/api/v1/**");
    await page.locator("#stale").waitFor({ state: "hidden" });
    await page.waitForFunction(() => document.querySelector("#status").textContent === "");
    assert.doesNotMatch(await page.locator("#instances").getAttribute("class") || "", /is-stale/);
    // the aborted requests' console errors are this test's doing
    problems.splice(before, Infinity, ...problems.slice(before)
      .filter((x) => !/Failed to load resource/.test(x)));
  });

  await t.test("auto-refresh pauses while the tab is hidden", async () => {
    let calls = 0;
    const count = (r) => { if (r.url().includes("/api/v1/instances")) calls++; };
    page.on("request", count);
    await page.waitForTimeout(2500);
    assert.ok(calls >= 1, "refreshed while visible: " + calls);
    await page.evaluate(() => {
      Object.defineProperty(document, "hidden", { configurable: true, get: () => true });
    });
    calls = 0;
    await page.waitForTimeout(4500);
    assert.equal(calls, 0, "refreshed while hidden");
    await page.evaluate(() => { delete document.hidden; });
    page.off("request", count);
  });

  await screenshot(page, "instances");
  assert.deepEqual(problems, []);

  await t.test("control: a CSP violation would be noticed", async () => {
    await page.evaluate(() => {
      const i = document.createElement("img");
      i.setAttribute("src", "http://192.0.2.1/x.png");
      document.body.append(i);
    });
    await page.waitForFunction(() => true);
    const deadline = Date.now() + 5000;
    while (!problems.some((p) => p.startsWith("csp:")) && Date.now() < deadline) {
      await page.waitForTimeout(50);
    }
    assert.ok(problems.some((p) => p.startsWith("csp:")), JSON.stringify(problems));
  });
});

test("times: the filters are UTC, as the table, in any time zone", async (t) => {
  const ui = await startUi(t);
  const { page, problems } = await openPage(t, { timezoneId: "America/New_York" });
  await page.goto(ui.url);
  await page.locator("#rows tr[data-ref]").first().waitFor();
  assert.equal(await page.evaluate(() => new Date(Date.UTC(2026, 0, 1)).getHours()), 19,
    "the browser is in New York");
  assert.match(await page.locator('label[for="f-after"]').textContent(), /UTC/);
  assert.match(await page.locator('label[for="f-before"]').textContent(), /UTC/);
  // the table's time, typed into the filter, is the same instant
  // (the time, then its age: "2026-05-01 10:17:59.123Z (5 min ago)")
  const cell = await page.locator('#rows tr[data-ref] td[data-label="Created"]').first()
    .textContent();
  const shown = cell.replace(/ \(.*\)$/, "");
  assert.match(shown, /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}Z$/);
  await page.locator("#f-after").fill("2026-05-01T10:17:59");
  await page.locator("form.filters button[type=submit]").click();
  await page.waitForURL((u) => decodeURIComponent(u.hash).includes("created_after=2026-05-01T10:17:59Z"));
  await page.reload();
  await page.locator("#rows tr").first().waitFor();
  assert.equal(await page.locator("#f-after").inputValue(), "2026-05-01T10:17:59");
  assert.deepEqual(problems, []);
});

test("read-only: neither page offers an action", async (t) => {
  const ui = await startUi(t, { readOnly: true });
  const { page, problems } = await openPage(t);
  await page.goto(ui.url);
  await page.locator("#rows tr[data-ref]").first().waitFor();
  await page.locator("#mode").filter({ hasText: /^read-only, as ui:/ }).waitFor();
  assert.equal(await page.locator("#cancel-matching").isHidden(), true);
  // from the list, and after a reload (the mode then comes from summary)
  for (const how of ["click", "reload"]) {
    if (how === "click") {
      await page.evaluate((r) => { location.hash = "#/instance?ref=" + r; }, ref("wait-1"));
    } else {
      await page.reload();
    }
    await page.locator('#card dd[data-field="Status"]').waitFor();
    for (const id of ["#do-cancel", "#do-terminate", "#do-suspend", "#do-raise"]) {
      assert.equal(await page.locator(id).isHidden(), true, how + ": " + id);
    }
    assert.equal(await page.locator('section[aria-label="Actions"]').isHidden(), true);
  }
  assert.deepEqual(problems, []);
});
