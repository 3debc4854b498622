// The schedules pages, over the seeded store without a runtime (a trigger
// needs none: the fire creates its instance, which stays pending): a
// schedule created from the form (a bad cron refused with the library's
// message, under the form, before anything is stored; the confirmation
// lists the next fire times on the zone's clock), listed, paused with a
// note, edited (the form prefilled), triggered, its fire followed to its
// instance's page, deleted (its instance stays). A read-only session sees
// no action.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { api, openPage, ref, screenshot, startUi } from "./lib.mjs";

const field = (page, name) => page.locator(`#schedule-card dd[data-field="${name}"]`);
const ID = "nightly-report";

test("schedules", async (t) => {
  const ui = await startUi(t);
  const { page, problems } = await openPage(t);
  await page.goto(ui.url);
  await page.locator("#rows tr[data-ref]").first().waitFor();

  await t.test("reachable from the views' links, empty at first", async () => {
    await page.locator("#nav-schedules").click();
    assert.match(page.url(), /#\/schedules$/);
    await page.locator("#schedule-rows td", { hasText: "No schedules." }).waitFor();
  });

  await t.test("the form: a bad cron is refused with the library's message", async () => {
    await page.locator("#new-schedule").click();
    await page.locator("#sf-id").fill(ID);
    await page.locator("#sf-cron").fill("61 2 * * *");
    await page.locator("#sf-orchestration").fill("Waiter");
    await page.locator("#sf-submit").click();
    const error = page.locator("#sf-error");
    await error.filter({ hasText: "61 is out of range" }).waitFor();
    assert.match(await error.textContent(), /cron expression '61 2 \* \* \*': field 1/);
    assert.equal(await page.locator("dialog").count(), 0, "no confirmation for a refused spec");
    // the refusal's 400 is this test's doing
    problems.splice(0, Infinity, ...problems.filter((x) => !/Failed to load resource/.test(x)));
    const listed = await api(page, "schedules");
    assert.equal(listed.schedules.length, 0, "a refused spec stored nothing");
    await screenshot(page, "schedule-form-refused");
  });

  await t.test("created from the form after its confirmation", async () => {
    await page.locator("#sf-cron").fill("30 2 * * *");
    await page.locator("#sf-zone").fill("Europe/Berlin");
    await page.locator("#sf-input").fill('{"scope":"all"}');
    await page.locator("#sf-overlap").selectOption("allow-all");
    await page.locator("#sf-timeout").fill("2h");
    await page.locator("#sf-submit").click();
    const dialog = page.locator("#schedule-create-dialog");
    await dialog.waitFor();
    // the next fire times read 02:30 on Berlin's clock
    const times = await page.locator("#schedule-create-ids li").allTextContents();
    assert.ok(times.length >= 1 && times.every((x) => / 02:30 \+0[12]:00/.test(x)),
      "fire times: " + JSON.stringify(times));
    assert.equal(await page.evaluate(() => document.activeElement.id), "schedule-create-keep");
    await screenshot(page, "schedule-create-confirm");
    await page.locator("#confirm-schedule-create").click();
    await page.locator("#status", { hasText: "Created schedule " + ID }).waitFor();
    const row = page.locator(`#schedule-rows tr[data-ref="${ref(ID)}"]`);
    await row.waitFor();
    assert.match(await row.textContent(), /30 2 \* \* \* \(Europe\/Berlin\)/);
    assert.match(await row.textContent(), /active/);
    const s = await api(page, "schedule?ref=" + ref(ID));
    assert.equal(s.spec.overlap, "allow-all");
    assert.equal(s.spec.timeout_ms, 7200000);
    assert.equal(s.input_text, '{"scope":"all"}');
    await screenshot(page, "schedules-list");
  });

  await t.test("paused with a note", async () => {
    await page.locator(`#schedule-rows tr[data-ref="${ref(ID)}"] td.id a`).click();
    await page.locator("h2.id", { hasText: ID }).waitFor();
    await field(page, "State").filter({ hasText: "active" }).waitFor();
    assert.equal(await page.locator("#next-fires li").count(), 5);
    await page.locator("#do-pause").click();
    await page.locator("#schedule-pause-dialog").waitFor();
    await page.getByLabel("Note").fill("data migration");
    await page.locator("#confirm-schedule-pause").click();
    await field(page, "State").filter({ hasText: "paused: data migration" }).waitFor();
    assert.match(await page.locator("#status").textContent(),
      /paused; instances it already started are not touched/);
    await page.locator("#do-resume").waitFor();
    assert.equal(await page.locator("#do-pause").count(), 0);
    await page.locator("#next-fires li", { hasText: "none while it is paused" }).waitFor();
  });

  await t.test("edited: the form comes prefilled, the spec is replaced", async () => {
    await page.locator("#do-edit").click();
    assert.equal(await page.locator("#sf-cron").inputValue(), "30 2 * * *");
    assert.equal(await page.locator("#sf-zone").inputValue(), "Europe/Berlin");
    assert.equal(await page.locator("#sf-input").inputValue(), '{"scope":"all"}');
    assert.equal(await page.locator("#sf-overlap").inputValue(), "allow-all");
    assert.equal(await page.locator("#sf-paused").isChecked(), true);
    assert.equal(await page.locator("#sf-note").inputValue(), "data migration");
    assert.equal(await page.locator("#sf-timeout").inputValue(), "2h");
    await page.locator("#sf-cron").fill("45 3 * * *");
    await page.locator("#sf-submit").click();
    await page.locator("#schedule-update-dialog").waitFor();
    await page.locator("#confirm-schedule-update").click();
    await field(page, "Rule").filter({ hasText: "45 3 * * * (Europe/Berlin)" }).waitFor();
    assert.match(await field(page, "State").textContent(), /^paused: data migration$/);
    assert.equal(await page.locator("#schedule-form").count(), 0);
  });

  let fireId = null;
  await t.test("triggered, and its fire followed to its instance", async () => {
    await page.locator("#do-trigger").click();
    await page.locator("#schedule-trigger-dialog").waitFor();
    await page.locator("#confirm-schedule-trigger").click();
    const link = page.locator("#fire-rows td.id a").first();
    await link.waitFor();
    fireId = await link.textContent();
    assert.match(fireId, new RegExp("^" + ID + "@trigger-\\d{4}-"));
    assert.match(await page.locator("#status").textContent(), /triggered: started /);
    assert.match(await page.locator("#fire-rows tr").first().textContent(), /started/);
    await screenshot(page, "schedule-describe");
    const asked = Date.now();
    await link.click();
    await page.locator("h2.id", { hasText: fireId }).waitFor();
    await page.locator('#card dd[data-field="Status"]', { hasText: "pending" }).waitFor();
    // the schedule's timeout: the instance's deadline, 2 h after its start
    const info = await api(page, "instance?ref=" + ref(fireId));
    assert.ok(info.deadline_ms > asked + 7200000 - 60000 && info.deadline_ms <= Date.now() + 7200000,
      String(info.deadline_ms));
  });

  await t.test("deleted; its instance stays", async () => {
    await page.evaluate((r) => { location.hash = "#/schedule?ref=" + r; }, ref(ID));
    await page.locator("#do-delete").click();
    await page.locator("#schedule-delete-dialog").waitFor();
    assert.match(await page.locator("#schedule-delete-dialog").textContent(),
      /instances it started are not touched/);
    await page.locator("#confirm-schedule-delete").click();
    await page.waitForFunction(() => location.hash === "#/schedules");
    await page.locator("#schedule-rows td", { hasText: "No schedules." }).waitFor();
    const inst = await api(page, "instance?ref=" + ref(fireId));
    assert.equal(inst.id, fireId);
  });

  assert.deepEqual(problems, []);
});

test("schedules, read-only", async (t) => {
  const ui = await startUi(t, { readOnly: true });
  const made = spawnSync(process.env.DURO_BIN, ["--db", ui.db, "schedule", "create", "hourly",
    "--orchestration", "Waiter", "--every", "1h"], { encoding: "utf8" });
  assert.equal(made.status, 0, made.stderr);
  const { page, problems } = await openPage(t);
  await page.goto(ui.url + "");
  await page.locator("#rows tr[data-ref]").first().waitFor();
  await page.evaluate(() => { location.hash = "#/schedules"; });
  await page.locator(`#schedule-rows tr[data-ref="${ref("hourly")}"]`).waitFor();
  assert.equal(await page.locator("#new-schedule").count(), 0);
  await page.locator(`#schedule-rows tr[data-ref="${ref("hourly")}"] td.id a`).click();
  await field(page, "Rule").filter({ hasText: "every 1h" }).waitFor();
  assert.equal(await page.locator("#schedule-actions").count(), 0);
  assert.equal(await page.locator("#do-pause, #do-delete, #do-trigger, #do-edit").count(), 0);
  assert.deepEqual(problems, []);
});
