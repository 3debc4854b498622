// timeline.js - a first timeline of one execution: one row per activity,
// timer, child orchestration and event wait, a bar from when it was
// scheduled to when it ended; an activity whose worker recorded started
// and finished times shows a hatched "queued" part and a solid "ran" part.
// A cancel request is a marked moment with its reason and requester.
// Rows are windowed: only those in view (and a few more) are in the DOM.
// Bars are placed with el.style (CSSOM), which the CSP allows.
import { h, get, query, time } from "./dom.js";

const ROW = 24; // px per row
const OVERSCAN = 10; // rows drawn above and below the view
const MAX_PAGES = 50; // history pages of 1000 events read at most

const OPENS = {
  ActivityScheduled: "activity",
  TimerCreated: "timer",
  SubOrchestrationScheduled: "child",
  EventSubscribed: "event",
};
const CLOSES = {
  ActivityCompleted: "completed",
  ActivityFailed: "failed",
  TimerFired: "fired",
  SubOrchestrationCompleted: "completed",
  SubOrchestrationFailed: "failed",
};

// Spans and cancel marks from a history (events in order).
export function spansOf(events) {
  const byId = new Map();
  const spans = [];
  const marks = [];
  const waits = new Map(); // event name -> open event waits, oldest first
  for (const e of events) {
    const t = e.timestamp_ms;
    if (OPENS[e.kind]) {
      const s = { id: e.event_id, kind: OPENS[e.kind], name: e.name || "",
        start: t, end: null, run: null, outcome: null, attempt: null, notes: [] };
      if (e.kind === "TimerCreated" && e.fire_at_ms) s.name = "until " + time(e.fire_at);
      byId.set(e.event_id, s);
      spans.push(s);
      if (s.kind === "event") {
        if (!waits.has(s.name)) waits.set(s.name, []);
        waits.get(s.name).push(s);
      }
    } else if (CLOSES[e.kind] && byId.has(e.source_event_id)) {
      const s = byId.get(e.source_event_id);
      s.end = t;
      s.outcome = CLOSES[e.kind];
      s.attempt = e.attempt || null;
      if (e.error) s.notes.push(e.error);
      if (e.started_ms && e.finished_ms) s.run = [e.started_ms, e.finished_ms];
    } else if (e.kind === "EventRaised") {
      const q = waits.get(e.name || "");
      const s = q && q.find((w) => w.end === null);
      if (s) { s.end = t; s.outcome = "raised"; }
    } else if (e.kind === "ActivityCancelRequested" && byId.has(e.source_event_id)) {
      const s = byId.get(e.source_event_id);
      s.notes.push("✕ cancelled" + (e.reason ? ": " + e.reason : ""));
      s.cancelledAt = t;
    } else if (e.kind === "OrchestrationCancelRequested" ||
               e.kind === "OrchestrationTerminated") {
      marks.push({ at: t, what: e.kind === "OrchestrationTerminated" ? "terminated" : "cancel requested",
        by: e.requested_by || "", reason: e.reason || "" });
    }
  }
  return { spans, marks };
}

function duration(ms) {
  if (ms < 1000) return ms + " ms";
  if (ms < 60000) return (ms / 1000).toFixed(1) + " s";
  return (ms / 60000).toFixed(1) + " min";
}

// Builds the timeline of @p ref into a new element; returns {el, load}.
export function timeline(ref) {
  const strip = h("div", { class: "tl-marks" });
  const inner = h("div", { class: "tl-inner" });
  const scroller = h("div", { class: "tl-scroll", id: "timeline-rows", tabindex: "0",
    "aria-label": "Timeline rows (the Events table below is the same as text)" }, inner);
  const note = h("p", { class: "tl-note" });
  const el = h("section", { "aria-label": "Timeline", id: "timeline" },
    h("h3", {}, "Timeline"), note, strip, scroller);
  let model = { spans: [], marks: [], t0: 0, t1: 1 };

  const x = (t) => ((t - model.t0) / (model.t1 - model.t0)) * 100;
  const place = (e, a, b) => {
    e.style.left = x(a) + "%";
    e.style.width = Math.max(x(b) - x(a), 0.2) + "%";
  };

  function drawRows() {
    const first = Math.max(0, Math.floor(scroller.scrollTop / ROW) - OVERSCAN);
    const last = Math.min(model.spans.length,
      Math.ceil((scroller.scrollTop + scroller.clientHeight) / ROW) + OVERSCAN);
    const rows = [];
    for (let i = first; i < last; i++) {
      const s = model.spans[i];
      const end = s.end ?? s.cancelledAt ?? model.t1;
      const outcome = s.outcome || (s.cancelledAt ? "cancelled" : "open");
      const label = s.kind + " " + s.name + " — " +
        outcome + ", " + duration(end - s.start) +
        (s.attempt ? ", attempt " + s.attempt : "");
      const bar = h("div", { class: "tl-bar tl-" + outcome,
        title: label + (s.notes.length ? "\n" + s.notes.join("\n") : "") });
      place(bar, s.start, end);
      const parts = [bar];
      if (s.run) {
        bar.classList.add("tl-queued");
        const ran = h("div", { class: "tl-bar tl-ran tl-" + (s.outcome || "open"),
          title: "ran " + duration(s.run[1] - s.run[0]) + " (worker)" });
        place(ran, s.run[0], s.run[1]);
        parts.push(ran);
      }
      if (s.cancelledAt) {
        const xmark = h("div", { class: "tl-x", title: s.notes.join("\n") }, "✕");
        xmark.style.left = x(s.cancelledAt) + "%";
        parts.push(xmark);
      }
      const row = h("div", { class: "tl-row", "data-span": String(s.id) },
        h("div", { class: "tl-label" }, label), h("div", { class: "tl-track" }, parts));
      row.style.top = i * ROW + "px";
      rows.push(row);
    }
    const lines = model.marks.map((m) => {
      const line = h("div", { class: "tl-line" });
      line.style.left = "calc(16rem + (100% - 16rem) * " + x(m.at) / 100 + ")";
      return line;
    });
    inner.replaceChildren(...rows, ...lines);
  }

  function draw() {
    inner.style.height = model.spans.length * ROW + "px";
    strip.replaceChildren(...model.marks.map((m) => {
      const mark = h("div", { class: "tl-mark" },
        m.what + (m.by ? " by " + m.by : "") + (m.reason ? " — \"" + m.reason + "\"" : "") +
        " at +" + duration(m.at - model.t0));
      mark.style.left = "calc(16rem + (100% - 16rem) * " + x(m.at) / 100 + ")";
      if (x(m.at) > 50) mark.classList.add("tl-mark-left"); // label before the line
      return mark;
    }));
    note.textContent = model.spans.length + (model.spans.length === 1 ? " row, " : " rows, ") +
      duration(model.t1 - model.t0) + " from the start" +
      (model.truncated ? " (history cut at " + model.events + " events)" : "");
    drawRows();
  }
  scroller.addEventListener("scroll", () => requestAnimationFrame(drawRows));

  async function load(info) {
    const events = [];
    let after = 0;
    let pages = 0;
    let truncated = false;
    for (;;) {
      const p = await get("history?" + query({ ref, after, limit: 1000 }));
      events.push(...p.events);
      if (!p.next_after) break;
      if (++pages >= MAX_PAGES) { truncated = true; break; }
      after = p.next_after;
    }
    const { spans, marks } = spansOf(events);
    const t0 = events.length ? events[0].timestamp_ms : Date.now();
    const ends = spans.flatMap((s) => [s.start, s.end || 0, s.run ? s.run[1] : 0])
      .concat(marks.map((m) => m.at), events.map((e) => e.timestamp_ms));
    let t1 = ends.reduce((a, b) => Math.max(a, b), t0 + 1);
    if (!info.finished_at_ms) t1 = Math.max(t1, Date.now());
    model = { spans, marks, t0, t1, truncated, events: events.length };
    draw();
  }
  return { el, load };
}
