// schedules.js - the store's schedules: "#/schedules" (the list: each
// schedule's rule, state, next fire and last fire with its instance's
// status) and "#/schedule?ref=REF" (one schedule: its spec, its paused
// note, its next fire times in its own zone and in UTC, its recent fires
// linking to their instances), with the actions an operator may take -
// create and edit (one form, checked by the API's dry run, which shows
// the next fire times or the library's refusal, then confirmed), pause
// (with a note), resume, trigger now, delete - each confirmed
// (confirmAction: Enter never confirms), its answer or refusal said, the
// view reloaded. A read-only session sees no action. Schedule ids travel
// as refs, as instance ids do. Runs on the page's thread.
import { h, get, post, say, query, userText, userPlain, staleBanner,
  confirmAction } from "./dom.js";
import { when, age } from "./fmt.js";
import { listNav } from "./actions.js";

const OVERLAPS = ["skip", "buffer-one", "allow-all", "cancel-other", "terminate-other"];

// "1h30m", "90s", "250ms", "2d" -> milliseconds; "" -> null; NaN when it
// is none of those.
export function parseDuration(text) {
  const t = text.trim();
  if (t === "") return null;
  if (/^\d+$/.test(t)) return Number(t) * 1000; // plain seconds
  const unit = { ms: 1, s: 1000, m: 60000, h: 3600000, d: 86400000 };
  let total = 0;
  let rest = t;
  const part = /^(\d+)(ms|s|m|h|d)/;
  while (rest !== "") {
    const m = part.exec(rest);
    if (!m) return NaN;
    total += Number(m[1]) * unit[m[2]];
    rest = rest.slice(m[0].length);
  }
  return total;
}

// Milliseconds as the shortest duration text parseDuration() reads back.
export function durationText(ms) {
  if (!ms) return "";
  const units = [["d", 86400000], ["h", 3600000], ["m", 60000], ["s", 1000], ["ms", 1]];
  let rest = ms;
  let out = "";
  for (const [u, n] of units) {
    if (rest >= n) {
      out += Math.floor(rest / n) + u;
      rest %= n;
    }
  }
  return out;
}

// "30 2 * * * (Europe/Berlin)" or "every 1h".
function ruleText(spec) {
  if (spec.cron) return spec.cron + " (" + spec.time_zone + ")";
  return "every " + durationText(spec.interval_ms) +
    (spec.offset_ms ? " + " + durationText(spec.offset_ms) : "");
}

// A fire time: in the schedule's zone, then UTC.
function zoned(local, iso) {
  if (!iso) return "-";
  return h("span", { class: "when" }, local || "", local ? " · " : "",
    h("time", { datetime: iso }, iso.replace("T", " ").replace(/\.000Z$/, "Z")));
}

function instanceLink(id, ref, from) {
  return h("a", { href: "#/instance?" + query({ ref, from }) }, userText(id));
}

// ---- the list -------------------------------------------------------------

export function showSchedules(view, opts = {}) {
  const readOnly = !!opts.readOnly;
  const rows = h("tbody", { id: "schedule-rows" });
  const table = h("table", { id: "schedules" },
    h("caption", {}, "Schedules, by id"),
    h("thead", {}, h("tr", {}, ["Schedule", "Rule", "Orchestration", "State", "Next fire",
      "Last fire", "Fires"].map((c) => h("th", { scope: "col" }, c)))),
    rows);
  const stale = staleBanner(() => [table]);
  const formHere = h("div", { id: "schedule-form-here" });
  const create = readOnly ? null : h("button", { type: "button", id: "new-schedule",
    onclick: () => {
      create.hidden = true;
      formHere.replaceChildren(scheduleForm(null, (made) => {
        create.hidden = false;
        formHere.replaceChildren();
        create.focus();
        if (made) load();
      }));
    } }, "New schedule…");
  view.append(listNav("schedules"),
    h("p", { class: "note" }, "A schedule starts an instance of an orchestration at each of " +
      "its fire times, exactly once however many runtimes run (a runtime fires them; " +
      "without one, nothing fires but a trigger). Pausing or deleting one never touches " +
      "the instances it started."),
    create, formHere, stale.el, h("div", { class: "scroll-x" }, table));

  async function load() {
    try {
      const p = await get("schedules");
      const from = "/schedules";
      const now = Date.now();
      const made = p.schedules.map((s) => h("tr", { "data-ref": s.ref },
        h("td", { class: "id", "data-label": "Schedule" },
          h("a", { href: "#/schedule?" + query({ ref: s.ref }) }, userText(s.id))),
        h("td", { "data-label": "Rule" }, userText(ruleText(s.spec))),
        h("td", { "data-label": "Orchestration" }, userText(s.spec.orchestration)),
        h("td", { "data-label": "State", class: s.spec.paused ? "paused" : "active" },
          s.spec.paused ? "paused" : "active",
          s.spec.paused && s.spec.note ? [": ", userText(s.spec.note)] : null),
        h("td", { "data-label": "Next fire" }, s.next ? [zoned(s.next_local, s.next),
          h("span", { class: "age" }, " (" + age(s.next_ms, now) + ")")] : "-"),
        h("td", { "data-label": "Last fire" }, s.last_instance
          ? [instanceLink(s.last_instance, s.last_instance_ref, from), " ",
            h("span", { class: "status st-" + s.last_status }, s.last_status)]
          : "-"),
        h("td", { "data-label": "Fires" }, s.fires + " started, " + s.skips + " skipped")));
      if (made.length === 0) {
        made.push(h("tr", {}, h("td", { colspan: "7" }, "No schedules.")));
      }
      rows.replaceChildren(...made);
      stale.ok();
    } catch (e) {
      stale.fail(e);
    }
  }
  load();
  const timer = setInterval(() => {
    if (!document.hidden && !table.contains(document.activeElement) &&
      !formHere.contains(document.activeElement)) load();
  }, 5000);
  return () => clearInterval(timer);
}

// ---- the form ---------------------------------------------------------------

// The create form (@p current null) or the edit form of schedule
// @p current (a describe answer), prefilled. The API's dry run checks it
// first: its refusal is shown under the form, whole; its next fire times
// go into the confirmation. @p done(ref) after a change or a cancel.
function scheduleForm(current, done) {
  const spec = current ? current.spec : null;
  const field = (id, label, input, hint) => h("p", { class: "field" },
    h("label", { for: id }, label + " "), input, hint ? h("span", { class: "hint" }, " " + hint)
      : null);
  const input = (id, value, attrs) => h("input", Object.assign({ id, autocomplete: "off",
    spellcheck: "false", value: value || "" }, attrs || {}));
  const idBox = current ? null : input("sf-id", "", { required: true });
  const byCron = !spec || !!spec.cron;
  const kind = h("select", { id: "sf-kind" },
    h("option", { value: "cron", selected: byCron }, "a cron expression"),
    h("option", { value: "every", selected: !byCron }, "a fixed interval"));
  const cron = input("sf-cron", spec ? spec.cron : "", { placeholder: "30 2 * * *" });
  const zone = input("sf-zone", spec && spec.time_zone !== "UTC" ? spec.time_zone : "",
    { placeholder: "UTC" });
  const every = input("sf-every", spec ? durationText(spec.interval_ms) : "",
    { placeholder: "1h" });
  const offset = input("sf-offset", spec ? durationText(spec.offset_ms) : "",
    { placeholder: "0" });
  const orch = input("sf-orchestration", spec ? spec.orchestration : "", { required: true });
  const version = input("sf-version", spec ? spec.orchestration_version : "",
    { placeholder: "the default" });
  const inputText = h("textarea", { id: "sf-input", rows: "3", spellcheck: "false" },
    current && current.input_text !== null ? current.input_text : "");
  const overlap = h("select", { id: "sf-overlap" }, OVERLAPS.map((o) =>
    h("option", { value: o, selected: spec ? spec.overlap === o : o === "skip" }, o)));
  const catchup = input("sf-catchup", spec ? durationText(spec.catchup_window_ms) : "",
    { placeholder: "365d" });
  const jitter = input("sf-jitter", spec ? durationText(spec.jitter_ms) : "",
    { placeholder: "0" });
  const timeout = input("sf-timeout", spec && spec.timeout_ms ? durationText(spec.timeout_ms) : "",
    { placeholder: "none" });
  const start = input("sf-start", spec && spec.start ? spec.start : "",
    { placeholder: "2026-05-01T00:00:00Z" });
  const end = input("sf-end", spec && spec.end ? spec.end : "",
    { placeholder: "none" });
  const paused = h("input", { id: "sf-paused", type: "checkbox",
    checked: !!(spec && spec.paused) });
  const note = input("sf-note", spec && spec.note ? spec.note : "",
    { placeholder: "why it is paused" });
  const error = h("p", { id: "sf-error", class: "error", role: "alert", hidden: true });
  const byCronFields = h("div", {}, field("sf-cron", "Cron", cron,
    "minute hour day month weekday, or @daily"),
  field("sf-zone", "Time zone", zone, "tz database name, e.g. Europe/Berlin"));
  const byEveryFields = h("div", {}, field("sf-every", "Every", every, "e.g. 90s, 15m, 1h"),
    field("sf-offset", "Offset", offset, "shifts the fire times"));
  const showKind = () => {
    byCronFields.hidden = kind.value !== "cron";
    byEveryFields.hidden = kind.value === "cron";
  };
  kind.addEventListener("change", showKind);
  showKind();

  const refuse = (text) => {
    error.textContent = userPlain(text);
    error.hidden = false;
    say(text, true);
  };

  // The spec the form says, or a message for a duration that is not one.
  function specOf() {
    const s = { orchestration: orch.value, overlap: overlap.value, paused: paused.checked };
    const durations = [["catchup_window_ms", catchup, "Catch-up"], ["jitter_ms", jitter, "Jitter"],
      ["timeout_ms", timeout, "Timeout"]];
    if (kind.value === "cron") {
      s.cron = cron.value;
      if (zone.value.trim() !== "") s.time_zone = zone.value.trim();
    } else {
      durations.push(["interval_ms", every, "Every"], ["offset_ms", offset, "Offset"]);
    }
    for (const [key, box, label] of durations) {
      const ms = parseDuration(box.value);
      if (Number.isNaN(ms)) return label + ": '" + box.value + "' is not a duration (90s, 15m, 1h, 2d)";
      if (ms !== null) s[key] = ms;
    }
    if (version.value !== "") s.orchestration_version = version.value;
    if (inputText.value !== "") s.input = inputText.value;
    if (start.value.trim() !== "") s.start = start.value.trim();
    if (end.value.trim() !== "") s.end = end.value.trim();
    if (paused.checked && note.value !== "") s.note = note.value;
    return s;
  }

  const submit = h("button", { type: "submit", id: "sf-submit" },
    current ? "Save changes…" : "Create schedule…");
  const cancel = h("button", { type: "button", id: "sf-cancel", onclick: () => done(null) },
    "Cancel");
  const form = h("form", { id: "schedule-form", class: "schedule-form",
    "aria-labelledby": "sf-title",
    onsubmit: async (ev) => {
      ev.preventDefault();
      error.hidden = true;
      const s = specOf();
      if (typeof s === "string") return refuse(s);
      const body = current ? { ref: current.ref, spec: s } : { id: idBox.value, spec: s };
      const verb = current ? "schedule/update" : "schedule/create";
      submit.disabled = true;
      let plan;
      try {
        plan = await post(verb, Object.assign({ dry_run: true }, body));
      } catch (e) {
        return refuse("Refused: " + e.message);
      } finally {
        submit.disabled = false;
      }
      const times = plan.next_fire_times.map((t) => (t.time_local || "") + " (" +
        t.time.replace("T", " ").replace(/\.000Z$/, "Z") + ")");
      const r = await confirmAction({ id: current ? "schedule-update" : "schedule-create",
        title: current ? "Replace this schedule's spec?" : "Create this schedule?",
        text: [current ? "Schedule " : "Schedule ", h("code", {}, userText(plan.id)),
          " starts ", h("code", {}, userText(s.orchestration)), " ",
          s.paused ? "nothing until it is resumed (it is paused)."
            : times.length ? "first at:" : "no more instances (its end has passed)."],
        ids: s.paused ? [] : times,
        yes: current ? "Save" : "Create", no: "Not yet" });
      if (!r.ok) return;
      try {
        const made = await post(verb, body);
        say((current ? "Updated" : "Created") + " schedule " + userPlain(made.id) + ".");
        done(made.ref);
      } catch (e) {
        refuse("Refused: " + e.message);
      }
    } },
  h("h3", { id: "sf-title" }, current ? "Edit the schedule" : "New schedule"),
  idBox ? field("sf-id", "Id", idBox, "no '@'; each fire's instance is ID@TIME") : null,
  field("sf-kind", "Fires at", kind),
  byCronFields, byEveryFields,
  field("sf-orchestration", "Orchestration", orch),
  field("sf-version", "Version", version),
  field("sf-input", "Input", inputText, "each instance's input (JSON or text)"),
  field("sf-overlap", "While the last still runs", overlap),
  field("sf-catchup", "Catch-up window", catchup, "after a downtime, older fires are skipped"),
  field("sf-jitter", "Jitter", jitter),
  field("sf-timeout", "Timeout", timeout, "each instance's deadline after its start"),
  field("sf-start", "Start (UTC)", start),
  field("sf-end", "End (UTC)", end),
  h("p", { class: "field" }, paused, h("label", { for: "sf-paused" }, " Paused "),
    h("label", { for: "sf-note" }, "note "), note),
  error,
  h("p", {}, submit, " ", cancel));
  queueMicrotask(() => (idBox || (byCron ? cron : every)).focus());
  return form;
}

// ---- one schedule -------------------------------------------------------------

export function showSchedule(view, ref, opts = {}) {
  const readOnly = !!opts.readOnly;
  const title = h("h2", { class: "id" }, "Schedule");
  const card = h("dl", { id: "schedule-card", class: "card" });
  const nextList = h("ol", { id: "next-fires" });
  const fireRows = h("tbody", { id: "fire-rows" });
  const fires = h("table", { id: "fires" },
    h("caption", {}, "Recent fires, newest first"),
    h("thead", {}, h("tr", {}, ["Fire time (schedule's zone · UTC)", "Action", "Instance",
      "Status now", "Why"].map((c) => h("th", { scope: "col" }, c)))),
    fireRows);
  const stale = staleBanner(() => [card, fires]);
  const actions = h("p", { id: "schedule-actions", class: "actions" });
  const formHere = h("div", { id: "schedule-form-here" });
  let info = null;
  const from = "/schedule?" + query({ ref });
  const busy = [];
  const button = (text, attrs) => {
    const b = h("button", Object.assign({ type: "button" }, attrs), text);
    busy.push(b);
    return b;
  };

  async function act(verb, body) {
    busy.forEach((b) => { b.disabled = true; });
    try {
      const r = await post("schedule/" + verb, Object.assign({ ref }, body));
      let text = "schedule " + userPlain(r.id) + " " + r.action;
      if (verb === "trigger") {
        text += r.instance ? ": started " + userPlain(r.instance)
          : ": its overlap policy started none";
      }
      if (r.note) text += "; " + r.note;
      say(text + ".");
      return r;
    } catch (e) {
      say("Refused: " + e.message, true);
      return null;
    } finally {
      busy.forEach((b) => { b.disabled = false; });
    }
  }

  const idLine = (text) => [text + " Schedule: ",
    h("code", {}, userText(info ? info.id : ""))];
  const edit = button("Edit…", { id: "do-edit", onclick: () => {
    if (!info) return;
    formHere.replaceChildren(scheduleForm(info, (changed) => {
      formHere.replaceChildren();
      if (changed) load();
      edit.focus();
    }));
  } });
  const pause = button("Pause…", { id: "do-pause", onclick: async () => {
    const r = await confirmAction({ id: "schedule-pause", title: "Pause this schedule?",
      text: idLine("It fires no more until it is resumed; the instances it started run on."),
      reason: "why (shown on the schedule)", label: "Note", yes: "Pause" });
    if (r.ok && await act("pause", r.reason ? { note: r.reason } : {})) load();
  } });
  const resume = button("Resume", { id: "do-resume", onclick: async () => {
    if (await act("resume", {})) load();
  } });
  const trigger = button("Trigger now…", { id: "do-trigger", onclick: async () => {
    const r = await confirmAction({ id: "schedule-trigger", title: "Fire this schedule now?",
      text: idLine("One instance starts now, paused or not, unless its overlap policy (" +
        (info ? info.spec.overlap : "") + ") skips or buffers it."),
      yes: "Trigger now" });
    if (r.ok && await act("trigger", {})) load();
  } });
  const remove = button("Delete…", { id: "do-delete", class: "danger", onclick: async () => {
    const r = await confirmAction({ id: "schedule-delete", title: "Delete this schedule?",
      text: idLine("It and its fires log are gone; the instances it started are not touched."),
      yes: "Delete schedule" });
    if (r.ok && await act("delete", {})) location.hash = "#/schedules";
  } });

  view.append(listNav("schedules"), title, stale.el, card,
    readOnly ? null : actions, formHere,
    h("h3", {}, "Next fire times"), nextList,
    h("h3", {}, "Recent fires"), h("div", { class: "scroll-x" }, fires));

  const row = (label, value) => [h("dt", {}, label),
    h("dd", { "data-field": label }, [value].flat(Infinity))];

  async function load() {
    try {
      const s = await get("schedule?" + query({ ref, next: 5, fires: 20 }));
      info = s;
      const p = s.spec;
      title.replaceChildren("Schedule ", userText(s.id));
      card.replaceChildren(
        ...row("Rule", userText(ruleText(p))),
        ...row("Orchestration", [userText(p.orchestration),
          p.orchestration_version ? [" version ", userText(p.orchestration_version)] : null]),
        ...row("Input", s.input_text !== null ? h("code", {}, userText(s.input_text)) : "none"),
        ...row("Overlap", p.overlap),
        ...row("State", [p.paused ? "paused" : "active",
          p.paused && p.note ? [": ", userText(p.note)] : null]),
        ...row("Catch-up window", durationText(p.catchup_window_ms)),
        ...row("Jitter", p.jitter_ms ? durationText(p.jitter_ms) : "none"),
        ...row("Timeout", p.timeout_ms ? durationText(p.timeout_ms) + " after each start" : "none"),
        ...row("Start", p.start ? h("time", { datetime: p.start }, p.start) : "none"),
        ...row("End", p.end ? h("time", { datetime: p.end }, p.end) : "none"),
        ...row("Fires", s.fires + " started, " + s.skips + " skipped"),
        ...row("Last instance", s.last_instance
          ? [instanceLink(s.last_instance, s.last_instance_ref, from), " (" + s.last_status + ")"]
          : "none yet"),
        ...row("Created", when(s.created, s.created_ms, Date.now())),
        ...row("Updated", when(s.updated, s.updated_ms, Date.now())));
      const items = s.next_fire_times.map((t) => h("li", {}, zoned(t.time_local, t.time)));
      if (items.length === 0) {
        items.push(h("li", {}, p.paused ? "none while it is paused" : "none (past its end)"));
      }
      nextList.replaceChildren(...items);
      const made = s.recent_fires.map((f) => h("tr", {},
        h("td", { "data-label": "Fire time" }, zoned(f.time_local, f.time)),
        h("td", { "data-label": "Action" }, f.action +
          (f.action === "skipped" && f.count > 1 ? " (" + f.count + ")" : "")),
        h("td", { class: "id", "data-label": "Instance" }, f.instance
          ? instanceLink(f.instance, f.instance_ref, from) : "-"),
        h("td", { "data-label": "Status now" }, f.instance_status
          ? h("span", { class: "status st-" + f.instance_status }, f.instance_status) : "-"),
        h("td", { "data-label": "Why" }, f.why ? userText(f.why) : "")));
      if (made.length === 0) made.push(h("tr", {}, h("td", { colspan: "5" }, "No fires yet.")));
      fireRows.replaceChildren(...made);
      actions.replaceChildren(edit, " ", p.paused ? resume : pause, " ", trigger, " ", remove);
      stale.ok();
    } catch (e) {
      if (e.status === 404) {
        title.replaceChildren("No such schedule");
        card.replaceChildren();
        actions.replaceChildren();
        say(e.message, true);
        return;
      }
      stale.fail(e);
    }
  }
  load();
  return () => {};
}
