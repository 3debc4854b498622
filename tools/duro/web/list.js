// list.js - the instances page: counts by status (which are filters; they
// count what the rest of the filter selects) and "need attention" (failed,
// or live with a problem a runtime recorded), the number of matches,
// filters kept in the URL ("#/?status=a,b&name=|name_prefix=|name_contains=
// &id_prefix=&created_after=&created_before=&attention=&order=&limit=
// &cursor="; times in UTC, as everywhere on the page, each with its age),
// the order (by id, newest created, recently updated), the page size, a
// skip link to the table, the table
// with a checkbox and the last problem per row (stacked cards on a narrow
// screen), each instance's link carrying this page's URL (its "←
// Instances" returns here), keyset paging with the API's
// cursor (the URL's "cursor" is the trail of the pages' cursors, so that
// a reload or Back returns to the same page and Previous still works),
// auto-refresh every 2 s while the tab is visible and nothing is selected
// and neither the pointer nor the focus is in the table (rows never move
// under them; the counts go on), and the bulk actions of bulk.js over the
// selection or over everything matching the filter the form shows.
import { h, get, query, say, userText, userPlain, staleBanner, STATUSES } from "./dom.js";
import { when } from "./fmt.js";
import { listNav } from "./actions.js";
import { bulkBar } from "./bulk.js";

const KEYS = ["status", "name", "name_prefix", "name_contains", "id_prefix", "created_after",
  "created_before", "attention", "order", "limit"];

// How the name field matches: its URL key for each mode.
const NAME_MODES = [["name", "is"], ["name_prefix", "starts with"],
  ["name_contains", "contains"]];
const ORDERS = [["", "by id"], ["created", "newest first"], ["updated", "recently changed"]];
const SIZES = ["20", "50", "100", "200", "500"];

// The characters of a problem shown in a row (the whole in its title).
const PROBLEM_SHOWN = 160;

const RANGES = [
  ["", "any time"],
  ["3600000", "last hour"],
  ["86400000", "last 24 hours"],
  ["604800000", "last 7 days"],
];

function filtersFrom(params) {
  const f = {};
  for (const k of KEYS) f[k] = params.get(k) || "";
  return f;
}

function go(filters) {
  location.hash = "#/?" + query(filters);
}

// Set by a bulk button pressed while the form differed from the applied
// filter: the page built for the form's filter opens the dialog at once.
let openMatchingNext = false;

// URL time (RFC 3339 UTC or ms) <-> the value of a datetime-local input,
// which the page reads and writes as UTC (its labels say so), to the
// second.
function toUtcInput(t) {
  if (!t) return "";
  const ms = /^\d+$/.test(t) ? Number(t) : Date.parse(t);
  if (Number.isNaN(ms)) return "";
  return new Date(ms).toISOString().slice(0, 19);
}
function fromUtcInput(v) {
  if (!v) return "";
  const ms = Date.parse((v.length === 16 ? v + ":00" : v) + "Z");
  return Number.isNaN(ms) ? "" : new Date(ms).toISOString().replace(".000Z", "Z");
}

export function showList(view, params) {
  const filters = filtersFrom(params);
  // the cursor of each page seen; last: this page's (the URL's trail)
  const cursors = [null, ...(params.get("cursor") || "").split(",").filter(Boolean)];
  const selection = new Map(); // ref -> id, kept across pages
  let timer = null;
  let shown = []; // refs of the rows on this page
  let readOnly = false;
  let hasNext = false;

  const counts = h("ul", { class: "counts", "aria-label": "Counts by status" });
  // several statuses at once: none checked is any
  const picked = new Set((filters.status || "").split(",").filter(Boolean));
  const statusBoxes = STATUSES.map((st) => h("input", { type: "checkbox", value: st,
    id: "f-st-" + st, checked: picked.has(st) }));
  const statusSel = h("fieldset", { id: "f-status", class: "statuses" },
    h("legend", {}, "Status"),
    statusBoxes.map((b) => h("span", { class: "st-box" }, b, " ",
      h("label", { for: b.id }, b.value))));
  const statusValue = () => statusBoxes.filter((b) => b.checked).map((b) => b.value).join(",");
  const nameKey = NAME_MODES.find(([k]) => filters[k])?.[0] || "name";
  const nameMode = h("select", { id: "f-name-mode", "aria-label": "Name matches" },
    NAME_MODES.map(([k, text]) => h("option", { value: k, selected: k === nameKey }, text)));
  const name = h("input", { id: "f-name", name: "name", value: filters[nameKey],
    autocomplete: "off" });
  const order = h("select", { id: "f-order" },
    ORDERS.map(([v, text]) => h("option", { value: v, selected: v === filters.order }, text)));
  const size = h("select", { id: "f-limit" },
    SIZES.map((v) => h("option", { value: v, selected: v === (filters.limit || "50") },
      v + " a page")));
  const prefix = h("input", { id: "f-prefix", name: "id_prefix",
    value: filters.id_prefix, autocomplete: "off" });
  const after = h("input", { id: "f-after", type: "datetime-local", step: "1",
    value: toUtcInput(filters.created_after) });
  const before = h("input", { id: "f-before", type: "datetime-local", step: "1",
    value: toUtcInput(filters.created_before) });
  const range = h("select", { id: "f-range", "aria-label": "Created in the last" },
    RANGES.map(([v, text]) => h("option", { value: v }, text)));
  // The form's filter; a time the form shows as the URL's is the URL's
  // (which may hold milliseconds the input cannot).
  const formTime = (input, k) => (input.value === toUtcInput(filters[k]) ? filters[k]
    : fromUtcInput(input.value));
  const current = () => {
    const f = {};
    for (const k of KEYS) f[k] = filters[k];
    f.status = statusValue();
    for (const [k] of NAME_MODES) f[k] = k === nameMode.value ? name.value : "";
    f.id_prefix = prefix.value;
    f.created_after = formTime(after, "created_after");
    f.created_before = formTime(before, "created_before");
    // an id prefix lists by id only
    f.order = prefix.value ? "" : order.value;
    f.limit = size.value === "50" && !filters.limit ? "" : size.value;
    return f;
  };
  order.disabled = !!filters.id_prefix;
  if (order.disabled) order.title = "an id prefix lists by id";
  const applied = () => query(Object.assign({}, filters));
  const formDiffers = () => query(current()) !== applied();
  range.addEventListener("change", () => {
    if (!range.value) return;
    const from = new Date(Date.now() - Number(range.value)).toISOString()
      .replace(/\.\d{3}Z$/, "Z");
    go(Object.assign(current(), { created_after: from, created_before: "" }));
  });
  const form = h("form", { class: "filters", role: "search",
    onsubmit: (ev) => { ev.preventDefault(); go(current()); } },
  // each label with its control, so that they wrap together
  statusSel,
  h("span", { class: "field" }, h("label", { for: "f-name" }, "Name "), nameMode, name),
  h("span", { class: "field" }, h("label", { for: "f-prefix" }, "Id prefix "), prefix),
  h("span", { class: "field" }, h("label", { for: "f-after" }, "Created from (UTC) "), after),
  h("span", { class: "field" }, h("label", { for: "f-before" }, "to (UTC) "), before),
  range,
  h("span", { class: "field" }, h("label", { for: "f-order" }, "Order "), order),
  h("span", { class: "field" }, h("label", { for: "f-limit" }, "Show "), size),
  h("button", { type: "submit" }, "Filter"),
  h("button", { type: "button", onclick: () => go({}) }, "Clear"));

  const bulk = bulkBar(selection, () => filters, (reload) => {
    if (reload) counted = false;
    sync();
    if (reload) load();
  });
  // What is previewed is what the form shows: a form not applied yet is
  // applied first (as Filter does), and the new page opens the dialog.
  function openMatching() {
    // a half-typed time reads as "" (no bound): never widen the filter so
    const bad = [after, before].find((i) => i.validity.badInput);
    if (bad) {
      say("Finish or clear the time in “" + bad.labels[0].textContent.trim() +
        "” first: the dialog cancels what the form shows.", true);
      bad.focus();
      return;
    }
    const hash = "#/?" + query(current());
    if (formDiffers() && location.hash !== hash) {
      openMatchingNext = true;
      location.hash = hash; // hashchange: route() builds the page anew
    } else {
      bulk.openMatching();
    }
  }
  const matching = h("button", { type: "button", id: "cancel-matching",
    onclick: openMatching }, "Cancel all matching…");
  const allOnPage = h("input", { type: "checkbox", id: "select-page",
    "aria-label": "Select every instance on this page",
    onchange: () => {
      for (const tr of rows.querySelectorAll("tr[data-ref]")) {
        if (allOnPage.checked) selection.set(tr.dataset.ref, tr.dataset.id);
        else selection.delete(tr.dataset.ref);
      }
      sync();
    } });
  const matchingText = h("span", { id: "matching-count" }, "all");
  const allMatching = h("p", { id: "select-all-matching", class: "bulk-more", hidden: true },
    "Every instance on this page is selected. ",
    h("button", { type: "button", class: "link", onclick: openMatching },
      "Cancel ", matchingText, " pending or running instances matching the filter…"));
  let counted = false; // matchingText holds the count of a dry run
  async function countMatching() {
    counted = true;
    try {
      const n = await bulk.countMatching();
      matchingText.textContent = n === null ? "all" : "all " + n;
      if (n !== null) matchingText.dataset.matched = String(n);
    } catch (e) {
      counted = false; // try again on the next refresh
    }
  }

  const rows = h("tbody", { id: "rows" });
  // "51–100 of 1,234 matching": the page's place and the number of matches
  const matches = h("span", { id: "matches", class: "matches", role: "status" });
  let total = null; // matches, from the counts ({n, capped})
  let onPage = 0;
  const limit = Number(filters.limit || 50);
  function showMatches() {
    const first = (cursors.length - 1) * limit;
    const place = onPage > 0 ? (first + 1) + "–" + (first + onPage) : "none";
    matches.textContent = total === null ? "" : "· " + place + " of " +
      total.n.toLocaleString("en-US") + (total.capped ? "+" : "") + " matching";
    if (total !== null) matches.dataset.total = String(total.n);
  }
  // This page's state (filters and the trail of cursors), as in its URL.
  const listQuery = () => query(Object.assign({}, filters,
    { cursor: cursors.slice(1).join(",") }));
  // Paging keeps the selection: the URL is replaced, not routed again.
  const paged = () => {
    history.replaceState(null, "", "#/?" + listQuery());
    load();
  };
  const prev = h("button", { type: "button", id: "prev", disabled: cursors.length <= 1,
    onclick: () => { cursors.pop(); paged(); } }, "Previous page");
  const next = h("button", { type: "button", id: "next", disabled: true,
    onclick: () => { cursors.push(next.dataset.cursor); paged(); } }, "Next page");
  const auto = h("input", { type: "checkbox", id: "auto", checked: true,
    onchange: () => paused() });
  const pauseText = h("span", { id: "refresh-paused", role: "status" });

  // The checkboxes, the bar and "select all matching" agree with selection.
  function sync() {
    for (const box of rows.querySelectorAll("input[data-key]")) {
      box.checked = selection.has(box.closest("tr").dataset.ref);
    }
    const all = shown.length > 0 && shown.every((r) => selection.has(r));
    allOnPage.checked = all;
    allOnPage.indeterminate = !all && shown.some((r) => selection.has(r));
    allMatching.hidden = !(all && hasNext) || readOnly;
    if (!allMatching.hidden && !counted) countMatching();
    bulk.update(readOnly);
    paused();
  }

  // Rows must not move under the user: while anything is selected, or the
  // pointer or the focus is in the table, the rows are not refreshed.
  function paused() {
    const why = selection.size > 0 ? selection.size + " selected"
      : table.matches(":hover") ? "the pointer is on the table"
        : table.contains(document.activeElement) ? "the focus is in the table" : "";
    pauseText.textContent = auto.checked && why
      ? "Rows paused while " + why + " (counts still refresh)." : "";
    return why !== "";
  }

  const table = h("table", { id: "instances",
    onmouseenter: () => setTimeout(paused, 0),
    onmouseleave: () => setTimeout(paused, 0),
    onfocusin: () => paused(),
    onfocusout: () => setTimeout(paused, 0) },
  h("caption", {}, filters.attention ? "Instances that need attention" : "Instances",
    " ", matches),
  h("thead", {}, h("tr", {},
    h("th", { scope: "col" }, allOnPage),
    COLUMNS.map((c) => h("th", { scope: "col" }, c)))),
  rows);
  table.setAttribute("tabindex", "-1");
  const stale = staleBanner(() => [counts, table]);
  // Past the counts and the filter form, straight to the rows.
  const skip = h("a", { href: "#instances", class: "skip", id: "skip-to-table",
    onclick: (ev) => {
      ev.preventDefault(); // the fragment routes: never navigate
      const first = rows.querySelector("a");
      (first || table).focus();
    } }, "Skip to the instances");
  const attentionNote = h("p", { id: "attention-note", class: "attention-note",
    hidden: !filters.attention },
  "Needs attention: failed instances, and pending, running or suspended ones " +
    "whose runtime recorded a problem (it cannot make progress with them). ",
  h("a", { href: "#/?" + query(Object.assign({}, filters, { attention: "" })) },
    "Show every instance"));

  view.append(
    skip,
    listNav("instances"),
    h("section", { "aria-label": "Counts by status" }, counts),
    attentionNote,
    form,
    h("p", { class: "bulk-actions" }, matching),
    bulk.el,
    allMatching,
    stale.el,
    table,
    h("p", { class: "pager" }, prev, " ", next, " ",
      h("label", {}, auto, " Refresh every 2 s"), " ", pauseText),
    bulk.dialog);

  // The filter but its status (what the counts count), and whether it
  // filters anything.
  const countFilter = () => {
    const f = {};
    for (const k of ["name", "name_prefix", "name_contains", "id_prefix", "created_after",
      "created_before", "attention"]) f[k] = filters[k];
    return f;
  };
  const filtered = Object.values(countFilter()).some(Boolean);
  // Filtered counts may read every match: asked again after 2 s, or ten
  // times as long as they took.
  let counts2 = null;
  let countsAt = 0;
  let countsCost = 0;
  async function filteredCounts() {
    if (!filtered) return null;
    if (counts2 && Date.now() - countsAt < Math.max(2000, 10 * countsCost)) return counts2;
    const t0 = Date.now();
    counts2 = await get("counts?" + query(countFilter()));
    countsCost = Date.now() - t0;
    countsAt = Date.now();
    return counts2;
  }

  async function summary() {
    const [s, c] = await Promise.all([get("summary"), filteredCounts()]);
    readOnly = !!s.read_only;
    matching.hidden = readOnly;
    const by = c ? c.counts : s.counts;
    const chosen = (filters.status || "").split(",").filter(Boolean);
    total = { n: chosen.length ? chosen.reduce((n, st) => n + (by[st] || 0), 0)
      : c ? c.total : s.total, capped: !!(c && c.total_capped) };
    showMatches();
    counts.setAttribute("aria-label", filtered ? "Counts by status, in this filter"
      : "Counts by status");
    const items = STATUSES.map((st) => {
      const on = chosen.includes(st);
      // a count adds its status to the filter, or takes it out
      const status = on ? chosen.filter((x) => x !== st) : [...chosen, st];
      return h("li", {}, h("button", {
        type: "button", class: "count st-" + st, "data-status": st,
        "aria-pressed": on ? "true" : "false", "data-key": "count:" + st,
        onclick: () => go(Object.assign({}, filters,
          { status: STATUSES.filter((x) => status.includes(x)).join(",") })),
      }, h("span", { class: "n" }, String(by[st] || 0)), " ", st));
    });
    // failed, and live with a recorded problem (the summary's "stuck")
    const stuck = (s.stuck || []).reduce((n, x) => n + x.count, 0);
    const need = (s.counts.failed || 0) + stuck;
    const on = !!filters.attention;
    items.unshift(h("li", {}, h("button", {
      type: "button", class: "count attention" + (need > 0 ? " has" : ""),
      id: "attention", "data-key": "count:attention", "data-stuck": String(stuck),
      "aria-pressed": on ? "true" : "false",
      title: stuck + " stuck (a runtime recorded a problem), " +
        (s.counts.failed || 0) + " failed",
      onclick: () => go(Object.assign({}, filters, { attention: on ? "" : "1" })),
    }, h("span", { class: "n" }, String(need)), " need attention")));
    replaceKeepingFocus(counts, items);
  }

  async function page() {
    const cursor = cursors[cursors.length - 1];
    const p = await get("instances?" + query(Object.assign({}, filters,
      { limit: filters.limit || 50, cursor })));
    shown = p.instances.map((i) => i.ref);
    onPage = p.instances.length;
    showMatches();
    const from = listQuery();
    const now = Date.now();
    const made = p.instances.map((i) => h("tr", { "data-ref": i.ref, "data-id": i.id },
      h("td", { class: "sel" }, h("input", { type: "checkbox", "data-key": "sel:" + i.ref,
        "aria-label": "Select " + userPlain(i.id),
        onchange: (ev) => {
          if (ev.target.checked) selection.set(i.ref, i.id);
          else selection.delete(i.ref);
          sync();
        } })),
      h("td", { class: "id", "data-label": "Id" },
        h("a", { href: "#/instance?" + query({ ref: i.ref, from }), "data-key": "open:" + i.ref },
          userText(i.id))),
      h("td", { "data-label": "Name" }, i.name ? userText(i.name) : ""),
      h("td", { class: "status st-" + i.status, "data-label": "Status" },
        i.status + (i.cancelling ? " (cancelling)" : "")),
      h("td", { "data-label": "Created" }, when(i.created_at, i.created_at_ms, now)),
      h("td", { "data-label": "Updated" }, when(i.updated_at, i.updated_at_ms, now)),
      problemCell(i)));
    if (p.instances.length === 0) {
      made.push(h("tr", {}, h("td", { colspan: String(COLUMNS.length + 1) },
        filters.attention ? "No instance needs attention." : "No instances match.")));
    }
    replaceKeepingFocus(rows, made);
    prev.disabled = cursors.length <= 1;
    hasNext = !!p.next_cursor;
    next.disabled = !hasNext;
    if (p.next_cursor) next.dataset.cursor = p.next_cursor;
    sync();
  }

  // @p rowsToo false: the counts only (the rows are paused).
  async function load(rowsToo = true) {
    try {
      await Promise.all([summary(), rowsToo ? page() : null]);
      stale.ok();
    } catch (e) {
      stale.fail(e);
    }
  }

  load();
  if (openMatchingNext) {
    openMatchingNext = false;
    bulk.openMatching();
  }
  timer = setInterval(() => {
    if (document.hidden || !auto.checked || bulk.dialog.open ||
      document.querySelector("dialog[open]")) return;
    load(!paused());
  }, 2000);
  return () => clearInterval(timer);
}

const COLUMNS = ["Id", "Name", "Status", "Created (UTC)", "Updated (UTC)", "Last problem"];

// What is wrong with an instance: the problem a runtime recorded, else a
// failed one's error; cut to PROBLEM_SHOWN characters (the whole in the
// title).
function problemCell(i) {
  const text = i.last_problem || (i.status === "failed" ? i.error : "") || "";
  const td = h("td", { class: "problem", "data-label": "Last problem" });
  if (!text) return td;
  const cut = text.length > PROBLEM_SHOWN ? text.slice(0, PROBLEM_SHOWN) + "…" : text;
  td.append(userText(cut));
  td.setAttribute("title", userPlain(text));
  return td;
}

// Replaces @p parent's children; the element that had the focus (found
// again by its data-key) gets it back, so a refresh does not lose it.
function replaceKeepingFocus(parent, children) {
  const a = document.activeElement;
  const key = a && parent.contains(a) ? a.dataset.key : null;
  parent.replaceChildren(...children);
  if (key) {
    const again = [...parent.querySelectorAll("[data-key]")].find((e) => e.dataset.key === key);
    if (again) again.focus();
  }
}
