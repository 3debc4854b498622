// The instance page, with a runtime running beside duro ui: a cancel with
// a reason shows the reason and the requester (ui:...) in the status
// card; terminate (after its dialog) and suspend/resume change the
// status; raise-event checks its payload is JSON before sending; the
// timeline draws activities and a cancel request.
import { test } from "node:test";
import assert from "node:assert/strict";
import { HOSTILE, openPage, ref, screenshot, startUi } from "./lib.mjs";

const field = (page, name) => page.locator(`#card dd[data-field="${name}"]`);

async function open(page, id) {
  await page.evaluate((r) => { location.hash = "#/instance?ref=" + r; }, ref(id));
  await page.locator("h2.id").filter({ hasText: id.split("\n")[0] }).waitFor();
  await field(page, "Status").waitFor();
}

async function statusBecomes(page, want) {
  await page.waitForFunction((w) =>
    document.querySelector('#card dd[data-field="Status"]')?.textContent === w,
  want, { timeout: 20000 });
}

test("instance page", async (t) => {
  const ui = await startUi(t, { runtime: true });
  const { page, problems } = await openPage(t);
  await page.goto(ui.url);
  await page.locator("#rows tr[data-ref]").first().waitFor();

  await t.test("a hostile id opens from the list and shows as text", async () => {
    await page.locator("#rows td.id a").filter({ hasText: "onerror" }).click();
    await page.waitForURL(/#\/instance\?ref=/);
    await page.waitForFunction((id) =>
      document.querySelector("h2.id")?.textContent === id, HOSTILE);
    await field(page, "Status").waitFor();
    assert.equal(await page.locator("img").count(), 0);
    await page.locator("#events tr").first().waitFor();
    await screenshot(page, "instance-hostile");
  });

  await t.test("an id that is not UTF-8 opens by its ref and takes actions", async () => {
    await page.evaluate(() => { location.hash = "#/?id_prefix=bad-"; });
    const link = page.locator("#rows td.id a", { hasText: "bad-\uFFFD\uFFFD-utf8" });
    await link.click();
    await page.waitForFunction(() =>
      document.querySelector("h2.id")?.textContent === "bad-\uFFFD\uFFFD-utf8");
    assert.ok(page.url().includes("ref=YmFkLf_-LXV0Zjg"), page.url());
    await page.locator("#do-suspend").click();
    await statusBecomes(page, "suspended");
    await page.locator("#do-resume").click();
    await statusBecomes(page, "running");
  });

  await t.test("timeline: activity bars with the worker's times, a cancel mark", async () => {
    await open(page, "hello-1");
    const greet = page.locator("#timeline .tl-row", { hasText: "activity Greet" });
    await greet.waitFor();
    assert.match(await greet.locator(".tl-label").textContent(), /completed/);
    assert.equal(await greet.locator(".tl-ran").count(), 1, "worker's started/finished");
    await open(page, "slow-1");
    const mark = page.locator("#timeline .tl-mark");
    await mark.first().waitFor();
    const text = await mark.first().textContent();
    assert.match(text, /cancel requested by user:alice/);
    assert.match(text, /bad deploy/);
    await page.locator("#timeline .tl-row", { hasText: "activity Block" }).waitFor();
    assert.ok(await page.locator("#timeline .tl-line").count() >= 1);
    assert.ok(await page.locator("#timeline .tl-row").count() <= 200);
    await screenshot(page, "instance-timeline");
  });

  await t.test("cancel with a reason shows the reason and the requester", async () => {
    await open(page, "w-1");
    await page.locator("#cancel-reason").fill("browser test: bad deploy");
    await page.locator("#do-cancel").click();
    await page.locator("#status").filter({ hasText: /^cancel: / }).waitFor();
    await field(page, "Cancel reason").filter({ hasText: "browser test: bad deploy" }).waitFor();
    assert.match(await field(page, "Cancel requested by").textContent(), /^ui:/);
    await statusBecomes(page, "cancelled");
    // a finished instance offers no action
    for (const id of ["#do-cancel", "#do-terminate", "#do-suspend", "#do-raise"]) {
      await page.locator(id).waitFor({ state: "hidden" });
    }
    await page.locator("#events td", { hasText: "browser test: bad deploy" }).first().waitFor();
    await screenshot(page, "instance-cancelled");
  });

  await t.test("terminate after the dialog", async () => {
    await open(page, "w-2");
    await page.locator("#do-terminate").click();
    const dialog = page.getByRole("dialog");
    await dialog.waitFor();
    assert.equal(await page.locator("#terminate-id").textContent(), "w-2");
    await page.locator("#terminate-reason").fill("stuck in test");
    await page.locator("#confirm-terminate").click();
    await page.locator("#status").filter({ hasText: /^terminate: / }).waitFor();
    await statusBecomes(page, "terminated");
    assert.equal(await page.locator("#do-terminate").isHidden(), true);
  });

  await t.test("suspend and resume", async () => {
    await open(page, "w-3");
    await page.locator("#do-suspend").click();
    await statusBecomes(page, "suspended");
    await page.locator("#do-resume").click();
    await statusBecomes(page, "running");
  });

  await t.test("raise event: the payload must be JSON", async () => {
    await open(page, "w-4");
    await page.locator("#event-name").fill("go");
    await page.locator("#event-payload").fill("{not json");
    await page.locator("#do-raise").click();
    await page.locator("#status").filter({ hasText: "not JSON" }).waitFor();
    assert.equal(await page.locator("#event-payload").getAttribute("aria-invalid"), "true");
    const pad = "x".repeat(300) + "<b>end</b>";
    await page.locator("#event-payload").fill(JSON.stringify({ answer: 42, pad }));
    await page.locator("#do-raise").click();
    await page.locator("#status").filter({ hasText: "raise-event: raised" }).waitFor();
    await statusBecomes(page, "completed");
    // the payload is shortened in the table, whole on request (as text)
    const whole = page.locator("#events button", { hasText: "whole" }).first();
    await whole.waitFor();
    await whole.click();
    await page.locator("#payload-full").filter({ hasText: "<b>end</b>" }).waitFor();
    assert.equal(await page.locator("b").count(), 0);
    await screenshot(page, "instance");
  });

  await t.test("accessible names: buttons and the status region", async () => {
    await open(page, "wait-3"); // running: every action is offered
    await page.locator("#do-raise").waitFor();
    const snap = await page.locator("body").ariaSnapshot();
    assert.match(snap, /status/);
    assert.match(snap, /button "Raise event"/);
  });

  assert.deepEqual(problems, []);
});

test("timeline of 5000 activities keeps few rows in the DOM", async (t) => {
  const ui = await startUi(t);
  const { page, problems } = await openPage(t);
  await page.goto(ui.url);
  await page.locator("#rows tr[data-ref]").first().waitFor();
  await open(page, "fan-1");
  await page.locator("#timeline .tl-note", { hasText: "5000 rows" }).waitFor();
  const drawn = await page.locator("#timeline .tl-row").count();
  assert.ok(drawn > 0 && drawn <= 200, "rows in the DOM: " + drawn);
  const firstId = await page.locator("#timeline .tl-row").first().getAttribute("data-span");
  await page.locator("#timeline-rows").evaluate((e) => { e.scrollTop = e.scrollHeight / 2; });
  await page.waitForFunction((f) => {
    const r = document.querySelector("#timeline .tl-row");
    return r && r.getAttribute("data-span") !== f;
  }, firstId);
  assert.ok(await page.locator("#timeline .tl-row").count() <= 200);
  await screenshot(page, "instance-timeline-5000");
  assert.deepEqual(problems, []);
});
