// The instance page, with a runtime running beside duro ui: a cancel with
// a reason shows the reason and the requester (ui:...) in the status
// card; terminate (after its dialog) and suspend/resume change the
// status; raise-event checks its payload is JSON before sending; the
// timeline draws activities, a cancel request and a patch marker, and
// reads only the new events when the history grows. Then, over the seeded store alone, the
// timeline of fan-1 (10,002 events) stays windowed and is read once, in
// pages; retry-1 is one row of three attempts; the axis has ticks and
// zoom in / Fit change and restore the scale. And a rewind and a reset
// to an event from the page, a refused point said before anything
// changes.
import { test } from "node:test";
import assert from "node:assert/strict";
import { HOSTILE_SHOWN, api, apiText, openPage, ref, screenshot, startInstance, startUi,
  waitFor } from "./lib.mjs";

const field = (page, name) => page.locator(`#card dd[data-field="${name}"]`);

async function open(page, id) {
  await page.evaluate((r) => { location.hash = "#/instance?ref=" + r; }, ref(id));
  await page.locator("h2.id").filter({ hasText: id.split("\n")[0] }).waitFor();
  await field(page, "Status").waitFor();
}

// Waits until cond() holds, polling; fails after ms with @p what.
async function until(cond, what, ms = 20000) {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error("timed out waiting for " + what);
    await new Promise((r) => setTimeout(r, 50));
  }
}

// Records the timeline's history reads (limit=1000; the events table
// reads 100) as {ref, after}.
function timelineReads(page) {
  const reads = [];
  page.on("request", (r) => {
    const u = new URL(r.url());
    if (u.pathname === "/api/v1/history" && u.searchParams.get("limit") === "1000") {
      reads.push({ ref: u.searchParams.get("ref"), after: Number(u.searchParams.get("after")) });
    }
  });
  return reads;
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
      document.querySelector("h2.id")?.textContent === id, HOSTILE_SHOWN);
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
    await page.locator("#confirm-suspend").click();
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

  await t.test("timeline and events: a patch marker shows its change id", async () => {
    startInstance(ui, "patched-1", "Patched");
    await waitFor("patched-1 completed", async () =>
      (await api(page, "instance?ref=" + ref("patched-1"))).status === "completed");
    await open(page, "patched-1");
    const mark = page.locator("#timeline .tl-mark", { hasText: "patch greet-twice" });
    await mark.waitFor();
    const row = page.locator("#events tr", { hasText: "PatchMarker" });
    await row.waitFor();
    assert.match(await row.textContent(), /greet-twice/);
    // two Greet calls: the new path
    assert.equal(await page.locator("#timeline .tl-row", { hasText: "activity Greet" }).count(), 2);
  });

  await t.test("cancel with a reason shows the reason and the requester", async () => {
    await open(page, "w-1");
    // what it waits on, from its history
    await page.locator('dd[data-field="Waiting on"]').filter({ hasText: /^event go for / })
      .waitFor();
    await page.locator("#cancel-reason").fill("browser test: bad deploy");
    await page.locator("#do-cancel").click();
    assert.match(await page.locator("#cancel-dialog").textContent(), /browser test: bad deploy/);
    await page.locator("#confirm-cancel").click();
    await page.locator("#status").filter({ hasText: /^cancel: / }).waitFor();
    await field(page, "Cancel reason").filter({ hasText: "browser test: bad deploy" }).waitFor();
    assert.match(await field(page, "Cancel requested by").textContent(), /^ui:/);
    await statusBecomes(page, "cancelled");
    // a finished instance offers no action
    for (const id of ["#do-cancel", "#do-terminate", "#do-suspend", "#do-raise"]) {
      await page.locator(id).waitFor({ state: "hidden" });
    }
    await page.locator("#events td", { hasText: "browser test: bad deploy" }).first().waitFor();
    // and on the timeline: the marked moment with requester and reason
    await page.locator("#timeline .tl-mark")
      .filter({ hasText: /^cancel requested by ui:\S+ — "browser test: bad deploy"/ }).waitFor();
    await screenshot(page, "instance-cancelled");
  });

  await t.test("terminate after the dialog", async () => {
    await open(page, "w-2");
    await page.locator("#do-terminate").click();
    const dialog = page.getByRole("dialog");
    await dialog.waitFor();
    assert.equal(await page.locator("#terminate-id").textContent(), "w-2");
    assert.equal(await page.evaluate(() => document.activeElement?.id), "terminate-keep");
    await page.locator("#terminate-reason").fill("stuck in test");
    await page.locator("#confirm-terminate").click();
    await page.locator("#status").filter({ hasText: /^terminate: / }).waitFor();
    await statusBecomes(page, "terminated");
    assert.equal(await page.locator("#do-terminate").isHidden(), true);
    await page.locator('dd[data-field="Terminated by"]')
      .filter({ hasText: /^ui:.* — stuck in test$/ }).waitFor();
    await page.locator('dd[data-field="Waiting on"]').waitFor({ state: "hidden" });
  });

  await t.test("suspend and resume", async () => {
    await open(page, "w-3");
    await page.locator("#do-suspend").click();
    await page.locator("#confirm-suspend").click();
    await statusBecomes(page, "suspended");
    await page.locator("#do-resume").click();
    await statusBecomes(page, "running");
  });

  await t.test("raise event: the payload must be JSON", async () => {
    await open(page, "w-4");
    // the timeline has read w-4's history; what it reads next is only new
    await page.locator("#timeline .tl-row", { hasText: "event go — open" }).waitFor();
    const reads = timelineReads(page);
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
    await page.locator("#timeline .tl-row", { hasText: "event go — raised" }).waitFor();
    const mine = reads.filter((r) => r.ref === ref("w-4"));
    assert.ok(mine.length > 0 && mine.every((r) => r.after >= 2), JSON.stringify(mine));
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

  await t.test("Enter never confirms terminate, cancel or suspend", async () => {
    await open(page, "wait-1");
    await page.locator("#do-raise").waitFor();
    const acts = [];
    const rec = (r) => {
      const p = new URL(r.url()).pathname;
      if (/^\/api\/v1\/(cancel|terminate|suspend)$/.test(p)) acts.push(p);
    };
    page.on("request", rec);
    // the trial: focus Terminate…, Enter, Enter
    await page.locator("#do-terminate").focus();
    await page.keyboard.press("Enter");
    await page.locator("#terminate-dialog").waitFor();
    assert.equal(await page.evaluate(() => document.activeElement?.id), "terminate-keep");
    await page.keyboard.press("Enter");
    await page.locator("#terminate-dialog").waitFor({ state: "detached" });
    // Enter in the reason box submits nothing
    await page.locator("#do-terminate").click();
    await page.locator("#terminate-reason").fill("oops");
    await page.locator("#terminate-reason").press("Enter");
    assert.equal(await page.locator("#terminate-dialog").isVisible(), true);
    await page.keyboard.press("Escape");
    await page.locator("#terminate-dialog").waitFor({ state: "detached" });
    // cancel: Enter in the page's reason box opens the question, Enter keeps
    await page.locator("#cancel-reason").fill("oops");
    await page.locator("#cancel-reason").press("Enter");
    await page.locator("#cancel-dialog").waitFor();
    assert.equal(await page.evaluate(() => document.activeElement?.id), "cancel-keep");
    await page.keyboard.press("Enter");
    await page.locator("#cancel-dialog").waitFor({ state: "detached" });
    await page.locator("#do-suspend").focus();
    await page.keyboard.press("Enter");
    await page.locator("#suspend-dialog").waitFor();
    await page.keyboard.press("Enter");
    await page.locator("#suspend-dialog").waitFor({ state: "detached" });
    // two card refreshes later, nothing was asked and wait-1 still runs
    let seen = 0;
    const card = (r) => { if (new URL(r.url()).pathname === "/api/v1/instance") seen++; };
    page.on("requestfinished", card);
    await until(() => seen >= 2, "two refreshes");
    page.off("requestfinished", card);
    page.off("request", rec);
    assert.deepEqual(acts, []);
    const i = await api(page, "instance?ref=" + ref("wait-1"));
    assert.equal(i.status, "running");
    assert.equal(i.cancel_requested_at, null);
    // Tab to the destructive button, then Enter: that is a confirmation
    await page.locator("#do-suspend").click();
    await page.locator("#suspend-keep").waitFor();
    await page.keyboard.press("Tab");
    assert.equal(await page.evaluate(() => document.activeElement?.id), "confirm-suspend");
    await page.keyboard.press("Enter");
    await statusBecomes(page, "suspended");
    await page.locator("#do-resume").click();
    await statusBecomes(page, "running");
  });

  await t.test("raise event: a JSON string is sent as typed, quotes and all", async () => {
    await open(page, "wait-3");
    await page.locator("#event-name").fill("go");
    await page.locator("#event-payload").fill('"hello"');
    await page.locator("#do-raise").click();
    await page.locator("#status").filter({ hasText: "raise-event: raised" }).waitFor();
    const ev = await waitFor("the raised event in wait-3's history", async () => {
      const h = await api(page, "history?ref=" + ref("wait-3"));
      return h.events.find((e) => e.name === "go" && /raise/i.test(e.kind));
    });
    const text = await apiText(page, "payload?" +
      new URLSearchParams({ ref: ref("wait-3"), event: String(ev.event_id) }).toString());
    assert.equal(text, '"hello"');
  });

  await t.test("ids: bidi and invisible characters are shown, isolated", async () => {
    const rtl = "\u202Eevil-rtl-override.exe";
    const zw = "zero\u200bwidth";
    startInstance(ui, rtl);
    startInstance(ui, zw);
    // once they ran a turn (before, they have no history to show)
    for (const id of [rtl, zw]) {
      await waitFor(id + " running", async () =>
        (await api(page, "instance?ref=" + ref(id))).status === "running");
    }
    await page.evaluate((r) => { location.hash = "#/instance?ref=" + r; }, ref(rtl));
    await page.locator("h2.id").filter({ hasText: "evil-rtl-override.exe" }).waitFor();
    assert.equal(await page.locator("h2.id").textContent(), "\\u202Eevil-rtl-override.exe");
    assert.equal(await page.locator("h2.id bdi[dir=ltr] .esc").textContent(), "\\u202E");
    await page.locator("#do-terminate").click();
    assert.equal(await page.locator("#terminate-id").textContent(),
      "\\u202Eevil-rtl-override.exe");
    await page.keyboard.press("Escape");
    await page.locator("#terminate-dialog").waitFor({ state: "detached" });
    await page.evaluate(() => { location.hash = "#/?id_prefix=zero"; });
    await page.locator("#rows td.id").filter({ hasText: "width" }).waitFor();
    assert.deepEqual(await page.locator("#rows td.id").allTextContents(), ["zero\\u200Bwidth"]);
    assert.equal(await page.locator("#rows td.id .esc").count(), 1);
    assert.equal(await page.getByLabel("Select zero\\u200Bwidth", { exact: true }).count(), 1);
    // nothing shown holds the characters themselves
    const body = await page.evaluate(() => document.body.innerText);
    assert.ok(!/[\u202E\u200B]/.test(body), JSON.stringify(body));
    await screenshot(page, "instance-spoofed-ids");
  });

  await t.test("a failing refresh marks the card stale; success clears it", async () => {
    await open(page, "hello-1");
    const before = problems.length;
    await page.route("**/api/v1/**", (r) => r.abort());
    await page.locator("#stale").filter({ hasText: /^Not updated since \d\d:\d\d:\d\d UTC/ })
      .waitFor();
    assert.match(await page.locator("#card").getAttribute("class"), /is-stale/);
    await page.unroute("**/api/v1/**");
    await page.locator("#stale").waitFor({ state: "hidden" });
    await page.waitForFunction(() => document.querySelector("#status").textContent === "");
    assert.doesNotMatch(await page.locator("#card").getAttribute("class"), /is-stale/);
    // the aborted requests' console errors are this test's doing
    problems.splice(before, Infinity, ...problems.slice(before)
      .filter((x) => !/Failed to load resource/.test(x)));
  });

  assert.deepEqual(problems, []);
});

test("timeline: 10,000 events, retries as attempts, axis and zoom", async (t) => {
  const ui = await startUi(t);
  const { page, problems } = await openPage(t);
  const reads = timelineReads(page);
  let refreshes = 0;
  page.on("request", (r) => {
    if (new URL(r.url()).pathname === "/api/v1/instance") refreshes++;
  });
  await page.goto(ui.url);
  await page.locator("#rows tr[data-ref]").first().waitFor();
  const dom = () => page.evaluate(() => ({
    rows: document.querySelectorAll("#timeline .tl-row").length,
    elements: document.getElementsByTagName("*").length,
  }));

  await t.test("the 10,000-event timeline is read in pages and stays windowed", async () => {
    await open(page, "fan-1");
    const count = Number(await field(page, "History events").textContent());
    assert.ok(count >= 10000, "history_count " + count);
    await page.locator("#timeline .tl-note",
      { hasText: `5000 rows from ${count} events` }).waitFor({ timeout: 30000 });
    // read once, 1000 at a time, each page after the last
    const mine = reads.filter((r) => r.ref === ref("fan-1")).map((r) => r.after);
    assert.deepEqual(mine, Array.from({ length: Math.ceil(count / 1000) }, (_, i) => i * 1000));
    let d = await dom();
    assert.ok(d.rows > 0 && d.rows < 200, "rows in the DOM at the top: " + d.rows);
    assert.ok(d.elements < 3000, "elements in the page at the top: " + d.elements);
    await screenshot(page, "instance-timeline-10000");
    // scrolled to the end: the last row is drawn, still few in the DOM
    await page.locator("#timeline-rows").evaluate((e) => { e.scrollTop = e.scrollHeight; });
    await page.locator('#timeline .tl-row[data-row="4999"]').waitFor();
    d = await dom();
    assert.ok(d.rows > 0 && d.rows < 200, "rows in the DOM at the end: " + d.rows);
    assert.ok(d.elements < 3000, "elements in the page at the end: " + d.elements);
    assert.equal(await page.locator("#timeline img, #timeline script").count(), 0);
    // still responsive: a zoom redraws the 5000 rows' window at once
    await page.locator('#timeline button[aria-label="Zoom in"]').click();
    await page.locator("#timeline-view").filter({ hasText: /^showing \+/ }).waitFor();
    await page.locator('#timeline .tl-row[data-row="4999"]').waitFor();
    await page.locator('#timeline button[aria-label="Fit the whole timeline"]').click();
    await page.locator("#timeline-view").filter({ hasText: "showing all" }).waitFor();
    // later refreshes, with no growth, read nothing more
    const before = reads.length;
    const seen = refreshes;
    await until(() => refreshes >= seen + 2, "two more refreshes");
    assert.equal(reads.length, before);
  });

  await t.test("retry-1: one row, an attempt per segment, the backoff between", async () => {
    await open(page, "retry-1");
    const row = page.locator("#timeline .tl-row", { hasText: "activity Flaky" });
    await row.waitFor();
    assert.equal(await row.count(), 1);
    assert.match(await row.locator(".tl-label").textContent(), /completed after 3 attempts/);
    const segs = await row.locator(".tl-seg").evaluateAll((els) => els.map((e) => {
      const box = e.getBoundingClientRect();
      return { attempt: e.dataset.attempt, cls: e.className, title: e.title,
        left: box.left, right: box.right };
    }));
    assert.deepEqual(segs.map((s) => s.attempt), ["1", "2", "3"]);
    assert.match(segs[0].cls, /tl-failed/);
    assert.match(segs[1].cls, /tl-failed/);
    assert.match(segs[2].cls, /tl-completed/);
    assert.match(segs[0].title, /^attempt 1: failed: flaky: attempt 1 failed/);
    assert.match(segs[1].title, /^attempt 2: failed: flaky: attempt 2 failed/);
    assert.match(segs[2].title, /^attempt 3: completed/);
    // the 40 ms backoffs: gaps between the segments, and timer rows
    assert.ok(segs[0].right < segs[1].left && segs[1].right < segs[2].left,
      JSON.stringify(segs));
    assert.equal(await row.locator(".tl-gap").count(), 2);
    assert.equal(await page.locator("#timeline .tl-row", { hasText: "timer 40 ms — fired" }).count(), 2);
    await screenshot(page, "instance-timeline-retry");
  });

  await t.test("retry-timeout-1: the timed-out attempt is cut with its reason", async () => {
    await open(page, "retry-timeout-1");
    const row = page.locator("#timeline .tl-row", { hasText: "activity Sleepy" });
    await row.waitFor();
    assert.equal(await row.count(), 1);
    const first = row.locator('.tl-seg[data-attempt="1"]');
    assert.match(await first.getAttribute("class"), /tl-cancelled/);
    assert.match(await first.getAttribute("title"), /^attempt 1: cancelled: select_loser/);
    assert.ok(await row.locator(".tl-x").count() >= 1);
    const titles = await row.locator(".tl-seg").evaluateAll((els) => els.map((e) => e.title));
    assert.ok(titles.length >= 2, titles.join(" | "));
    assert.match(titles[titles.length - 1], /: completed/);
  });

  await t.test("the axis has ticks; zoom in, then Fit, restore the scale", async () => {
    await open(page, "retry-1");
    const row = page.locator("#timeline .tl-row", { hasText: "activity Flaky" });
    await row.waitFor();
    const scale = () => page.evaluate(() => ({
      ticks: [...document.querySelectorAll("#timeline .tl-tick")].map((e) => e.textContent),
      left: document.querySelector('#timeline .tl-seg[data-attempt="2"]')?.style.left ?? null,
      view: document.querySelector("#timeline-view").textContent,
    }));
    const fit = await scale();
    assert.ok(fit.ticks.length >= 2, fit.ticks.join(" "));
    assert.equal(fit.ticks[0], "+0");
    assert.match(fit.ticks[1], /^\+\d+(\.\d+)? (ms|s|min|h)/);
    assert.equal(fit.view, "showing all");
    // by keyboard: the zoom buttons are buttons
    await page.getByRole("button", { name: "Zoom in" }).focus();
    await page.keyboard.press("Enter");
    await page.keyboard.press("Enter");
    await page.waitForFunction(() =>
      document.querySelector("#timeline-view").textContent.startsWith("showing +"));
    const zoomed = await scale();
    assert.notDeepEqual(zoomed.ticks, fit.ticks);
    assert.notEqual(zoomed.left, fit.left);
    await page.getByRole("button", { name: "Earlier" }).press("Enter");
    await page.getByRole("button", { name: "Fit the whole timeline" }).press("Enter");
    await page.waitForFunction(() =>
      document.querySelector("#timeline-view").textContent === "showing all");
    assert.deepEqual(await scale(), fit);
    assert.equal(await page.evaluate(() => document.activeElement.textContent), "Fit");
  });

  assert.deepEqual(problems, []);
});

// Rewind and reset from the page, over the seeded store alone (no runtime:
// the instance stays where the reset leaves it, running in its new
// execution): boom-1 (failed) rewound after the dialog, which says where
// it goes from the API's dry run; hello-1 (completed) reset to event 2,
// after event 1 (inside the first turn) was refused with the library's
// message and nothing changed; a read-only console offers neither.
test("rewind and reset to here", async (t) => {
  const ui = await startUi(t);
  const { page, problems } = await openPage(t);
  await page.goto(ui.url);
  await page.locator("#rows tr[data-ref]").first().waitFor();
  const execution = (want) => field(page, "Execution").filter({ hasText: new RegExp("^" + want + "$") })
    .waitFor();

  await t.test("rewind a failed instance", async () => {
    await open(page, "boom-1");
    await statusBecomes(page, "failed");
    const rewind = page.locator("#do-rewind");
    await rewind.waitFor();
    for (const id of ["#do-cancel", "#do-terminate", "#do-suspend", "#do-raise"]) {
      assert.equal(await page.locator(id).isHidden(), true, id);
    }
    // keyboard: the button takes the focus and Enter opens the dialog
    await rewind.focus();
    await page.keyboard.press("Enter");
    const dialog = page.locator("#rewind-dialog");
    await dialog.waitFor();
    assert.match(await dialog.textContent(),
      /keeps the events up to event 2 of execution 1 .*\(1 activity again\)/);
    assert.equal(await page.locator("#rewind-id").textContent(), "boom-1");
    assert.equal(await page.evaluate(() => document.activeElement?.id), "rewind-keep");
    await page.locator("#rewind-reason").fill("capacitor replaced");
    await page.locator("#confirm-rewind").click();
    await page.locator("#status")
      .filter({ hasText: /^rewound to event 2 of execution 1; execution 2 goes on from there \(1 activity again\)$/ })
      .waitFor();
    await statusBecomes(page, "running");
    await execution(2);
    assert.equal(await rewind.isHidden(), true);
    // the new execution's history: the kept events, then who reset it and why
    const reset = page.locator("#events tr", { hasText: "ExecutionReset" });
    await reset.waitFor();
    assert.match(await reset.textContent(), /reason: capacitor replaced; by ui:/);
    assert.equal(await page.locator("#events .reset-here").count(), 0, "a live instance");
    // and on the timeline, a marked moment
    await page.locator("#timeline .tl-mark")
      .filter({ hasText: /^reset by ui:\S+ — "capacitor replaced"/ }).waitFor();
    await screenshot(page, "instance-rewound");
  });

  await t.test("reset to here: a refusal first, then a reset", async () => {
    await open(page, "hello-1");
    await statusBecomes(page, "completed");
    assert.equal(await page.locator("#do-rewind").isHidden(), true, "not failed");
    const here = (n) => page.locator(`#events tr[data-event="${n}"] button.reset-here`);
    await here(1).waitFor();
    const before = problems.length;
    await here(1).click();
    await page.locator("#status.error")
      .filter({ hasText: /^Refused: reset: cannot reset instance 'hello-1' execution 1 to event 1: it is inside a turn .*event 2$/ })
      .waitFor();
    assert.equal(await page.locator("dialog").count(), 0, "no dialog for a refused point");
    await statusBecomes(page, "completed");
    await execution(1);
    // the refusal's 409 is this test's doing
    problems.splice(before, Infinity, ...problems.slice(before)
      .filter((x) => !/status of 409/.test(x)));

    await here(2).click();
    const dialog = page.locator("#reset-dialog");
    await dialog.waitFor();
    assert.match(await dialog.textContent(), /^Reset this instance to event 2\?/);
    assert.match(await dialog.textContent(), /Execution 2 keeps the events up to event 2 of execution 1/);
    // "Keep it" changes nothing
    await page.locator("#reset-keep").click();
    await dialog.waitFor({ state: "detached" });
    await execution(1);
    await here(2).click();
    await page.locator("#confirm-reset").click();
    await page.locator("#status")
      .filter({ hasText: /^reset to event 2 of execution 1; execution 2 goes on from there/ }).waitFor();
    await statusBecomes(page, "running");
    await execution(2);
    await page.locator("#events tr", { hasText: "ExecutionReset" })
      .filter({ hasText: "reset from duro ui" }).waitFor();
  });

  await t.test("a rewind past the instance's deadline takes a new one", async () => {
    // boom-1 as if its deadline had passed (1 s after the epoch)
    const ui2 = await startUi(t, {
      sql: "UPDATE instances SET deadline_ms = 1000 WHERE instance_id = 'boom-1'" });
    const { page: p2, problems: p2Problems } = await openPage(t);
    await p2.goto(ui2.url);
    await p2.locator("#rows tr[data-ref]").first().waitFor();
    await open(p2, "boom-1");
    await statusBecomes(p2, "failed");
    await p2.locator("#do-rewind").click();
    const dialog = p2.locator("#rewind-dialog");
    await dialog.waitFor();
    assert.match(await dialog.textContent(), /Deadline .*\(the instance's has passed\)/);
    const choice = p2.locator("#rewind-deadline");
    // keeping it is not offered: it would end the instance again at once
    assert.deepEqual(await choice.locator("option").allTextContents(),
      ["none", "1 hour from now", "1 day from now", "7 days from now"]);
    assert.equal(await choice.inputValue(), "-1");
    await choice.selectOption({ label: "1 day from now" });
    const asked = Date.now();
    await p2.locator("#confirm-rewind").click();
    await p2.locator("#status").filter({ hasText: /^rewound to event 2 of execution 1/ }).waitFor();
    await statusBecomes(p2, "running");
    const info = await api(p2, "instance?ref=" + ref("boom-1"));
    assert.ok(info.deadline_ms >= asked + 86400000 - 60000 &&
      info.deadline_ms <= Date.now() + 86400000, String(info.deadline_ms));
    await field(p2, "Deadline").filter({ hasText: /\(in (1 d|23 h)/ }).waitFor();
    assert.deepEqual(p2Problems, []);
  });

  await t.test("read-only: neither action is offered", async () => {
    const ro = await startUi(t, { readOnly: true });
    const { page: roPage, problems: roProblems } = await openPage(t);
    await roPage.goto(ro.url);
    await roPage.locator("#rows tr[data-ref]").first().waitFor();
    await open(roPage, "boom-1");
    await roPage.locator("#events tr[data-event]").first().waitFor();
    assert.equal(await roPage.locator("#do-rewind").isHidden(), true);
    assert.equal(await roPage.locator("#events .reset-here").count(), 0);
    assert.deepEqual(roProblems, []);
  });

  assert.deepEqual(problems, []);
});
