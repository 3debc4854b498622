// The instances page's bulk actions and time filters: cancel the selected
// rows; "all matching" with a preview whose apply cancels what the preview
// counted and not an instance started after it; the created-time filters
// kept in the URL; the focus survives the 2 s refresh.
import { test } from "node:test";
import assert from "node:assert/strict";
import { api, openPage, ref, screenshot, startInstance, startUi, waitFor } from "./lib.mjs";

test("bulk actions and time filters", async (t) => {
  const ui = await startUi(t, { runtime: true });
  const { page, problems } = await openPage(t);
  await page.goto(ui.url);
  await page.locator("#rows tr[data-ref]").first().waitFor();

  await t.test("cancel the selected rows, with a reason", async () => {
    await page.evaluate(() => { location.hash = "#/?id_prefix=wait-"; });
    await page.waitForFunction(() =>
      document.querySelectorAll("#rows tr[data-ref]").length === 3);
    assert.equal(await page.locator("#bulk").isHidden(), true);
    await page.getByLabel("Select wait-1", { exact: true }).check();
    await page.getByLabel("Select wait-2", { exact: true }).check();
    await page.locator("#bulk-count").filter({ hasText: "2 selected" }).waitFor();
    await page.locator("#bulk-reason").fill("bulk-sel");
    // the confirmation names how many and which; Enter keeps them
    const posts = [];
    const count = (r) => { if (r.url().includes("/api/v1/bulk/control")) posts.push(r.url()); };
    page.on("request", count);
    await page.locator("#bulk-cancel").focus();
    await page.keyboard.press("Enter");
    const dialog = page.locator("#bulk-action-dialog");
    await dialog.waitFor();
    assert.match(await dialog.locator("h3").textContent(), /^Cancel 2 instances\?$/);
    assert.deepEqual((await dialog.locator("#bulk-action-ids li").allTextContents()).sort(),
      ["wait-1", "wait-2"]);
    assert.equal(await page.evaluate(() => document.activeElement?.id), "bulk-action-keep");
    await page.keyboard.press("Enter");
    await dialog.waitFor({ state: "detached" });
    await page.locator("#bulk-count").filter({ hasText: "2 selected" }).waitFor();
    // the reload after the dialog shows them still running: nothing was sent
    assert.deepEqual(posts, []);
    await page.locator("#bulk-cancel").click();
    await page.locator("#confirm-bulk-action").click();
    await page.locator("#status").filter({ hasText: "cancel: 2 of 2 changed" }).waitFor();
    page.off("request", count);
    assert.equal(posts.length, 1);
    for (const id of ["wait-1", "wait-2"]) {
      const i = await waitFor(id + " cancelled", async () => {
        const x = await api(page, "instance?ref=" + ref(id));
        return x.status === "cancelled" && x;
      });
      assert.equal(i.cancel_reason, "bulk-sel");
      assert.match(i.cancelled_by, /^ui:/);
    }
    const w3 = await api(page, "instance?ref=" + ref("wait-3"));
    assert.equal(w3.status, "running");
    assert.equal(w3.cancel_requested_at, null);
    assert.equal(await page.locator("#bulk").isHidden(), true, "selection cleared");
  });

  await t.test("the focus survives a refresh", async () => {
    // (in the table the focus pauses the rows' refresh; the counts go on)
    const box = page.locator('button[data-status="running"]');
    await box.focus();
    const key = "count:running";
    // two refreshes of the counts after the focus
    let seen = 0;
    const count = (r) => { if (r.url().includes("/api/v1/summary")) seen++; };
    page.on("requestfinished", count);
    await waitFor("two refreshes", async () => seen >= 2, 15000);
    page.off("requestfinished", count);
    await page.waitForTimeout(100); // let the last response render
    assert.equal(await page.evaluate(() => document.activeElement?.dataset.key), key);
  });

  await t.test("all matching: the apply cancels what the preview counted", async () => {
    await page.evaluate(() => { location.hash = "#/?status=running&id_prefix=w-&limit=2"; });
    await page.waitForFunction(() =>
      document.querySelectorAll("#rows tr[data-ref]").length === 2 &&
      !document.querySelector("#next").disabled);
    await page.locator("#select-page").check();
    await page.locator("#bulk-count").filter({ hasText: "2 selected" }).waitFor();
    await page.locator("#matching-count[data-matched='4']").waitFor();
    assert.match(await page.locator("#select-all-matching").textContent(),
      /Cancel all 4 pending or running instances matching the filter/);
    await page.locator("#select-all-matching button").click();
    const dialog = page.locator("#bulk-dialog");
    await dialog.locator("#bulk-matched[data-matched]").waitFor();
    const matched = Number(await dialog.locator("#bulk-matched").getAttribute("data-matched"));
    assert.equal(matched, 4, await dialog.locator("#bulk-matched").textContent());
    const sample = await dialog.locator("#bulk-sample li.id").allTextContents();
    assert.deepEqual(sample.sort(), ["w-1", "w-2", "w-3", "w-4"]);
    assert.match(await dialog.locator("#bulk-filter").textContent(), /id starting with "w-"/);
    await screenshot(page, "bulk-preview");

    // an instance started after the preview matches the filter but is not
    // part of it
    startInstance(ui, "w-5");
    await waitFor("w-5 running", async () =>
      (await api(page, "instance?ref=" + ref("w-5"))).status === "running");

    await dialog.locator("#bulk-query-reason").fill("bulk-query");
    await dialog.locator("#bulk-apply").click();
    await dialog.locator("#bulk-result[data-cancelled]").waitFor();
    assert.equal(Number(await dialog.locator("#bulk-result").getAttribute("data-cancelled")),
      matched);
    assert.match(await dialog.locator("#bulk-result").textContent(), /Cancelled 4 of the 4 previewed/);
    await dialog.locator("#bulk-close").click();
    for (const id of ["w-1", "w-2", "w-3", "w-4"]) {
      const i = await waitFor(id + " cancelled", async () => {
        const x = await api(page, "instance?ref=" + ref(id));
        return x.status === "cancelled" && x;
      });
      assert.equal(i.cancel_reason, "bulk-query");
    }
    const w5 = await api(page, "instance?ref=" + ref("w-5"));
    assert.equal(w5.status, "running");
    assert.equal(w5.cancel_requested_at, null);
  });

  await t.test("nothing cancellable: the dialog says so and cannot apply", async () => {
    await page.evaluate(() => { location.hash = "#/?status=completed"; });
    await page.waitForFunction(() => document.querySelectorAll("#rows tr[data-ref]").length > 0);
    await page.locator("#cancel-matching").click();
    await page.locator("#bulk-matched").filter({ hasText: "Nothing to cancel" }).waitFor();
    assert.equal(await page.locator("#bulk-apply").isDisabled(), true);
    await page.locator("#bulk-close").click();
  });

  await t.test("created-time filters live in the URL", async () => {
    await page.evaluate(() => { location.hash = "#/"; });
    await page.waitForFunction(() => document.querySelectorAll("#rows tr[data-ref]").length > 0);
    const all = await page.locator("#rows tr[data-ref]").count();
    await page.locator("#f-range").selectOption({ label: "last 24 hours" });
    await page.waitForURL((u) =>
      /created_after=\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ/.test(decodeURIComponent(u.hash)));
    await page.waitForFunction((n) =>
      document.querySelectorAll("#rows tr[data-ref]").length === n, all);
    // a window in the future matches nothing, and survives a reload
    const future = new Date(Date.now() + 86400000);
    // at :00 seconds a datetime-local input drops them from its value
    future.setUTCSeconds(30, 0);
    const utc = future.toISOString().slice(0, 19); // the inputs are UTC
    await page.locator("#f-after").fill(utc);
    await page.locator("form.filters button[type=submit]").click();
    await page.waitForURL((u) => u.hash.includes("created_after=" + future.getUTCFullYear()));
    await page.locator("#rows td").filter({ hasText: "No instances match." }).waitFor();
    await page.reload();
    await page.locator("#rows td").filter({ hasText: "No instances match." }).waitFor();
    assert.equal(await page.locator("#f-after").inputValue(), utc);
    await screenshot(page, "instances-time-filter");
  });

  assert.deepEqual(problems, []);
});

test("bulk: the dialog previews the form's filter; rows stay still under the user", async (t) => {
  const ui = await startUi(t);
  const { page, problems } = await openPage(t);
  await page.goto(ui.url);
  await page.locator("#rows tr[data-ref]").first().waitFor();

  await t.test("Cancel all matching applies the form first and says its filter", async () => {
    // typed, Filter not pressed
    await page.locator("#f-st-running").check();
    await page.locator("#f-prefix").fill("w-");
    await page.locator("#cancel-matching").click();
    await page.waitForURL((u) => u.hash.includes("id_prefix=w-") && u.hash.includes("status=running"));
    const dialog = page.locator("#bulk-dialog");
    await dialog.locator("#bulk-matched[data-matched]").waitFor();
    assert.equal(await dialog.locator("#bulk-matched").getAttribute("data-matched"), "4");
    assert.match(await dialog.locator("#bulk-filter").textContent(),
      /status running, id starting with "w-"/);
    assert.deepEqual((await dialog.locator("#bulk-sample li.id").allTextContents()).sort(),
      ["w-1", "w-2", "w-3", "w-4"]);
    // Close has the focus: Enter closes, cancels nothing
    assert.equal(await page.evaluate(() => document.activeElement?.id), "bulk-close");
    await page.keyboard.press("Enter");
    await dialog.waitFor({ state: "hidden" });
    assert.equal((await api(page, "instance?ref=" + ref("w-1"))).cancel_requested_at, null);
    // the rows are the form's filter too
    await page.waitForFunction(() => {
      const ids = [...document.querySelectorAll("#rows td.id")].map((e) => e.textContent);
      return ids.length === 4 && ids.every((x) => x.startsWith("w-"));
    });
  });

  await t.test("a half-typed time is refused, not read as no bound", async () => {
    await page.locator("#f-after").focus();
    await page.keyboard.type("05");
    assert.equal(await page.locator("#f-after").evaluate((e) => e.validity.badInput), true);
    await page.locator("#cancel-matching").click();
    await page.locator("#status").filter({ hasText: /^Finish or clear the time/ }).waitFor();
    assert.equal(await page.locator("#bulk-dialog").isVisible(), false);
    assert.equal(await page.evaluate(() => document.activeElement?.id), "f-after");
    await page.locator("#f-after").fill("");
  });

  const pending = async () =>
    Number(await page.locator('button[data-status="pending"] .n').textContent());
  const ids = () => page.locator("#rows td.id").allTextContents();

  await t.test("the pointer on the table pauses the rows, not the counts", async () => {
    await page.evaluate(() => { location.hash = "#/?id_prefix=w-"; });
    await page.waitForFunction(() => document.querySelectorAll("#rows tr[data-ref]").length === 4);
    const before = await ids();
    await page.getByLabel("Select w-3", { exact: true }).hover();
    await page.locator("#refresh-paused").filter({ hasText: /paused while the pointer/ }).waitFor();
    const n = await pending();
    startInstance(ui, "w-0"); // sorts first: would push every row down
    // a refresh happened (the counts show w-0), the rows did not move
    await waitFor("the counts to show w-0", async () => (await pending()) === n + 1);
    assert.deepEqual(await ids(), before);
    // the pointer leaves: the rows catch up
    await page.mouse.move(1, 1);
    await page.waitForFunction(() => document.querySelector("#refresh-paused").textContent === "");
    await page.waitForFunction(() =>
      document.querySelector("#rows td.id")?.textContent === "w-0");
  });

  await t.test("a selection pauses the rows and names itself", async () => {
    await page.getByLabel("Select w-2", { exact: true }).check();
    await page.mouse.move(1, 1);
    await page.locator("body").focus();
    await page.evaluate(() => document.activeElement?.blur());
    await page.locator("#refresh-paused").filter({ hasText: /paused while 1 selected/ }).waitFor();
    const before = await ids();
    const n = await pending();
    startInstance(ui, "w-00"); // between w-0 and w-1
    await waitFor("the counts to show w-00", async () => (await pending()) === n + 1);
    assert.deepEqual(await ids(), before);
    await page.locator("#bulk-clear").click();
    await page.mouse.move(1, 1); // the bar is gone: the table moved up under the pointer
    await page.waitForFunction(() => [...document.querySelectorAll("#rows td.id")]
      .map((e) => e.textContent).join(" ") === "w-0 w-00 w-1 w-2 w-3 w-4");
  });

  assert.deepEqual(problems, []);
});
