// The console's views over the seeded store (cli_fixture populate, control,
// hostile, views), no runtime: a pending instance that never ran is
// pending, not an error; "← Instances" returns to the list's filter and
// page; input, output and custom status are previews with their sizes and
// whole on demand; every store string hides no bidi or invisible
// character; the skip link, relative ages, human offsets, the parent
// link; "need attention" and the last problem of each row; and, at
// 375 px, the list, the instance page and the dialogs without horizontal
// scrolling.
import { test } from "node:test";
import assert from "node:assert/strict";
import { api, openPage, ref, screenshot, startUi } from "./lib.mjs";

const field = (page, name) => page.locator(`#card dd[data-field="${name}"]`);

async function open(page, id, from) {
  await page.evaluate(([r, f]) => {
    location.hash = "#/instance?ref=" + r + (f ? "&from=" + encodeURIComponent(f) : "");
  }, [ref(id), from || ""]);
  await page.locator("h2.id").filter({ hasText: id }).waitFor();
  await field(page, "Status").waitFor();
}

// The instance card is refreshed every 2 s: waits for @p n more refreshes.
async function refreshes(page, n) {
  let seen = 0;
  const count = (r) => { if (new URL(r.url()).pathname === "/api/v1/instance") seen++; };
  page.on("requestfinished", count);
  const deadline = Date.now() + 15000;
  while (seen < n) {
    if (Date.now() > deadline) throw new Error("timed out waiting for " + n + " refreshes");
    await page.waitForTimeout(50);
  }
  page.off("requestfinished", count);
  await page.waitForTimeout(100); // let the last answer render
}

const rowIds = (page) => page.locator("#rows td.id").allTextContents();

// Neither the page nor any text of it holds a bidi control or an invisible
// character: each is a visible escape.
async function noHiddenCharacters(page, where) {
  const text = await page.evaluate(() => document.body.innerText);
  const m = /[\u202A-\u202E\u2066-\u2069\u200B-\u200F\u061C]/.exec(text);
  assert.equal(m, null, where + ": a hidden character " +
    (m ? "U+" + m[0].codePointAt(0).toString(16) + " near " +
      JSON.stringify(text.slice(Math.max(0, m.index - 40), m.index + 40)) : ""));
  const attrs = await page.evaluate(() => [...document.querySelectorAll("[title],[aria-label]")]
    .map((e) => (e.getAttribute("title") || "") + (e.getAttribute("aria-label") || ""))
    .join("\n"));
  assert.doesNotMatch(attrs, /[\u202A-\u202E\u2066-\u2069\u200B-\u200F]/, where + ": attributes");
}

test("views", async (t) => {
  const ui = await startUi(t);
  const { page, problems } = await openPage(t);
  await page.goto(ui.url);
  await page.locator("#rows tr[data-ref]").first().waitFor();

  await t.test("a pending instance that never ran is pending, not an error", async () => {
    for (const id of ["later-1", "pend-1"]) {
      await open(page, id);
      assert.equal(await field(page, "Status").textContent(), "pending");
      await field(page, "Waiting for").filter({ hasText: /^a runtime to take its first turn/ })
        .waitFor();
      assert.equal(await field(page, "Execution").textContent(), "none yet");
      await refreshes(page, 2);
      assert.equal(await page.locator("#status").textContent(), "", id + ": status line");
      assert.doesNotMatch(await page.locator("body").innerText(), /no execution|not_found/);
      assert.equal(await page.locator("#timeline").isHidden(), true);
      await page.locator("#events td", { hasText: "first turn has not run" }).waitFor();
    }
    // one the runtime could not start: its problem, and what it waits for
    await open(page, "stuck-1");
    await field(page, "Last problem").filter({ hasText: "'Missing' is not registered" })
      .waitFor();
    assert.match(await field(page, "Waiting for").textContent(),
      /first turn, which cannot yet: see its last problem/);
    await screenshot(page, "instance-pending-stuck");
  });

  await t.test("← Instances returns to the list's filter and page", async () => {
    await page.evaluate(() => { location.hash = "#/?status=completed&limit=2"; });
    await page.waitForFunction(() => document.querySelectorAll("#rows tr[data-ref]").length === 2);
    const first = await rowIds(page);
    await page.locator("#next").click();
    await page.waitForFunction((f) => {
      const ids = [...document.querySelectorAll("#rows td.id")].map((e) => e.textContent);
      return ids.length > 0 && !ids.includes(f[0]);
    }, first);
    const second = await rowIds(page);
    const listHash = await page.evaluate(() => location.hash);
    assert.match(listHash, /cursor=/);
    await page.locator("#rows td.id a").first().click();
    await page.waitForURL(/#\/instance\?ref=/);
    await page.locator("h2.id").filter({ hasText: second[0] }).waitFor();
    await page.locator("#back").click();
    await page.waitForFunction((s) =>
      document.querySelector("#rows td.id")?.textContent === s[0], second);
    assert.deepEqual(await rowIds(page), second);
    const back = new URLSearchParams((await page.evaluate(() => location.hash)).split("?")[1]);
    assert.equal(back.get("status"), "completed");
    assert.equal(back.get("limit"), "2");
    assert.equal(back.get("cursor"), new URLSearchParams(listHash.split("?")[1]).get("cursor"));
    assert.equal(await page.locator("#f-st-completed").isChecked(), true);
    assert.equal(await page.locator("#prev").isDisabled(), false);
    // through a parent link and a reload, the way back is kept
    await page.evaluate(() => { location.hash = "#/?id_prefix=kid-"; });
    await page.locator("#rows td.id a", { hasText: "kid-2" }).click();
    await page.locator("h2.id").filter({ hasText: "kid-2" }).waitFor();
    await page.locator("#parent-link").click();
    await page.locator("h2.id").filter({ hasText: "parent-1" }).waitFor();
    await page.reload();
    await page.locator("h2.id").filter({ hasText: "parent-1" }).waitFor();
    await page.locator("#back").click();
    await page.waitForFunction(() => {
      const ids = [...document.querySelectorAll("#rows td.id")].map((e) => e.textContent);
      return ids.length === 2 && ids[0] === "kid-1";
    });
    assert.equal(await page.locator("#f-prefix").inputValue(), "kid-");
  });

  await t.test("input, output and custom status: previews with sizes, whole on demand",
    async () => {
      await open(page, "echo-big-1");
      for (const f of ["input", "output", "custom_status"]) {
        const size = page.locator("#size-" + f);
        await size.waitFor();
        assert.match(await size.textContent(),
          /^6,000 bytes \(5\.9 KiB\), the first 4,09\d bytes shown$/, f);
        const pre = page.locator("#value-" + f);
        const preview = await pre.textContent();
        // the stored text's first bytes (cut, it is not JSON any more)
        assert.ok(preview.startsWith('"line 0001 of a long value\\nline 0002'), f + ": " +
          preview.slice(0, 60));
        assert.ok(preview.length < 4100 && !preview.includes("zzz"), f + " " + preview.length);
        await page.locator("#download-" + f).waitFor();
      }
      // Download saves the whole value (read with the session, as every
      // API request)
      const [download] = await Promise.all([page.waitForEvent("download"),
        page.locator("#download-output").click()]);
      assert.equal(download.suggestedFilename(), "echo-big-1-output.txt");
      const saved = await (async () => {
        const chunks = [];
        for await (const c of await download.createReadStream()) chunks.push(c);
        return Buffer.concat(chunks).toString("utf8");
      })();
      assert.equal(saved.length, 6000);
      assert.ok(saved.endsWith('zzz"'));
      await page.locator("#show-all-output").click();
      await page.locator("#size-output").filter({ hasText: "all shown" }).waitFor();
      const whole = await page.locator("#value-output").textContent();
      assert.ok(whole.endsWith('zzz"'), whole.slice(-20));
      assert.equal(new TextEncoder().encode(whole).length, 6000);
      // it stays whole across refreshes; the others are still previews
      await refreshes(page, 2);
      assert.ok((await page.locator("#value-output").textContent()).endsWith('zzz"'));
      assert.equal(await page.locator("#show-all-custom_status").count(), 1);
      await screenshot(page, "instance-values");
      // a small one: its size, no "Show all"
      await open(page, "hello-1");
      await page.locator("#size-output").filter({ hasText: /^\d+ bytes$/ }).waitFor();
      assert.equal(await page.locator("#show-all-output").count(), 0);
      assert.match(await page.locator("#value-output").textContent(), /greeting/);
    });

  await t.test("bidi and invisible characters in store strings are escaped", async () => {
    await open(page, "spoof-cancel-1");
    await field(page, "Cancel requested by").filter({ hasText: "user:\\u202Eecila" }).waitFor();
    assert.equal(await field(page, "Cancel reason").textContent(), "re\\u202Enosae\\u200Bx");
    assert.equal(await field(page, "Cancel reason").locator("bdi[dir=ltr] .esc").count(), 2);
    await page.locator("#events td", { hasText: "by user:\\u202Eecila" }).first().waitFor();
    await page.locator("#timeline .tl-mark", { hasText: "by user:\\u202Eecila" }).waitFor();
    await noHiddenCharacters(page, "spoof-cancel-1");
    await open(page, "spoof-out-1");
    await page.locator("#value-output", { hasText: "out:\\u202Eevil\\u200B" }).waitFor();
    assert.equal(await page.locator("#value-custom_status").textContent(),
      "out:\\u202Eevil\\u200B");
    await page.locator("#value-input", { hasText: "out:\\u202Eevil" }).waitFor();
    await noHiddenCharacters(page, "spoof-out-1");
    await open(page, "spoof-name-1");
    assert.equal(await field(page, "Name").textContent(), "Sp\\u202Eoof");
    await page.locator("#timeline .tl-row").first().waitFor({ state: "attached" })
      .catch(() => {});
    await noHiddenCharacters(page, "spoof-name-1");
    await page.evaluate(() => { location.hash = "#/?id_prefix=spoof-"; });
    await page.waitForFunction(() => document.querySelectorAll("#rows tr[data-ref]").length === 3);
    const names = await page.locator('#rows td[data-label="Name"]').allTextContents();
    assert.ok(names.includes("Sp\\u202Eoof"), JSON.stringify(names));
    await noHiddenCharacters(page, "the list");
    await screenshot(page, "spoofed-strings");
  });

  await t.test("keyboard: a skip link to the table", async () => {
    await page.evaluate(() => { location.hash = "#/?limit=5"; });
    await page.locator("#rows tr[data-ref]").first().waitFor();
    await page.reload();
    await page.locator("#rows tr[data-ref]").first().waitFor();
    let presses = 0;
    while (presses < 3 && await page.evaluate(() => document.activeElement?.id) !==
      "skip-to-table") {
      await page.keyboard.press("Tab");
      presses++;
    }
    assert.equal(await page.evaluate(() => document.activeElement?.id), "skip-to-table",
      "the skip link within 3 Tabs");
    assert.equal(await page.locator("#skip-to-table").isVisible(), true);
    await page.keyboard.press("Enter");
    const first = (await rowIds(page))[0];
    assert.equal(await page.evaluate(() => document.activeElement?.textContent), first);
    assert.equal(await page.evaluate(() =>
      document.querySelector("#instances").contains(document.activeElement)), true);
    assert.match(page.url(), /limit=5/); // the skip link did not route
    await page.keyboard.press("Enter");
    await page.locator("h2.id").filter({ hasText: first }).waitFor();
  });

  await t.test("relative ages, human offsets, the parent a link", async () => {
    await page.evaluate(() => { location.hash = "#/"; });
    await page.locator("#rows tr[data-ref]").first().waitFor();
    const created = await page.locator('#rows td[data-label="Created"]').first().textContent();
    assert.match(created,
      /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}Z \((just now|\d+(\.\d)? (s|min|h|d)( \d+ (s|min|h))? ago)\)$/);
    const offsets = await page.evaluate(async () => {
      const f = await import("/static/fmt.js");
      return [f.offset(292050), f.offset(0), f.offset(850), f.offset(1500), f.offset(3600000),
        f.offset(90061000), f.age(Date.now() - 300000)];
    });
    assert.deepEqual(offsets, ["+4 min 52 s", "+0", "+850 ms", "+1.5 s", "+1 h", "+1 d 1 h",
      "5 min ago"]);
    await open(page, "retry-1");
    await page.locator("#events tr").nth(3).waitFor();
    const cells = await page.locator("#events tr td:nth-child(2)").allTextContents();
    for (const c of cells) assert.match(c, /^\+(0|\d{1,3} ms|\d+(\.\d)? s|\d+ (min|h|d)( \d+ (s|min|h))?)$/, c);
    assert.match(await field(page, "Created").textContent(), /Z \(.+\)$/);
    await open(page, "kid-1");
    const link = page.locator('#card dd[data-field="Parent"] a#parent-link');
    assert.equal(await link.textContent(), "parent-1");
    assert.match(await link.getAttribute("href"), new RegExp("ref=" + ref("parent-1")));
  });

  await t.test("need attention: failed, and live with a recorded problem", async () => {
    await page.evaluate(() => { location.hash = "#/"; });
    const button = page.locator("#attention");
    await button.waitFor();
    const n = Number(await button.locator(".n").textContent());
    const s = await api(page, "summary");
    const stuck = s.stuck.reduce((a, x) => a + x.count, 0);
    assert.ok(stuck >= 1, JSON.stringify(s.stuck));
    assert.equal(n, s.counts.failed + stuck);
    await button.click();
    await page.waitForURL(/attention=1/);
    await page.locator("#attention-note").waitFor();
    await page.locator("#attention[aria-pressed=true]").waitFor();
    await page.waitForFunction((want) =>
      document.querySelectorAll("#rows tr[data-ref]").length === want, Math.min(n, 50));
    const rows = await page.locator("#rows tr[data-ref]").evaluateAll((trs) => trs.map((tr) => ({
      id: tr.querySelector("td.id").textContent,
      status: tr.querySelector("td.status").textContent,
      problem: tr.querySelector("td.problem").textContent,
    })));
    const stuckRow = rows.find((r) => r.id === "stuck-1");
    assert.ok(stuckRow && /'Missing' is not registered/.test(stuckRow.problem),
      JSON.stringify(rows));
    const boom = rows.find((r) => r.id === "boom-1");
    assert.ok(boom && boom.status === "failed" && /flux capacitor/.test(boom.problem),
      JSON.stringify(rows));
    for (const r of rows) assert.ok(r.status === "failed" || r.problem !== "", JSON.stringify(r));
    assert.ok(!rows.some((r) => r.id === "hello-1"), JSON.stringify(rows));
    await screenshot(page, "instances-attention");
    await button.click();
    await page.waitForURL((u) => !u.hash.includes("attention"));
  });

  assert.deepEqual(problems, []);
});

// The box of @p locator's element once it has one: the page's refresh may
// replace an element between finding it and measuring it (boundingBox()
// is null for a detached element), so this asks again until a deadline.
async function boxOf(locator, what) {
  const deadline = Date.now() + 10000;
  for (;;) {
    const box = await locator.boundingBox();
    if (box) return box;
    assert.ok(Date.now() < deadline, what + " has no box (hidden?)");
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

// Whether @p sel is shown whole within the 375 px wide viewport.
async function inside(page, sel) {
  const e = page.locator(sel).first();
  await e.scrollIntoViewIfNeeded();
  const box = await boxOf(e, sel);
  assert.ok(box.x >= 0 && box.x + box.width <= 375 + 0.5,
    sel + " is outside the viewport: " + JSON.stringify(box));
}

// The page is no wider than the phone's 375 px (compared with 375, not
// with window.innerWidth, which a mobile browser widens to a wider page).
async function noPageScroll(page, where) {
  const w = await page.evaluate(() => ({
    doc: document.documentElement.scrollWidth,
    body: document.body.scrollWidth,
    inner: window.innerWidth,
  }));
  assert.ok(w.doc <= 375 && w.body <= 375 && w.inner <= 375,
    where + ": the page scrolls sideways " + JSON.stringify(w));
}

test("375 px: the list, the instance page and the dialogs", async (t) => {
  const ui = await startUi(t);
  const { page, problems } = await openPage(t);
  await page.setViewportSize({ width: 375, height: 740 });
  await page.goto(ui.url);
  await page.locator("#rows tr[data-ref]").first().waitFor();

  await t.test("the list", async () => {
    await page.waitForFunction(() => document.querySelectorAll("#rows tr[data-ref]").length >= 20);
    await noPageScroll(page, "the list");
    for (const sel of ["#attention", 'button[data-status="running"]', "#f-status", "#f-name",
      "#f-name-mode", "#f-order", "#f-limit", "#matches",
      "form.filters button[type=submit]", "#cancel-matching", "#rows td.id a",
      '#rows td[data-label="Status"]', "#rows input[type=checkbox]", "#next"]) {
      await inside(page, sel);
    }
    await screenshot(page, "narrow-list");
    // the selection bar
    await page.locator("#rows input[type=checkbox]").first().check();
    await page.locator("#bulk").waitFor();
    await noPageScroll(page, "the selection bar");
    await inside(page, "#bulk-cancel");
    await inside(page, "#bulk-clear");
    await page.locator("#bulk-clear").click();
  });

  await t.test("recent actions", async () => {
    await page.evaluate(() => { location.hash = "#/actions"; });
    await page.locator("#action-rows tr[data-ref]").first().waitFor();
    await noPageScroll(page, "recent actions");
    for (const sel of ["#nav-instances", "#a-action", "#a-by", "#action-rows td.id a",
      "#action-rows td.reason", "#actions-next"]) {
      await inside(page, sel);
    }
    await screenshot(page, "narrow-actions");
  });

  await t.test("the bulk dialog", async () => {
    await page.evaluate(() => { location.hash = "#/?status=running"; });
    await page.locator("#rows tr[data-ref]").first().waitFor();
    await page.locator("#cancel-matching").click();
    await page.locator("#bulk-matched").filter({ hasText: /would be cancelled/ }).waitFor();
    await noPageScroll(page, "the bulk dialog");
    for (const sel of ["#bulk-dialog", "#bulk-query-reason", "#bulk-close", "#bulk-apply"]) {
      await inside(page, sel);
    }
    await screenshot(page, "narrow-bulk-dialog");
    await page.locator("#bulk-close").click();
  });

  await t.test("the instance page, its timeline and a confirmation", async () => {
    for (const id of ["wait-1", "fan-1", "hello-1"]) {
      await page.evaluate((r) => { location.hash = "#/instance?ref=" + r; }, ref(id));
      await page.locator("h2.id").filter({ hasText: id }).waitFor();
      await page.locator("#timeline .tl-row").first().waitFor();
      await noPageScroll(page, id);
      await inside(page, "#back");
      await inside(page, '#card dd[data-field="Status"]');
      await inside(page, "#timeline-rows");
      await inside(page, 'section[aria-label="Events"] .scroll-x');
      const label = await boxOf(page.locator("#timeline .tl-label").first(),
        "the timeline's first label");
      assert.ok(label.width <= 120, "timeline label column " + label.width + " px");
    }
    await screenshot(page, "narrow-instance");
    await page.evaluate((r) => { location.hash = "#/instance?ref=" + r; }, ref("echo-big-1"));
    await inside(page, "#show-all-output");
    await inside(page, "#value-output");
    await noPageScroll(page, "echo-big-1");
    await page.evaluate((r) => { location.hash = "#/instance?ref=" + r; }, ref("wait-1"));
    await page.locator("#do-terminate").waitFor();
    for (const sel of ["#cancel-reason", "#do-cancel", "#do-terminate", "#do-suspend",
      "#event-name", "#do-raise"]) {
      await inside(page, sel);
    }
    await page.locator("#do-terminate").click();
    await page.locator("#terminate-dialog").waitFor();
    await noPageScroll(page, "the terminate dialog");
    for (const sel of ["#terminate-dialog", "#terminate-reason", "#terminate-keep",
      "#confirm-terminate"]) {
      await inside(page, sel);
    }
    await screenshot(page, "narrow-confirm");
    await page.locator("#terminate-keep").click();
    await page.locator("#terminate-dialog").waitFor({ state: "detached" });
  });

  assert.deepEqual(problems, []);
});
