// list.js - the instances page: counts by status (which are filters),
// filters kept in the URL ("#/?status=&name=&id_prefix=&limit="), the table,
// keyset paging with the API's cursor, auto-refresh every 2 s while the
// tab is visible.
import { h, get, query, say, time, STATUSES } from "./dom.js";

function filtersFrom(params) {
  return {
    status: params.get("status") || "",
    name: params.get("name") || "",
    id_prefix: params.get("id_prefix") || "",
    limit: params.get("limit") || "",
  };
}

function go(filters) {
  location.hash = "#/?" + query(filters);
}

export function showList(view, params) {
  const filters = filtersFrom(params);
  const cursors = [null]; // the cursor of each page seen; last: this page
  let timer = null;

  const counts = h("ul", { class: "counts", "aria-label": "Counts by status" });
  const statusSel = h("select", { id: "f-status", name: "status" },
    h("option", { value: "" }, "any"),
    STATUSES.map((s) => h("option", { value: s, selected: s === filters.status }, s)));
  const name = h("input", { id: "f-name", name: "name", value: filters.name,
    autocomplete: "off" });
  const prefix = h("input", { id: "f-prefix", name: "id_prefix",
    value: filters.id_prefix, autocomplete: "off" });
  const form = h("form", { class: "filters", role: "search",
    onsubmit: (ev) => {
      ev.preventDefault();
      go({ status: statusSel.value, name: name.value, id_prefix: prefix.value,
        limit: filters.limit });
    } },
  h("label", { for: "f-status" }, "Status "), statusSel,
  h("label", { for: "f-name" }, "Name "), name,
  h("label", { for: "f-prefix" }, "Id prefix "), prefix,
  h("button", { type: "submit" }, "Filter"),
  h("button", { type: "button", onclick: () => go({}) }, "Clear"));

  const rows = h("tbody", { id: "rows" });
  const prev = h("button", { type: "button", id: "prev", disabled: true,
    onclick: () => { cursors.pop(); load(); } }, "Previous page");
  const next = h("button", { type: "button", id: "next", disabled: true,
    onclick: () => { cursors.push(next.dataset.cursor); load(); } }, "Next page");
  const auto = h("input", { type: "checkbox", id: "auto", checked: true });

  view.append(
    h("section", { "aria-label": "Counts by status" }, counts),
    form,
    h("table", { id: "instances" },
      h("caption", {}, "Instances"),
      h("thead", {}, h("tr", {},
        ["Id", "Name", "Status", "Created", "Updated"].map((c) =>
          h("th", { scope: "col" }, c)))),
      rows),
    h("p", { class: "pager" }, prev, " ", next, " ",
      h("label", {}, auto, " Refresh every 2 s")));

  async function summary() {
    const s = await get("summary");
    const items = STATUSES.map((st) => {
      const on = filters.status === st;
      return h("li", {}, h("button", {
        type: "button", class: "count st-" + st, "data-status": st,
        "aria-pressed": on ? "true" : "false",
        onclick: () => go(Object.assign({}, filters, { status: on ? "" : st })),
      }, h("span", { class: "n" }, String(s.counts[st] || 0)), " ", st));
    });
    counts.replaceChildren(...items);
  }

  async function page() {
    const cursor = cursors[cursors.length - 1];
    const p = await get("instances?" + query(Object.assign({}, filters,
      { limit: filters.limit || 50, cursor })));
    rows.replaceChildren(...p.instances.map((i) => h("tr", { "data-ref": i.ref },
      h("td", { class: "id" },
        h("a", { href: "#/instance?" + query({ ref: i.ref }) }, i.id)),
      h("td", {}, i.name || ""),
      h("td", { class: "status st-" + i.status },
        i.status + (i.cancelling ? " (cancelling)" : "")),
      h("td", {}, time(i.created_at)),
      h("td", {}, time(i.updated_at)))));
    if (p.instances.length === 0) {
      rows.append(h("tr", {}, h("td", { colspan: "5" }, "No instances match.")));
    }
    prev.disabled = cursors.length <= 1;
    next.disabled = !p.next_cursor;
    if (p.next_cursor) next.dataset.cursor = p.next_cursor;
  }

  async function load() {
    try {
      await Promise.all([summary(), page()]);
    } catch (e) {
      say(e.message, true);
    }
  }

  load();
  timer = setInterval(() => {
    if (!document.hidden && auto.checked) load();
  }, 2000);
  return () => clearInterval(timer);
}
