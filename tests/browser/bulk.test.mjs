// The instances page's bulk actions and time filters: cancel the selected
// rows; "all matching" with a preview whose apply cancels what the preview
// counted and not an instance started after it; the created-time filters
// kept in the URL; the focus survives the 2 s refresh.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { openPage, ref, screenshot, startUi } from "./lib.mjs";

// GET /api/v1/PATH from inside the page (its cookie), as JSON.
const api = (page, path) => page.evaluate(async (p) =>
  (await fetch("/api/v1/" + p, { credentials: "same-origin" })).json(), path);

async function waitFor(what, fn, ms = 20000) {
  const deadline = Date.now() + ms;
  let last;
  while (Date.now() < deadline) {
    last = await fn();
    if (last) return last;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error("timed out waiting for " + what + ": " + JSON.stringify(last));
}

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
    await page.locator("#bulk-cancel").click();
    await page.locator("#status").filter({ hasText: "cancel: 2 of 2 changed" }).waitFor();
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
    const box = page.getByLabel("Select wait-3", { exact: true });
    await box.focus();
    const key = "sel:" + ref("wait-3");
    // two refreshes of the rows after the focus
    let seen = 0;
    const count = (r) => { if (r.url().includes("/api/v1/instances")) seen++; };
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
    const started = spawnSync(process.env.DURO_BIN, ["--db", ui.db, "start", "Waiter", "w-5"],
      { encoding: "utf8" });
    assert.equal(started.status, 0, started.stderr);
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
    const local = new Date(future - future.getTimezoneOffset() * 60000).toISOString().slice(0, 19);
    await page.locator("#f-after").fill(local);
    await page.locator("form.filters button[type=submit]").click();
    await page.waitForURL((u) => u.hash.includes("created_after=" + future.getUTCFullYear()));
    await page.locator("#rows td").filter({ hasText: "No instances match." }).waitFor();
    await page.reload();
    await page.locator("#rows td").filter({ hasText: "No instances match." }).waitFor();
    assert.equal(await page.locator("#f-after").inputValue(), local);
    await screenshot(page, "instances-time-filter");
  });

  assert.deepEqual(problems, []);
});
