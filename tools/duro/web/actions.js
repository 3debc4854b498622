// actions.js - "Recent actions" ("#/actions?action=&requested_by=&limit=
// &cursor="): the cancels, terminates, suspends and resumes asked of any
// instance, newest first, with who asked and why (GET control-events),
// paged with the API's cursor (the URL keeps the trail of cursors, as the
// instances page does, so a reload or Back returns to the same page),
// refreshed every 2 s while the tab is visible and the focus is not in
// the rows. Also listNav(), the links
// between the two lists. Runs on the page's thread.
import { h, get, query, userText, staleBanner } from "./dom.js";
import { when } from "./fmt.js";

const ACTIONS = ["cancel", "terminate", "suspend", "resume"];

// The links between the instances page, this one and the schedules
// (schedules.js); @p here is the current one ("instances", "actions" or
// "schedules"), shown as text.
export function listNav(here) {
  const item = (key, href, text) => (key === here
    ? h("span", { "aria-current": "page" }, text)
    : h("a", { href, id: "nav-" + key }, text));
  return h("nav", { class: "views", "aria-label": "Views" },
    item("instances", "#/", "Instances"), " · ",
    item("actions", "#/actions", "Recent actions"), " · ",
    item("schedules", "#/schedules", "Schedules"));
}

export function showActions(view, params) {
  const filters = {
    action: params.get("action") || "",
    requested_by: params.get("requested_by") || "",
    limit: params.get("limit") || "",
  };
  const cursors = [null, ...(params.get("cursor") || "").split(",").filter(Boolean)];
  const go = (f) => { location.hash = "#/actions?" + query(f); };
  const here = () => "/actions?" + query(Object.assign({}, filters,
    { cursor: cursors.slice(1).join(",") }));

  const action = h("select", { id: "a-action" }, h("option", { value: "" }, "any"),
    ACTIONS.map((a) => h("option", { value: a, selected: a === filters.action }, a)));
  const by = h("input", { id: "a-by", value: filters.requested_by, autocomplete: "off",
    placeholder: "user:alice" });
  const form = h("form", { class: "filters", role: "search",
    onsubmit: (ev) => {
      ev.preventDefault();
      go({ action: action.value, requested_by: by.value, limit: filters.limit });
    } },
  h("span", { class: "field" }, h("label", { for: "a-action" }, "Action "), action),
  h("span", { class: "field" }, h("label", { for: "a-by" }, "Requested by (exactly) "), by),
  h("button", { type: "submit" }, "Filter"),
  h("button", { type: "button", onclick: () => go({}) }, "Clear"));

  const rows = h("tbody", { id: "action-rows" });
  const table = h("table", { id: "actions" },
    h("caption", {}, "Recent actions, newest first"),
    h("thead", {}, h("tr", {}, ["When (UTC)", "Action", "Instance", "Name", "Requested by",
      "Reason"].map((c) => h("th", { scope: "col" }, c)))),
    rows);
  const paged = () => {
    history.replaceState(null, "", "#" + here());
    load();
  };
  const prev = h("button", { type: "button", id: "actions-prev", disabled: cursors.length <= 1,
    onclick: () => { cursors.pop(); paged(); } }, "Previous page");
  const next = h("button", { type: "button", id: "actions-next", disabled: true,
    onclick: () => { cursors.push(next.dataset.cursor); paged(); } }, "Next page");
  const stale = staleBanner(() => [table]);

  view.append(listNav("actions"),
    h("p", { class: "note" }, "The cancels, terminates, suspends and resumes history " +
      "recorded, across instances: a request appears once a turn takes it (or at once " +
      "when it decided an instance that had not begun). Requests of deleted or purged " +
      "instances are gone with them."),
    form, stale.el, h("div", { class: "scroll-x" }, table),
    h("p", { class: "pager" }, prev, " ", next));

  async function load() {
    try {
      const cursor = cursors[cursors.length - 1];
      const p = await get("control-events?" + query(Object.assign({}, filters,
        { limit: filters.limit || 50, cursor })));
      const from = here();
      const now = Date.now();
      const made = p.events.map((e) => h("tr", { "data-ref": e.ref, "data-action": e.action },
        h("td", { "data-label": "When" }, when(e.at, e.at_ms, now)),
        h("td", { "data-label": "Action", class: "action act-" + e.action },
          e.action + (e.observed ? " (observed)" : "") +
          (e.before_start ? " (before its start)" : "")),
        h("td", { class: "id", "data-label": "Instance" },
          h("a", { href: "#/instance?" + query({ ref: e.ref, from }) }, userText(e.id))),
        h("td", { "data-label": "Name" }, e.name ? userText(e.name) : ""),
        h("td", { "data-label": "Requested by", class: "by" },
          e.requested_by ? userText(e.requested_by) : "-"),
        h("td", { "data-label": "Reason", class: "reason" },
          e.reason ? userText(e.reason) : "")));
      if (made.length === 0) {
        made.push(h("tr", {}, h("td", { colspan: "6" }, "No actions recorded.")));
      }
      rows.replaceChildren(...made);
      prev.disabled = cursors.length <= 1;
      next.disabled = !p.next_cursor;
      if (p.next_cursor) next.dataset.cursor = p.next_cursor;
      stale.ok();
    } catch (e) {
      stale.fail(e);
    }
  }

  load();
  // not while the focus is in the rows: they would move under it
  const timer = setInterval(() => {
    if (!document.hidden && !table.contains(document.activeElement)) load();
  }, 2000);
  return () => clearInterval(timer);
}
