// timeline.js - the timeline of one execution: one row per activity call,
// timer, child orchestration and event wait, under an axis of offsets from
// the start, with zoom (−, +, ◀, ▶, Fit buttons; ctrl+wheel over the rows).
// Owns its section of the page; runs on the page's thread.
//
// Rows. A row's bar runs from the scheduling event to the one that ended
// it; an activity whose worker recorded started/finished times shows a
// hatched "queued" part and a solid "ran" part. A cancel or terminate
// request is a marked moment (reason, requester) above the rows and a
// dashed line through them; every activity or child it cut carries a ✕
// with its own reason (ActivityCancelRequested, SubOrchestrationCancel-
// Requested). A patch marker (duro_patched took a change's new path) is a
// marked moment too, named by its change id, and so is the ExecutionReset
// that began a reset or rewound execution (its requester and reason). A
// timer that never fired in a finished execution shows as "not fired"
// (the history records no timer cancellation).
//
// Retries. A call under a retry policy records one ActivityScheduled per
// attempt, with attempt = 1, 2, 3..., and nothing linking the attempts of
// one call; a plain call records attempt 1 as well, so the two look alike
// until an attempt 2 comes. Attempt 1 opens a row; attempt k >= 2 joins a
// row of the same activity name whose last attempt is k-1 and ended failed
// or cancelled (an attempt timeout cancels it, reason select_loser). With
// several such rows (parallel calls of one name), it joins the one whose
// attempt k-1 ended first, ties broken by history order: first failed,
// first retried. That is exact when those calls share one retry policy
// (the same backoff after the same attempt); with different policies, or
// a failed plain call of the same name among them, attempts may land on
// the wrong row of that name. Without any such row (a cut history) attempt
// k opens a row of its own. A row of several attempts draws one segment
// per attempt, with its outcome and its queued/ran parts, titled
// "attempt k: failed: <error>"; the gap between two segments (the
// backoff) is a dotted line. Backoff and attempt-timeout timers stay rows
// of their own: a TimerCreated names no call, so folding them in would be
// a guess, and a user's timer guessed wrong would vanish.
//
// Loading. The history is read in pages of 1000 once, then only the
// events after the last one read when history_count grows (the page
// calls load() on every refresh; nothing is read while it is unchanged);
// rows are updated event by event. A new execution (continue-as-new)
// starts over. At most MAX_EVENTS events are read; the note line says
// when the history was cut.
//
// Drawing. Only the rows in view (and OVERSCAN more each side) are in the
// DOM. Bars are placed with el.style (CSSOM), which the CSP allows, and
// clipped to the view in JS so zoomed widths stay small numbers. Every
// string from the store goes through h() (textContent/setAttribute).
import { h, get, query, time, userText, userPlain } from "./dom.js";

const ROW = 24; // px per row
const OVERSCAN = 10; // rows drawn above and below the view
const PAGE = 1000; // events per history request (the API's maximum)
const MAX_EVENTS = 50000; // events read at most (the runtime's default max_history_events)
const MIN_VIEW = 10; // ms: the narrowest zoom

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
const CUTS = new Set(["ActivityCancelRequested", "SubOrchestrationCancelRequested"]);
const MARKS = {
  OrchestrationCancelRequested: "cancel requested",
  OrchestrationTerminated: "terminated",
  PatchMarker: "patch",
  ExecutionReset: "reset", // where a reset or rewind took this execution on
};

// A queue whose shift() is O(1).
class Fifo {
  constructor() { this.items = []; this.head = 0; }
  push(v) { this.items.push(v); }
  shift() {
    if (this.head >= this.items.length) return undefined;
    const v = this.items[this.head++];
    if (this.head > 1024 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return v;
  }
}

function take(map, key) {
  const q = map.get(key);
  return q ? q.shift() : undefined;
}

function put(map, key, v) {
  if (!map.has(key)) map.set(key, new Fifo());
  map.get(key).push(v);
}

// The rows and marks of one execution, built event by event: add() takes
// the next events in history order, so a grown history costs only its new
// events. A row is {id, index, kind, name, detail, segs}; a segment
// (one attempt, or the whole span of anything else) is {id, attempt,
// start, end, run, outcome, error, cancelledAt, cancelReason, fireAt}.
export class Spans {
  constructor(execution) {
    this.execution = execution;
    this.rows = [];
    this.marks = [];
    this.count = 0; // events read
    this.lastId = 0; // event_id of the last one
    this.t0 = null; // first event's time
    this.t1 = null; // latest time seen in any event
    this.bySource = new Map(); // scheduling event id -> segment
    this.retries = new Map(); // name + "\n" + next attempt -> rows waiting for it
    this.waits = new Map(); // event name -> open event waits, oldest first
    this.unclaimed = new Map(); // event name -> raised events no wait took yet
  }

  add(events) {
    for (const e of events) {
      if (e.event_id <= this.lastId) continue;
      this.lastId = e.event_id;
      this.count++;
      const t = e.timestamp_ms;
      if (this.t0 === null) this.t0 = t;
      this.t1 = Math.max(this.t1 ?? t, t, e.finished_ms || 0);
      if (OPENS[e.kind]) this.open(e, OPENS[e.kind], t);
      else if (CLOSES[e.kind]) this.close(e, t);
      else if (CUTS.has(e.kind)) this.cut(e, t);
      else if (e.kind === "EventRaised") this.raised(e, t);
      else if (MARKS[e.kind]) {
        const what = e.kind === "PatchMarker" ? "patch " + (e.name || "") : MARKS[e.kind];
        this.marks.push({ at: t, what, by: e.requested_by || "",
          reason: e.reason || "" });
      }
    }
  }

  open(e, kind, t) {
    const seg = { id: e.event_id, attempt: e.attempt || null, start: t, end: null,
      run: null, outcome: null, error: "", cancelledAt: null, cancelReason: "",
      fireAt: e.fire_at_ms || null };
    let name = e.name || "";
    let detail = "";
    if (kind === "timer") {
      name = (e.cleanup_deadline ? "cleanup deadline " : "") +
        (seg.fireAt ? duration(seg.fireAt - t) : "");
      detail = "fires at " + time(e.fire_at);
    } else if (kind === "child" && e.ref_instance) {
      detail = "child instance " + e.ref_instance;
    }
    this.bySource.set(e.event_id, seg);
    let row = kind === "activity" && seg.attempt > 1 ?
      take(this.retries, name + "\n" + seg.attempt) : undefined;
    if (!row) {
      row = { id: e.event_id, index: this.rows.length, kind, name, detail, segs: [] };
      this.rows.push(row);
    }
    row.segs.push(seg);
    seg.row = row;
    if (kind === "event") {
      const early = take(this.unclaimed, name);
      if (early) { // raised before this wait: taken at once
        seg.end = t;
        seg.outcome = "raised";
      } else {
        put(this.waits, name, seg);
      }
    }
  }

  // An attempt that ended failed or cancelled: its row waits for the next.
  retryable(seg) {
    if (seg.attempt === null || seg.waiting) return;
    seg.waiting = true;
    put(this.retries, seg.row.name + "\n" + (seg.attempt + 1), seg.row);
  }

  close(e, t) {
    const seg = this.bySource.get(e.source_event_id);
    if (!seg) return;
    seg.end = t;
    seg.outcome = CLOSES[e.kind];
    seg.error = e.error || "";
    if (e.started_ms && e.finished_ms) seg.run = [e.started_ms, e.finished_ms];
    if (seg.outcome === "failed") this.retryable(seg);
  }

  cut(e, t) {
    const seg = this.bySource.get(e.source_event_id);
    if (!seg) return;
    seg.cancelledAt = t;
    seg.cancelReason = e.reason || "";
    if (seg.end === null) this.retryable(seg);
  }

  raised(e, t) {
    const name = e.name || "";
    const seg = take(this.waits, name);
    if (seg) {
      seg.end = t;
      seg.outcome = "raised";
    } else {
      put(this.unclaimed, name, e.event_id);
    }
  }
}

export function duration(ms) {
  if (ms < 1000) return Math.round(ms) + " ms";
  if (ms < 60000) return (ms / 1000).toFixed(1) + " s";
  if (ms < 3600000) return (ms / 60000).toFixed(1) + " min";
  return (ms / 3600000).toFixed(1) + " h";
}

// Axis steps: round numbers of ms, s, min, h, days.
const STEPS = [1, 2, 5, 10, 20, 50, 100, 200, 500,
  1e3, 2e3, 5e3, 1e4, 15e3, 3e4,
  6e4, 12e4, 3e5, 6e5, 9e5, 18e5,
  36e5, 72e5, 108e5, 216e5, 432e5,
  864e5, 1728e5, 6048e5];

export function tickStep(span, most) {
  const want = span / Math.max(most, 1);
  for (const s of STEPS) if (s >= want) return s;
  let s = 6048e5;
  while (s < want) s *= 2;
  return s;
}

// An offset as an axis label: "+0", "+500 ms", "+1.5 s", "+1 min 30 s".
export function offsetText(ms, step) {
  if (ms === 0) return "+0";
  if (step < 1000) {
    if (ms < 1000) return "+" + ms + " ms";
    const decimals = Math.max(0, Math.ceil(-Math.log10(step / 1000) - 1e-9));
    return "+" + (ms / 1000).toFixed(decimals).replace(/\.?0+$/, "") + " s";
  }
  const parts = [];
  let rest = Math.round(ms / 1000);
  for (const [unit, n] of [["d", 86400], ["h", 3600], ["min", 60], ["s", 1]]) {
    if (rest >= n) {
      parts.push(Math.floor(rest / n) + " " + unit);
      rest %= n;
    }
  }
  return parts.length ? "+" + parts.join(" ") : "+0";
}

// What a segment's state is called and its class: completed, failed,
// fired, raised, cancelled, open (still running), not fired / unfinished
// (the execution ended first).
function outcomeOf(seg, kind, finished) {
  if (seg.outcome) return [seg.outcome, seg.outcome];
  if (seg.cancelledAt !== null) return ["cancelled", "cancelled"];
  if (!finished) return ["open", "open"];
  return kind === "timer" ? ["not fired", "unfired"] : ["unfinished", "unfired"];
}

// Builds the timeline of @p ref into a new element; returns {el, load}.
export function timeline(ref) {
  const button = (text, label, onclick) =>
    h("button", { type: "button", class: "tl-zoom", "aria-label": label, title: label,
      onclick }, text);
  const zoomOut = button("−", "Zoom out", () => zoom(2));
  const zoomIn = button("+", "Zoom in", () => zoom(0.5));
  const earlier = button("◀", "Earlier", () => pan(-0.5));
  const later = button("▶", "Later", () => pan(0.5));
  const fit = button("Fit", "Fit the whole timeline", () => { view = null; draw(); });
  const viewText = h("span", { class: "tl-view", id: "timeline-view" });
  const tools = h("div", { class: "tl-tools", role: "toolbar", "aria-label": "Timeline zoom",
    "aria-controls": "timeline-rows" }, zoomOut, zoomIn, earlier, later, fit, viewText);
  const strip = h("div", { class: "tl-marks" });
  const axis = h("div", { class: "tl-axis" });
  const markRow = h("div", { class: "tl-head-row" }, h("div", { class: "tl-gutter" }), strip);
  const head = h("div", { class: "tl-head" }, markRow,
    h("div", { class: "tl-head-row" }, h("div", { class: "tl-gutter" }, "offset"), axis));
  const rowsBox = h("div", { class: "tl-rows" });
  const lines = h("div", { class: "tl-lines" });
  const inner = h("div", { class: "tl-inner" }, rowsBox, lines);
  const scroller = h("div", { class: "tl-scroll", id: "timeline-rows", tabindex: "0",
    "aria-label": "Timeline rows (the Events table below is the same as text)" },
  head, inner);
  const note = h("p", { class: "tl-note" });
  const el = h("section", { "aria-label": "Timeline", id: "timeline" },
    h("h3", {}, "Timeline"), note, tools, scroller);

  let model = new Spans(null);
  let info = null; // the instance as last loaded
  let now = Date.now(); // "now" for open bars of a running execution
  let view = null; // [from, to] in ms when zoomed; null: fit
  let busy = false; // a load is reading pages
  let reading = null; // {read, of} while reading
  let frame = 0; // a pending requestAnimationFrame
  let drawn = false; // load() has drawn once

  const finished = () => Boolean(info && info.finished_at_ms);
  const tEnd = () => {
    const t1 = model.t1 ?? model.t0;
    return finished() ? Math.max(t1, model.t0 + 1) : Math.max(t1, now, model.t0 + 1);
  };
  // The fit view ends a little past the end, so that a bar there shows.
  const tMax = () => tEnd() + Math.max(1, (tEnd() - model.t0) * 0.02);
  const range = () => view || [model.t0, tMax()];
  // Percent of the track for time t in the current view.
  const pct = (t) => {
    const [a, b] = range();
    return ((t - a) / (b - a)) * 100;
  };
  // Places e from a to b, clipped to the view; false when all outside.
  const place = (e, a, b) => {
    const l = pct(a);
    const r = pct(b);
    if (r < 0 || l > 100) return false;
    const cl = Math.max(l, -1);
    e.style.left = cl + "%";
    e.style.width = Math.max(Math.min(r, 101) - cl, 0) + "%";
    return true;
  };

  function rowLabel(row) {
    const last = row.segs[row.segs.length - 1];
    const [outcome] = outcomeOf(last, row.kind, finished());
    const end = last.end ?? last.cancelledAt ?? (row.kind === "timer" && last.fireAt ?
      Math.min(last.fireAt, tEnd()) : tEnd());
    return row.kind + " " + row.name + " — " + outcome +
      (row.segs.length > 1 ? " after " + row.segs.length + " attempts" : "") + ", " +
      duration(end - row.segs[0].start);
  }

  function segment(row, seg, label, parts) {
    const attempts = row.segs.length > 1;
    const [outcome, cls] = outcomeOf(seg, row.kind, finished());
    let end = seg.end ?? seg.cancelledAt;
    if (end === null) end = row.kind === "timer" && seg.fireAt ? Math.min(seg.fireAt, tEnd()) : tEnd();
    const lines = [];
    if (attempts) {
      lines.push("attempt " + seg.attempt + ": " + outcome +
        (seg.error ? ": " + seg.error : "") +
        (seg.cancelledAt !== null && seg.cancelReason ? ": " + seg.cancelReason : ""));
      lines.push(duration(end - seg.start));
    } else {
      lines.push(label);
      if (seg.error) lines.push(seg.error);
    }
    if (row.detail) lines.push(row.detail);
    if (seg.run) {
      lines.push("queued " + duration(seg.run[0] - seg.start) + ", ran " +
        duration(seg.run[1] - seg.run[0]));
    }
    if (seg.cancelledAt !== null) {
      lines.push("✕ cancelled" + (seg.cancelReason ? ": " + seg.cancelReason : ""));
    }
    const bar = h("div", { class: "tl-bar tl-seg tl-" + cls,
      title: lines.map(userPlain).join("\n"),
      "data-attempt": seg.attempt === null ? null : String(seg.attempt) });
    if (!place(bar, seg.start, end)) return;
    parts.push(bar);
    if (seg.run) {
      bar.classList.add("tl-queued");
      const ran = h("div", { class: "tl-bar tl-ran tl-" + cls,
        title: (attempts ? "attempt " + seg.attempt + ": " : "") + "ran " +
          duration(seg.run[1] - seg.run[0]) + " (worker)" });
      if (place(ran, seg.run[0], seg.run[1])) parts.push(ran);
    }
    if (seg.cancelledAt !== null && pct(seg.cancelledAt) >= 0 && pct(seg.cancelledAt) <= 100) {
      const x = h("div", { class: "tl-x",
        title: "✕ cancelled" + (seg.cancelReason ? ": " + userPlain(seg.cancelReason) : "") },
      "✕");
      x.style.left = pct(seg.cancelledAt) + "%";
      parts.push(x);
    }
  }

  function drawRows() {
    frame = 0;
    const rows = model.rows;
    const first = Math.max(0, Math.floor(scroller.scrollTop / ROW) - OVERSCAN);
    const last = Math.min(rows.length,
      Math.ceil((scroller.scrollTop + scroller.clientHeight) / ROW) + OVERSCAN);
    const made = [];
    for (let i = first; i < last; i++) {
      const row = rows[i];
      const label = rowLabel(row);
      const parts = [];
      for (let k = 0; k < row.segs.length; k++) {
        const seg = row.segs[k];
        if (k > 0) { // the wait between two attempts: the backoff
          const prev = row.segs[k - 1];
          const from = prev.end ?? prev.cancelledAt ?? prev.start;
          const gap = h("div", { class: "tl-gap",
            title: "backoff " + duration(seg.start - from) + " before attempt " + seg.attempt });
          if (place(gap, from, seg.start)) parts.push(gap);
        }
        segment(row, seg, label, parts);
      }
      const r = h("div", { class: "tl-row", "data-span": String(row.id), "data-row": String(i) },
        h("div", { class: "tl-label", title: userPlain(label) }, userText(label)),
        h("div", { class: "tl-track" }, parts));
      r.style.top = i * ROW + "px";
      made.push(r);
    }
    rowsBox.replaceChildren(...made);
  }

  function drawAxis() {
    const [a, b] = range();
    const most = Math.max(2, Math.floor((axis.clientWidth || 800) / 90));
    const step = tickStep(b - a, most);
    const ticks = [];
    for (let o = Math.ceil((a - model.t0) / step) * step; model.t0 + o <= b; o += step) {
      const tick = h("div", { class: "tl-tick" }, offsetText(o, step));
      tick.style.left = pct(model.t0 + o) + "%";
      ticks.push(tick);
    }
    axis.replaceChildren(...ticks);
  }

  function draw() {
    if (model.t0 === null) {
      note.textContent = reading ? "reading the history…" : "no history yet";
      axis.replaceChildren();
      strip.replaceChildren();
      rowsBox.replaceChildren();
      return;
    }
    const [a, b] = range();
    rowsBox.style.height = model.rows.length * ROW + "px";
    const shown = model.marks.filter((m) => pct(m.at) >= 0 && pct(m.at) <= 100);
    strip.replaceChildren(...shown.map((m) => {
      const mark = h("div", { class: "tl-mark" },
        userText(m.what + (m.by ? " by " + m.by : "") +
          (m.reason ? " — \"" + m.reason + "\"" : "") + " at +" + duration(m.at - model.t0)));
      mark.style.left = pct(m.at) + "%";
      if (pct(m.at) > 50) mark.classList.add("tl-mark-left"); // label before the line
      return mark;
    }));
    markRow.hidden = model.marks.length === 0;
    lines.replaceChildren(...shown.map((m) => {
      const line = h("div", { class: "tl-line" });
      line.style.left = pct(m.at) + "%";
      return line;
    }));
    const n = model.rows.length;
    const total = info ? info.history_count : model.count;
    note.textContent = n + (n === 1 ? " row" : " rows") + " from " + model.count +
      (model.count === 1 ? " event" : " events") + ", " + duration(tEnd() - model.t0) +
      " from the start" +
      (reading ? " (reading the history: " + reading.read + " of " + reading.of + " events)" :
        model.count >= MAX_EVENTS && total > model.count ?
          " (history cut at " + model.count + " of " + total + " events)" : "");
    const fine = tickStep(b - a, 100);
    viewText.textContent = view ?
      "showing " + offsetText(Math.round(a - model.t0), fine) + " to " +
        offsetText(Math.round(b - model.t0), fine) : "showing all";
    // aria-disabled, not disabled: a button in use keeps the focus
    for (const btn of [zoomOut, earlier, later, fit]) {
      btn.setAttribute("aria-disabled", String(view === null));
    }
    zoomIn.setAttribute("aria-disabled", String(b - a <= MIN_VIEW));
    drawAxis();
    drawRows();
  }

  // Zooms by @p factor (< 1: in) around time @p at (default: the middle).
  function zoom(factor, at) {
    if (model.t0 === null) return;
    const [a, b] = range();
    const full = tMax() - model.t0;
    const c = at ?? (a + b) / 2;
    const span = Math.max((b - a) * factor, MIN_VIEW);
    if (span >= full) {
      view = null;
    } else {
      const from = c - (c - a) * (span / (b - a));
      view = clamp(from, span);
    }
    draw();
  }

  function pan(by) {
    if (!view) return;
    const [a, b] = view;
    view = clamp(a + (b - a) * by, b - a);
    draw();
  }

  function clamp(from, span) {
    const lo = model.t0;
    const hi = tMax();
    const a = Math.min(Math.max(from, lo), hi - span);
    return [a, a + span];
  }

  scroller.addEventListener("scroll", () => {
    if (!frame) frame = requestAnimationFrame(drawRows);
  });
  scroller.addEventListener("wheel", (ev) => {
    if (!ev.ctrlKey || model.t0 === null) return;
    ev.preventDefault();
    const box = axis.getBoundingClientRect();
    const [a, b] = range();
    const f = (ev.clientX - box.left) / box.width;
    zoom(ev.deltaY < 0 ? 0.5 : 2, f >= 0 && f <= 1 ? a + f * (b - a) : undefined);
  }, { passive: false });

  // Called on every refresh of the instance: reads only what is new.
  async function load(instance) {
    info = instance;
    now = Date.now();
    if (busy) return;
    busy = true;
    const was = model;
    const read = model.count;
    try {
      if (instance.execution_id !== model.execution) {
        model = new Spans(instance.execution_id);
        view = null;
      }
      let more = instance.history_count > model.count;
      while (more && model.count < MAX_EVENTS) {
        reading = { read: model.count, of: instance.history_count };
        draw();
        const p = await get("history?" + query({ ref, execution: model.execution,
          after: model.lastId, limit: Math.min(PAGE, MAX_EVENTS - model.count) }));
        if (p.execution_id !== model.execution) break; // changed under us: next refresh
        model.add(p.events);
        more = p.next_after !== null && p.next_after !== undefined;
      }
    } finally {
      busy = false;
      reading = null;
      // A finished execution that did not grow looks the same: keep its
      // DOM (and any open tooltip) as it is.
      if (!drawn || model !== was || model.count !== read || !finished()) draw();
      drawn = true;
    }
  }
  // What a live execution waits on, as text: its open rows, oldest first
  // (three named, then how many more); "" when finished or none.
  function waiting() {
    if (finished() || model.t0 === null) return "";
    const named = [];
    let count = 0;
    for (const row of model.rows) {
      const s = row.segs[row.segs.length - 1];
      if (s.end !== null || s.cancelledAt !== null) continue;
      if (++count <= 3) {
        named.push(row.kind + " " + row.name + " for " + duration(Math.max(0, now - s.start)) +
          (row.kind === "timer" && row.detail ? " (" + row.detail + ")" : ""));
      }
    }
    return named.join("; ") + (count > 3 ? "; and " + (count - 3) + " more" : "");
  }

  // The last terminate request ({by, reason, at}) or null.
  function terminated() {
    for (let i = model.marks.length - 1; i >= 0; i--) {
      if (model.marks[i].what === "terminated") return model.marks[i];
    }
    return null;
  }
  return { el, load, waiting, terminated };
}
