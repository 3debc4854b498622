// list.js - the instances page: counts by status (which are filters),
// filters kept in the URL ("#/?status=&name=&id_prefix=&created_after=
// &created_before=&limit=&cursor="; times in UTC, as everywhere on the
// page), the table with a checkbox per row, keyset paging with the API's
// cursor (the URL's "cursor" is the trail of the pages' cursors, so that
// a reload or Back returns to the same page and Previous still works),
// auto-refresh every 2 s while the tab is visible and nothing is selected
// and neither the pointer nor the focus is in the table (rows never move
// under them; the counts go on), and the bulk actions of bulk.js over the
// selection or over everything matching the filter the form shows.
import { h, get, query, say, time, idText, idPlain, staleBanner, STATUSES } from "./dom.js";
import { bulkBar } from "./bulk.js";

const KEYS = ["status", "name", "id_prefix", "created_after", "created_before", "limit"];

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
  const statusSel = h("select", { id: "f-status", name: "status" },
    h("option", { value: "" }, "any"),
    STATUSES.map((s) => h("option", { value: s, selected: s === filters.status }, s)),
    // a list from the URL ("pending,running") stays what the form shows
    filters.status && !STATUSES.includes(filters.status)
      ? h("option", { value: filters.status, selected: true }, filters.status) : null);
  const name = h("input", { id: "f-name", name: "name", value: filters.name,
    autocomplete: "off" });
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
  const current = () => ({ status: statusSel.value, name: name.value,
    id_prefix: prefix.value, created_after: formTime(after, "created_after"),
    created_before: formTime(before, "created_before"), limit: filters.limit });
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
  h("label", { for: "f-status" }, "Status "), statusSel,
  h("label", { for: "f-name" }, "Name "), name,
  h("label", { for: "f-prefix" }, "Id prefix "), prefix,
  h("label", { for: "f-after" }, "Created from (UTC) "), after,
  h("label", { for: "f-before" }, "to (UTC) "), before,
  range,
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
  // Paging keeps the selection: the URL is replaced, not routed again.
  const paged = () => {
    history.replaceState(null, "", "#/?" + query(Object.assign({}, filters,
      { cursor: cursors.slice(1).join(",") })));
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
  h("caption", {}, "Instances"),
  h("thead", {}, h("tr", {},
    h("th", { scope: "col" }, allOnPage),
    ["Id", "Name", "Status", "Created (UTC)", "Updated (UTC)"].map((c) =>
      h("th", { scope: "col" }, c)))),
  rows);
  const stale = staleBanner(() => [counts, table]);

  view.append(
    h("section", { "aria-label": "Counts by status" }, counts),
    form,
    h("p", { class: "bulk-actions" }, matching),
    bulk.el,
    allMatching,
    stale.el,
    table,
    h("p", { class: "pager" }, prev, " ", next, " ",
      h("label", {}, auto, " Refresh every 2 s"), " ", pauseText),
    bulk.dialog);

  async function summary() {
    const s = await get("summary");
    readOnly = !!s.read_only;
    matching.hidden = readOnly;
    const items = STATUSES.map((st) => {
      const on = filters.status === st;
      return h("li", {}, h("button", {
        type: "button", class: "count st-" + st, "data-status": st,
        "aria-pressed": on ? "true" : "false", "data-key": "count:" + st,
        onclick: () => go(Object.assign({}, filters, { status: on ? "" : st })),
      }, h("span", { class: "n" }, String(s.counts[st] || 0)), " ", st));
    });
    replaceKeepingFocus(counts, items);
  }

  async function page() {
    const cursor = cursors[cursors.length - 1];
    const p = await get("instances?" + query(Object.assign({}, filters,
      { limit: filters.limit || 50, cursor })));
    shown = p.instances.map((i) => i.ref);
    const made = p.instances.map((i) => h("tr", { "data-ref": i.ref, "data-id": i.id },
      h("td", {}, h("input", { type: "checkbox", "data-key": "sel:" + i.ref,
        "aria-label": "Select " + idPlain(i.id),
        onchange: (ev) => {
          if (ev.target.checked) selection.set(i.ref, i.id);
          else selection.delete(i.ref);
          sync();
        } })),
      h("td", { class: "id" },
        h("a", { href: "#/instance?" + query({ ref: i.ref }), "data-key": "open:" + i.ref },
        idText(i.id))),
      h("td", {}, i.name || ""),
      h("td", { class: "status st-" + i.status },
        i.status + (i.cancelling ? " (cancelling)" : "")),
      h("td", {}, time(i.created_at)),
      h("td", {}, time(i.updated_at))));
    if (p.instances.length === 0) {
      made.push(h("tr", {}, h("td", { colspan: "6" }, "No instances match.")));
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
