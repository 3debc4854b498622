// instance.js - one instance ("#/instance?ref=REF"): its status card,
// the actions (cancel with a reason, terminate after a confirmation,
// suspend/resume, raise an event with a JSON payload checked first) and
// its events, paged. After an action the card is fetched again at once
// and the result announced in the role="status" region; the card is also
// refreshed every 2 s while the tab is visible (the events too, when
// the history grew and only their first page is shown).
import { h, get, getText, post, query, say, time, payloadText } from "./dom.js";
import { timeline } from "./timeline.js";

const PREVIEW = 200; // characters of a payload shown in the events table

function row(label, value) {
  if (value === null || value === undefined || value === "") return null;
  return [h("dt", {}, label), h("dd", { "data-field": label }, String(value))];
}

export function showInstance(view, ref) {
  let timer = null;
  let info = null;
  let seen = -1; // history_count the events table was loaded at
  const title = h("h2", { class: "id" }, "Instance");
  const card = h("dl", { id: "card", class: "card" });
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

  // Cancel with a reason.
  const reason = h("input", { id: "cancel-reason", autocomplete: "off",
    placeholder: "cancelled from duro ui" });
  const cancelForm = h("form", { class: "action", onsubmit: (ev) => {
    ev.preventDefault();
    act("cancel", reason.value ? { reason: reason.value } : {});
  } }, h("label", { for: "cancel-reason" }, "Reason "), reason,
  button("Cancel instance", { type: "submit", id: "do-cancel" }));

  // Terminate, after a confirmation dialog.
  const termReason = h("input", { id: "terminate-reason", autocomplete: "off",
    placeholder: "terminated from duro ui" });
  const dialog = h("dialog", { id: "terminate-dialog",
    "aria-labelledby": "terminate-title" },
  h("form", { method: "dialog", onsubmit: (ev) => {
    ev.preventDefault();
    const confirmed = ev.submitter && ev.submitter.value === "yes";
    dialog.close();
    if (confirmed) {
      act("terminate", termReason.value ? { reason: termReason.value } : {});
    }
  } },
  h("h3", { id: "terminate-title" }, "Terminate this instance?"),
  h("p", {}, "Its code does not run again; its activities are cancelled. Id: ",
    h("code", { id: "terminate-id" }, "")),
  h("label", { for: "terminate-reason" }, "Reason "), termReason,
  h("p", {},
    h("button", { type: "submit", value: "yes", id: "confirm-terminate" },
      "Terminate"), " ",
    h("button", { type: "submit", value: "no" }, "Keep it"))));
  const terminate = button("Terminate…", { id: "do-terminate",
    onclick: () => dialog.showModal() });

  const suspend = button("Suspend", { id: "do-suspend",
    onclick: () => act("suspend", {}) });
  const resume = button("Resume", { id: "do-resume",
    onclick: () => act("resume", {}) });

  // Raise an event: the payload must be JSON (empty: none).
  const evName = h("input", { id: "event-name", required: true, autocomplete: "off" });
  const evPayload = h("textarea", { id: "event-payload", rows: "2",
    placeholder: "{\"any\": \"JSON\"}" });
  const raiseForm = h("form", { class: "action", onsubmit: (ev) => {
    ev.preventDefault();
    const body = { name: evName.value };
    if (evPayload.value.trim() !== "") {
      try {
        body.payload = JSON.parse(evPayload.value);
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
    } catch (e) {
      say(e.message, true);
      return;
    }
    title.textContent = info.id;
    dialog.querySelector("#terminate-id").textContent = info.id;
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
      row("Parent", info.parent_instance),
      row("History events", info.history_count),
    ].flat().filter(Boolean));
    card.querySelector("dd").classList.add("status", "st-" + info.status);
    for (const b of [terminate, suspend, resume]) b.hidden = finished;
    cancelForm.hidden = finished;
    raiseForm.hidden = finished;
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
    title,
    h("section", { "aria-label": "Status" }, card, waitsRow, termRow),
    h("section", { "aria-label": "Actions", class: "actions" },
      cancelForm, h("p", {}, terminate, " ", suspend, " ", resume), raiseForm,
      dialog),
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
