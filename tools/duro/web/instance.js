// instance.js - one instance ("#/instance?ref=REF&from=LIST", LIST the
// query of the instances page it was opened from, or "/actions?..." the
// recent actions page's, which "←" returns to): its status card (times
// with their ages, the parent a link, what a pending instance that never
// ran waits for), its children with their status, its input,
// output and custom status as previews with their sizes and the whole
// value on demand, the actions (cancel with a reason, terminate and suspend, each after a
// confirmation whose Enter key cannot confirm; resume; raise an event
// with a JSON payload checked first; on an ended instance, "Rewind…" when
// it failed and "Reset to here…" on each event, each checked by the API's
// dry run before its confirmation, so that a refused point is said and
// nothing changes; none in a read-only session) and
// its events, paged. After an action the card is fetched again at once
// and the result announced in the role="status" region; the card is also
// refreshed every 2 s while the tab is visible (the events too, when
// the history grew and only their first page is shown).
import { h, get, getText, post, query, say, payloadText, userText, userPlain, staleBanner,
  confirmAction } from "./dom.js";
import { age, bytes, offset, when } from "./fmt.js";

const CHILDREN_PAGE = 20; // children listed at once
import { timeline } from "./timeline.js";

const PREVIEW = 200; // characters of a payload shown in the events table
// The statuses of an ended instance: no action but rewind and reset.
const ENDED = ["completed", "failed", "cancelled", "terminated"];

function row(label, value) {
  if (value === null || value === undefined || value === "") return null;
  return [h("dt", {}, label), h("dd", { "data-field": label },
    value instanceof Node ? value : String(value))];
}

// A store string of the card (name, reason, error...) as userText.
const user = (s) => (s === null || s === undefined || s === "" ? null : userText(s));

// The query of the instances page this one was opened from (its "from"
// parameter), or "" (the first page, no filter).
function listFrom() {
  const hash = location.hash;
  const q = hash.indexOf("?");
  return q < 0 ? "" : new URLSearchParams(hash.slice(q + 1)).get("from") || "";
}

// "ID-FIELD.txt", the id's characters a file name cannot hold as "_".
function fileName(id, field) {
  return String(id).replace(/[^A-Za-z0-9._-]/g, "_").slice(0, 100) + "-" + field + ".txt";
}

const VALUES = [
  // [label, field of GET payload?field=, key of the instance object]
  ["Input", "input", null],
  ["Output", "output", "output"],
  ["Custom status", "custom_status", "custom_status"],
];

// @p opts.readOnly: the session is read-only (duro ui --read-only), so no
// action is offered.
export function showInstance(view, ref, opts = {}) {
  const readOnly = !!opts.readOnly;
  let timer = null;
  let info = null;
  let seen = -1; // history_count the events table was loaded at
  const title = h("h2", { class: "id" }, "Instance");
  const card = h("dl", { id: "card", class: "card" });
  const stale = staleBanner(() => [card, title]);
  // Rows the timeline fills in (kept out of card, which is rebuilt).
  const waits = h("dd", { "data-field": "Waiting on" });
  const waitsRow = h("dl", { class: "card card-more", hidden: true },
    h("dt", {}, "Waiting on"), waits);
  const termBy = h("dd", { "data-field": "Terminated by" });
  const termRow = h("dl", { class: "card card-more", hidden: true },
    h("dt", {}, "Terminated by"), termBy);
  const busy = [];

  function button(text, attrs) {
    const b = h("button", Object.assign({ type: "button" }, attrs), text);
    busy.push(b);
    return b;
  }

  async function act(what, body) {
    busy.forEach((b) => { b.disabled = true; });
    try {
      const r = await post(what, Object.assign({ ref }, body));
      const outcome = r.outcome || (r.raised ? "raised" : "done");
      say(what + ": " + outcome + (r.status ? " (status " + r.status + ")" : ""));
      return true;
    } catch (e) {
      say(what + " failed: " + e.message, true);
      return false;
    } finally {
      busy.forEach((b) => { b.disabled = false; });
      events.paged = false;
      seen = -1;
      await refresh();
    }
  }

  // The destructive actions ask first (confirmAction: Enter never
  // confirms, "Keep it" has the focus).
  const idLine = (name, text) => [text + " Id: ",
    h("code", { id: name + "-id" }, userText(info ? info.id : ""))];

  // Cancel with a reason.
  const reason = h("input", { id: "cancel-reason", autocomplete: "off",
    placeholder: "cancelled from duro ui" });
  const cancelForm = h("form", { class: "action", onsubmit: async (ev) => {
    ev.preventDefault();
    const why = reason.value;
    const r = await confirmAction({ id: "cancel", title: "Cancel this instance?",
      text: idLine("cancel", "It stops at its next turn; its activities are cancelled" +
        (why ? "; reason: \u201C" + userPlain(why) + "\u201D." : ".")),
      yes: "Cancel instance" });
    if (r.ok) act("cancel", why ? { reason: why } : {});
  } }, h("label", { for: "cancel-reason" }, "Reason "), reason,
  button("Cancel instance…", { type: "submit", id: "do-cancel" }));

  // Terminate, with its reason asked in the dialog.
  const terminate = button("Terminate…", { id: "do-terminate",
    onclick: async () => {
      const r = await confirmAction({ id: "terminate", title: "Terminate this instance?",
        text: idLine("terminate", "Its code does not run again; its activities are cancelled."),
        reason: "terminated from duro ui", yes: "Terminate" });
      if (r.ok) act("terminate", r.reason ? { reason: r.reason } : {});
    } });

  const suspend = button("Suspend…", { id: "do-suspend",
    onclick: async () => {
      const r = await confirmAction({ id: "suspend", title: "Suspend this instance?",
        text: idLine("suspend", "It stops taking turns until it is resumed."), yes: "Suspend" });
      if (r.ok) act("suspend", {});
    } });
  const resume = button("Resume", { id: "do-resume",
    onclick: () => act("resume", {}) });

  // " (1 activity and 2 timers again)" of a reset's answer, or "".
  function again(r) {
    const parts = [[r.activities, "activity", "activities"], [r.timers, "timer", "timers"],
      [r.children, "child", "children"]].filter(([n]) => n > 0)
      .map(([n, one, more]) => n + " " + (n === 1 ? one : more));
    if (parts.length === 0) return "";
    const last = parts.pop();
    return " (" + (parts.length ? parts.join(", ") + " and " : "") + last + " again)";
  }

  // Rewind (verb "rewind", point {}) or reset to an event (verb "reset",
  // point {execution_id, to_event_id}): the API's dry run first, so that
  // a refused point (inside a turn, a child without its result...) is
  // said, whole, before anything changes; then a confirmation with a
  // reason that says where it goes and what runs again; then the reset,
  // and the page shows the new execution.
  let goingBack = false; // one reset or rewind at a time
  async function backInTime(verb, point) {
    if (goingBack) return;
    goingBack = true;
    try {
      await goBack(verb, point);
    } finally {
      goingBack = false;
    }
  }
  // The deadline the new execution runs under, for an instance that has
  // one: its own (re-armed) while it is ahead; once it has passed the
  // library refuses to keep it (the instance would end again at once), so
  // the operator picks none (the default) or a new one from now. The API
  // takes deadline_ms: 0 keeps, -1 none, else a time.
  function deadlineChoice(verb) {
    if (!info || !(info.deadline_ms > 0)) return null;
    const passed = info.deadline_ms <= Date.now();
    const choices = [[-1, "none"], [3600000, "1 hour from now"],
      [86400000, "1 day from now"], [7 * 86400000, "7 days from now"]];
    if (!passed) choices.unshift([0, "keep the instance's"]);
    const select = h("select", { id: verb + "-deadline" },
      choices.map(([v, text]) => h("option", { value: String(v) }, text)));
    return { passed, select,
      row: h("p", {}, h("label", { for: verb + "-deadline" }, "Deadline "), select,
        passed ? " (the instance's has passed)" : ""),
      value() {
        const v = Number(select.value);
        return v > 0 ? Date.now() + v : v;
      } };
  }
  async function goBack(verb, point) {
    busy.forEach((b) => { b.disabled = true; });
    let plan;
    const deadline = deadlineChoice(verb);
    try {
      // past its deadline, the dry run asks without it: the point's own
      // refusals are what it is for
      plan = await post(verb, Object.assign({ ref, dry_run: true },
        deadline && deadline.passed ? { deadline_ms: -1 } : {}, point));
    } catch (e) {
      say("Refused: " + e.message, true);
      return;
    } finally {
      busy.forEach((b) => { b.disabled = false; });
    }
    const where = "event " + plan.to_event_id + " of execution " + plan.from_execution;
    const r = await confirmAction({ id: verb,
      title: verb === "rewind" ? "Rewind this failed instance?" : "Reset this instance to event " +
        plan.to_event_id + "?",
      text: idLine(verb, "Execution " + plan.execution_id + " keeps the events up to " + where +
        " and goes on from there with the code registered now" + again(plan) +
        "; execution " + plan.from_execution + " stays readable."),
      reason: verb === "rewind" ? "rewound from duro ui" : "reset from duro ui",
      extra: deadline && deadline.row,
      yes: verb === "rewind" ? "Rewind" : "Reset to event " + plan.to_event_id });
    if (!r.ok) return;
    busy.forEach((b) => { b.disabled = true; });
    try {
      // the execution the dry run saw: another reset in between is refused
      const body = verb === "rewind" ? { execution_id: plan.from_execution }
        : { execution_id: point.execution_id, to_event_id: plan.to_event_id };
      if (r.reason) body.reason = r.reason;
      if (deadline) body.deadline_ms = deadline.value();
      const done = await post(verb, Object.assign({ ref }, body));
      say((verb === "rewind" ? "rewound" : "reset") + " to event " + done.to_event_id +
        " of execution " + done.from_execution + "; execution " + done.execution_id +
        " goes on from there" + again(done));
    } catch (e) {
      say("Refused: " + e.message, true);
    } finally {
      busy.forEach((b) => { b.disabled = false; });
      events.paged = false;
      seen = -1;
      await refresh();
    }
  }
  const rewind = button("Rewind…", { id: "do-rewind", hidden: true,
    onclick: () => backInTime("rewind", {}) });

  // Raise an event: the payload must be JSON (empty: none).
  const evName = h("input", { id: "event-name", required: true, autocomplete: "off" });
  const evPayload = h("textarea", { id: "event-payload", rows: "2",
    placeholder: "{\"any\": \"JSON\"}" });
  const raiseForm = h("form", { class: "action", onsubmit: (ev) => {
    ev.preventDefault();
    const body = { name: evName.value };
    const text = evPayload.value.trim();
    if (text !== "") {
      try {
        JSON.parse(text); // checked here; sent as the text typed
        // The server sends a JSON string as its text: the payload is
        // the JSON the user typed ("hello" stays "hello", quotes and all).
        body.payload = text;
      } catch (e) {
        say("The payload is not JSON: " + e.message, true);
        evPayload.setAttribute("aria-invalid", "true");
        return;
      }
    }
    evPayload.removeAttribute("aria-invalid");
    act("raise-event", body);
  } },
  h("label", { for: "event-name" }, "Event "), evName,
  h("label", { for: "event-payload" }, " payload "), evPayload,
  button("Raise event", { type: "submit", id: "do-raise" }));

  const actions = h("section", { "aria-label": "Actions", class: "actions",
    hidden: readOnly }, cancelForm, h("p", {}, terminate, " ", suspend, " ", resume, " ", rewind),
  raiseForm);

  const tl = timeline(ref);
  const from = listFrom();

  // Children (sub-orchestrations it started), newest first, with their
  // status: GET instances?parent=REF, "More" for the next page. Read
  // again when the history grows (a child started or ended) and every
  // 10 s (a detached child's status changes with no event here).
  const kidRows = h("tbody", { id: "children" });
  const kidCount = h("span", { id: "children-count" });
  const kidMore = h("button", { type: "button", id: "children-more", hidden: true },
    "More children");
  const kidSection = h("section", { "aria-label": "Children", id: "children-section",
    hidden: true },
  h("div", { class: "scroll-x" }, h("table", { id: "children-table" },
    h("caption", {}, "Children ", kidCount),
    h("thead", {}, h("tr", {}, ["Id", "Name", "Status", "Created (UTC)"].map((c) =>
      h("th", { scope: "col" }, c)))),
    kidRows)), kidMore);
  const kids = {
    cursor: null, // the next page's, when more were asked for
    shownPages: 1,
    at: 0, // Date.now() of the last read
    seen: -1, // history_count at the last read
    async load() {
      this.at = Date.now();
      let cursor = null;
      const made = [];
      let p = null;
      // the pages opened so far, again (children change status)
      for (let i = 0; i < this.shownPages; i++) {
        p = await get("instances?" + query({ parent: ref, order: "created",
          limit: CHILDREN_PAGE, cursor, count: i === 0 ? "1" : "" }));
        if (i === 0) {
          kidSection.hidden = p.total === 0;
          kidCount.textContent = "(" + p.total + ", newest first)";
        }
        const now = Date.now();
        for (const c of p.instances) {
          made.push(h("tr", { "data-ref": c.ref },
            h("td", { class: "id" }, h("a", { href: "#/instance?" + query({ ref: c.ref, from }) },
              userText(c.id))),
            h("td", {}, c.name ? userText(c.name) : ""),
            h("td", { class: "status st-" + c.status },
              c.status + (c.cancelling ? " (cancelling)" : "")),
            h("td", {}, when(c.created_at, c.created_at_ms, now))));
        }
        cursor = p.next_cursor;
        if (!cursor) break;
      }
      kidRows.replaceChildren(...made);
      kidMore.hidden = !cursor;
    },
  };
  kidMore.addEventListener("click", () => {
    kids.shownPages++;
    kids.load().catch((e) => say("children: " + e.message, true));
  });

  // Input, output and custom status: a preview (at most 4 KB, from the
  // API) with its size; "Show all" reads the whole value (GET payload
  // ?field=), "Download" saves it. Rebuilt only when a value changes, so
  // that a value shown whole stays so across refreshes.
  const valuesBox = h("dl", { id: "values", class: "card values" });
  const valueState = new Map(); // field -> {key, whole (text) or null}
  function valueRow(label, field, v) {
    // v: {preview (JSON value or text), bytes, truncated} or null
    const key = v ? JSON.stringify([v.preview, v.bytes]) : "";
    const st = valueState.get(field);
    if (st && st.key === key && st.el) return st.el;
    const state = { key, whole: null, el: null };
    valueState.set(field, state);
    if (!v) {
      state.el = [];
      return state.el;
    }
    const text = payloadText(v.preview, 0);
    const pre = h("pre", { class: "payload value", id: "value-" + field, tabindex: "0" },
      userText(text, { lines: true }));
    const size = h("span", { class: "size", id: "size-" + field },
      bytes(v.bytes) + (v.truncated ? ", the first " + bytes(new TextEncoder()
        .encode(text).length).replace(/ \(.*\)$/, "") + " shown" : ""));
    // read with the session (an API request), then saved as a file
    const download = h("button", { type: "button", class: "link download",
      id: "download-" + field,
      onclick: async () => {
        try {
          const whole = await getText("payload?" + query({ ref, field }));
          const url = URL.createObjectURL(new Blob([whole],
            { type: "text/plain;charset=utf-8" }));
          const a = h("a", { href: url, download: fileName(info.id, field) });
          document.body.append(a);
          a.click();
          a.remove();
          setTimeout(() => URL.revokeObjectURL(url), 10000);
        } catch (e) {
          say(label + ": " + e.message, true);
        }
      } }, "Download");
    const all = v.truncated ? h("button", { type: "button", class: "link",
      id: "show-all-" + field,
      onclick: async () => {
        all.disabled = true;
        try {
          const whole = await getText("payload?" + query({ ref, field }));
          pre.replaceChildren(userText(whole, { lines: true }));
          size.textContent = bytes(v.bytes) + ", all shown";
          all.remove();
        } catch (e) {
          all.disabled = false;
          say(label + ": " + e.message, true);
        }
      } }, "Show all") : null;
    state.el = [h("dt", {}, label), h("dd", { "data-field": label },
      h("p", { class: "value-head" }, size, " ", all, all ? " " : null, download), pre)];
    return state.el;
  }
  let input = null; // the current execution's input preview, from its events
  function drawValues() {
    if (!info) return;
    const parts = VALUES.map(([label, field, key]) => {
      const v = key === null ? input
        : info[key + "_bytes"] === null || info[key + "_bytes"] === undefined ? null
          : { preview: info[key], bytes: info[key + "_bytes"],
            truncated: !!info[key + "_truncated"] };
      return valueRow(label, field, v);
    }).flat();
    if (parts.length !== valuesBox.childNodes.length ||
      parts.some((p, i) => valuesBox.childNodes[i] !== p)) {
      valuesBox.replaceChildren(...parts);
    }
    valuesBox.hidden = parts.length === 0;
  }

  // Events, paged with next_after.
  const evRows = h("tbody", { id: "events" });
  const full = h("pre", { id: "payload-full", class: "payload", hidden: true });
  const evMore = h("button", { type: "button", id: "events-more", hidden: true },
    "More events");
  const events = {
    after: 0,
    paged: false,
    async load(append) {
      this.paged = append;
      const p = await get("history?" + query({ ref, after: append ? this.after : 0,
        limit: 100 }));
      const ended = !!info && ENDED.includes(info.status);
      if (!append) {
        const started = p.events.find((e) => e.kind === "OrchestrationStarted");
        input = started && started.payload !== undefined ? { preview: started.payload,
          bytes: started.payload_bytes, truncated: !!started.payload_truncated } : null;
        drawValues();
      }
      const made = p.events.map((e) => {
        const details = [];
        for (const [label, v] of [["reason: ", e.reason], ["by ", e.requested_by],
          ["error: ", e.error]]) {
          if (!v) continue;
          if (details.length) details.push("; ");
          details.push(label, userText(v));
        }
        if (e.attempt > 1) details.push((details.length ? "; " : "") + "attempt " + e.attempt);
        const text = payloadText(e.payload, 0);
        const cell = h("td", { class: "payload" }, userText(payloadText(e.payload, PREVIEW)));
        if (text.length > PREVIEW || e.payload_truncated) {
          cell.append(" ", h("button", { type: "button", class: "link",
            onclick: () => showPayload(e.event_id, p.execution_id) }, "whole"));
        }
        // an ended instance's events are points it may be reset to (the
        // dry run says which are not)
        const reset = ended && !readOnly ? h("button", { type: "button", class: "link reset-here",
          title: "Reset to event " + e.event_id + " (asks first)",
          onclick: () => backInTime("reset", { execution_id: p.execution_id,
            to_event_id: e.event_id }) }, "Reset to here…") : null;
        return h("tr", { "data-event": String(e.event_id) }, h("td", {}, "#" + e.event_id),
          h("td", { title: e.offset_ms + " ms" }, offset(e.offset_ms)), h("td", {}, e.kind),
          h("td", {}, e.name ? userText(e.name) : ""), h("td", {}, details), cell,
          h("td", {}, reset));
      });
      if (append) evRows.append(...made);
      else evRows.replaceChildren(...made);
      this.after = p.next_after || 0;
      evMore.hidden = !p.next_after;
    },
    first() {
      return this.load(false).catch((e) => say(e.message, true));
    },
  };
  evMore.addEventListener("click", () =>
    events.load(true).catch((e) => say(e.message, true)));

  async function showPayload(eventId, execution) {
    try {
      full.replaceChildren(userText(await getText("payload?" +
        query({ ref, event: eventId, execution })), { lines: true }));
      full.hidden = false;
      full.focus();
    } catch (e) {
      say(e.message, true);
    }
  }

  async function refresh() {
    try {
      info = await get("instance?" + query({ ref }));
      stale.ok();
    } catch (e) {
      stale.fail(e);
      return;
    }
    title.replaceChildren(userText(info.id));
    const finished = ENDED.includes(info.status);
    // Pending, its first turn not run: no execution and no history yet.
    const neverRan = info.execution_id === 0;
    const now = Date.now();
    const problem = info.last_problem && h("span", {}, userText(info.last_problem),
      " (", when(info.last_problem_at, info.last_problem_at_ms, now), ")",
      info.next_attempt_at_ms ? "; next attempt " + age(info.next_attempt_at_ms, now) : "");
    card.replaceChildren(...[
      row("Status", info.status + (info.cancelling ? " (cancelling)" : "")),
      row("Waiting for", neverRan && info.status === "pending"
        ? h("span", { id: "first-turn" }, "a runtime to take its first turn" +
          (info.last_problem ? ", which cannot yet: see its last problem"
            : " (a delayed start waits for its time)")) : null),
      row("Name", user(info.name)),
      row("Version", user(info.version)),
      row("Execution", neverRan ? "none yet" : info.execution_id),
      row("Created", when(info.created_at, info.created_at_ms, now)),
      row("Updated", when(info.updated_at, info.updated_at_ms, now)),
      row("Finished", info.finished_at && when(info.finished_at, info.finished_at_ms, now)),
      row("Deadline", info.deadline && when(info.deadline, info.deadline_ms, now)),
      row("Cancel reason", user(info.cancel_reason)),
      row("Cancel requested by", user(info.cancelled_by)),
      row("Cancel requested", info.cancel_requested_at &&
        when(info.cancel_requested_at, info.cancel_requested_at_ms, now)),
      row("Error", user(info.error)),
      row("Last problem", problem),
      row("Parent", info.parent_instance && (info.parent_ref
        ? h("a", { href: "#/instance?" + query({ ref: info.parent_ref, from }),
          id: "parent-link" }, userText(info.parent_instance))
        : userText(info.parent_instance))),
      row("History events", info.history_count),
    ].flat().filter(Boolean));
    if (neverRan) {
      input = null;
      drawValues();
    } else if (info.history_count === seen) {
      drawValues(); // output and custom status; the input comes with events
    }
    card.querySelector("dd").classList.add("status", "st-" + info.status);
    for (const b of [terminate, suspend, resume]) b.hidden = finished;
    cancelForm.hidden = finished;
    raiseForm.hidden = finished;
    actions.hidden = readOnly; // --read-only: the server refuses every action
    suspend.hidden = finished || info.status === "suspended";
    resume.hidden = info.status !== "suspended";
    rewind.hidden = info.status !== "failed";
    // New history: reload the events, unless more pages were opened.
    if (info.history_count !== seen && !neverRan) {
      seen = info.history_count;
      if (!events.paged) events.first().then(drawValues);
    } else if (neverRan) {
      evRows.replaceChildren(h("tr", {}, h("td", { colspan: "7" },
        "No events yet: its first turn has not run.")));
    }
    // The timeline reads only the events it has not read (none when the
    // history did not grow) and moves "now" on for a running instance.
    tl.el.hidden = neverRan;
    if (!neverRan && (info.history_count !== kids.seen || Date.now() - kids.at > 10000)) {
      kids.seen = info.history_count;
      kids.load().catch((e) => say("children: " + e.message, true));
    }
    tl.load(info).then(() => {
      // from the history: what it waits on; who terminated it and why
      const waiting = tl.waiting();
      waits.replaceChildren(waiting ? userText(waiting) : "");
      waitsRow.hidden = waiting === "";
      const t = info.status === "terminated" ? tl.terminated() : null;
      termBy.replaceChildren(...(t ? [t.by ? userText(t.by) : "-",
        t.reason ? " — " : "", t.reason ? userText(t.reason) : ""] : []));
      termRow.hidden = !t;
    }).catch((e) => say("timeline: " + e.message, true));
  }

  view.append(
    h("p", {}, from.startsWith("/actions")
      ? h("a", { href: "#" + from, id: "back" }, "← Recent actions")
      : h("a", { href: "#/" + (from ? "?" + from : ""), id: "back" }, "← Instances")),
    stale.el,
    title,
    h("section", { "aria-label": "Status" }, card, waitsRow, termRow),
    h("section", { "aria-label": "Input, output and custom status" }, valuesBox),
    kidSection,
    actions,
    tl.el,
    h("section", { "aria-label": "Events" },
      h("div", { class: "scroll-x" }, h("table", { id: "events-table" },
        h("caption", {}, "Events"),
        h("thead", {}, h("tr", {}, ["#", "Offset", "Kind", "Name", "Details",
          "Payload", "Reset"].map((c) => h("th", { scope: "col" }, c)))),
        evRows)),
      evMore, full));
  full.setAttribute("tabindex", "-1");

  refresh();
  timer = setInterval(() => {
    if (!document.hidden) refresh();
  }, 2000);
  return () => clearInterval(timer);
}
