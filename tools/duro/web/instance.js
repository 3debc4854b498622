// instance.js - one instance ("#/instance?ref=REF"): its status card,
// the actions (cancel with a reason, terminate and suspend, each after a
// confirmation whose Enter key cannot confirm; resume; raise an event
// with a JSON payload checked first; none in a read-only session) and
// its events, paged. After an action the card is fetched again at once
// and the result announced in the role="status" region; the card is also
// refreshed every 2 s while the tab is visible (the events too, when
// the history grew and only their first page is shown).
import { h, get, getText, post, query, say, time, payloadText, idText, staleBanner,
  confirmAction } from "./dom.js";
import { timeline } from "./timeline.js";

const PREVIEW = 200; // characters of a payload shown in the events table

function row(label, value) {
  if (value === null || value === undefined || value === "") return null;
  return [h("dt", {}, label), h("dd", { "data-field": label },
    value instanceof Node ? value : String(value))];
}

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
    h("code", { id: name + "-id" }, idText(info ? info.id : ""))];

  // Cancel with a reason.
  const reason = h("input", { id: "cancel-reason", autocomplete: "off",
    placeholder: "cancelled from duro ui" });
  const cancelForm = h("form", { class: "action", onsubmit: async (ev) => {
    ev.preventDefault();
    const why = reason.value;
    const r = await confirmAction({ id: "cancel", title: "Cancel this instance?",
      text: idLine("cancel", "It stops at its next turn; its activities are cancelled" +
        (why ? "; reason: \u201C" + why + "\u201D." : ".")),
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
    hidden: readOnly }, cancelForm, h("p", {}, terminate, " ", suspend, " ", resume),
  raiseForm);

  const tl = timeline(ref);

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
      const made = p.events.map((e) => {
        const details = [e.reason && "reason: " + e.reason,
          e.requested_by && "by " + e.requested_by,
          e.error && "error: " + e.error,
          e.attempt > 1 && "attempt " + e.attempt].filter(Boolean).join("; ");
        const text = payloadText(e.payload, 0);
        const cell = h("td", { class: "payload" }, payloadText(e.payload, PREVIEW));
        if (text.length > PREVIEW) {
          cell.append(" ", h("button", { type: "button", class: "link",
            onclick: () => showPayload(e.event_id, p.execution_id) }, "whole"));
        }
        return h("tr", {}, h("td", {}, "#" + e.event_id),
          h("td", {}, "+" + e.offset_ms + " ms"), h("td", {}, e.kind),
          h("td", {}, e.name || ""), h("td", {}, details), cell);
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
      full.textContent = await getText("payload?" +
        query({ ref, event: eventId, execution }));
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
    title.replaceChildren(idText(info.id));
    const finished = ["completed", "failed", "cancelled", "terminated"]
      .includes(info.status);
    card.replaceChildren(...[
      row("Status", info.status + (info.cancelling ? " (cancelling)" : "")),
      row("Name", info.name),
      row("Version", info.version),
      row("Execution", info.execution_id),
      row("Created", time(info.created_at)),
      row("Updated", time(info.updated_at)),
      row("Finished", info.finished_at && time(info.finished_at)),
      row("Cancel reason", info.cancel_reason),
      row("Cancel requested by", info.cancelled_by),
      row("Cancel requested", info.cancel_requested_at &&
        time(info.cancel_requested_at)),
      row("Error", info.error),
      row("Last problem", info.last_problem &&
        info.last_problem + " (" + time(info.last_problem_at) + ")"),
      row("Parent", info.parent_instance && idText(info.parent_instance)),
      row("History events", info.history_count),
    ].flat().filter(Boolean));
    card.querySelector("dd").classList.add("status", "st-" + info.status);
    for (const b of [terminate, suspend, resume]) b.hidden = finished;
    cancelForm.hidden = finished;
    raiseForm.hidden = finished;
    actions.hidden = readOnly; // --read-only: the server refuses every action
    suspend.hidden = finished || info.status === "suspended";
    resume.hidden = info.status !== "suspended";
    // New history: reload the events, unless more pages were opened.
    if (info.history_count !== seen) {
      seen = info.history_count;
      if (!events.paged) events.first();
    }
    // The timeline reads only the events it has not read (none when the
    // history did not grow) and moves "now" on for a running instance.
    tl.load(info).then(() => {
      // from the history: what it waits on; who terminated it and why
      waits.textContent = tl.waiting();
      waitsRow.hidden = waits.textContent === "";
      const t = info.status === "terminated" ? tl.terminated() : null;
      termBy.textContent = t ? (t.by || "-") + (t.reason ? " — " + t.reason : "") : "";
      termRow.hidden = !t;
    }).catch((e) => say("timeline: " + e.message, true));
  }

  view.append(
    h("p", {}, h("a", { href: "#/" }, "← Instances")),
    stale.el,
    title,
    h("section", { "aria-label": "Status" }, card, waitsRow, termRow),
    actions,
    tl.el,
    h("section", { "aria-label": "Events" },
      h("table", {},
        h("caption", {}, "Events"),
        h("thead", {}, h("tr", {}, ["#", "Offset", "Kind", "Name", "Details",
          "Payload"].map((c) => h("th", { scope: "col" }, c)))),
        evRows),
      evMore, full));
  full.setAttribute("tabindex", "-1");

  refresh();
  timer = setInterval(() => {
    if (!document.hidden) refresh();
  }, 2000);
  return () => clearInterval(timer);
}
