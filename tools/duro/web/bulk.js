// bulk.js - the instances page's bulk actions: the bar over the selected
// rows (cancel, terminate, suspend, resume, each after a confirmation
// naming how many and which, whose Enter key cannot confirm: one
// POST /api/v1/bulk/control with their refs) and the dialog that cancels
// every pending or running instance matching the page's filter: a preview
// (POST bulk/cancel with dry_run: how many, by status, a sample), then an
// apply bounded by the preview's as_of_ms, so that nothing started after
// the preview is touched.
import { h, post, say, time, userText, userPlain, confirmAction } from "./dom.js";

export const SELECT_MAX = 500; // refs in one bulk/control request

const CANCELLABLE = ["pending", "running"];

// The bulk/cancel filter of the page's filters (the URL's), or null with
// the reason when nothing it shows can be cancelled.
export function cancelFilter(filters) {
  const f = {};
  // what bulk/cancel cannot express must not widen into "every instance"
  if (filters.name_prefix || filters.name_contains) {
    return { filter: null, why: "a name prefix or substring is not a filter a bulk cancel " +
      "takes: select the rows instead, or filter by the exact name" };
  }
  if (filters.attention) {
    return { filter: null, why: "\"need attention\" is not a filter a bulk cancel takes: " +
      "select the rows instead" };
  }
  if (filters.status) {
    const st = filters.status.split(",").filter((s) => CANCELLABLE.includes(s));
    if (st.length === 0) return { filter: null, why: "only pending and running instances can be cancelled" };
    f.status = st;
  }
  if (filters.name) f.name = filters.name;
  if (filters.id_prefix) f.id_prefix = filters.id_prefix;
  for (const k of ["created_after", "created_before"]) {
    if (!filters[k]) continue;
    const ms = /^\d+$/.test(filters[k]) ? Number(filters[k]) : Date.parse(filters[k]);
    if (Number.isNaN(ms)) return { filter: null, why: k + " is not a time" };
    f[k + "_ms"] = ms;
  }
  return { filter: f, why: "" };
}

// A sentence naming the filter, for the dialog (text, never HTML).
function describe(filters) {
  const parts = [];
  parts.push(filters.status ? "status " + filters.status : "status pending or running");
  if (filters.name) parts.push("name " + userPlain(filters.name));
  if (filters.name_prefix) parts.push("name starting with " + userPlain(filters.name_prefix));
  if (filters.name_contains) parts.push("name containing " + userPlain(filters.name_contains));
  if (filters.attention) parts.push("needing attention");
  if (filters.id_prefix) parts.push("id starting with \"" + userPlain(filters.id_prefix) + "\"");
  const at = (t) => time(/^\d+$/.test(t) ? new Date(Number(t)).toISOString() : t);
  if (filters.created_after) parts.push("created from " + at(filters.created_after));
  if (filters.created_before) parts.push("created before " + at(filters.created_before));
  return parts.join(", ");
}

const CONFIRM = {
  cancel: ["Cancel", "They stop at their next turn; their activities are cancelled."],
  terminate: ["Terminate", "Their code does not run again; their activities are cancelled."],
  suspend: ["Suspend", "They stop taking turns until they are resumed."],
  resume: ["Resume", "They take turns again."],
};

// The bar: {el, update(), openMatching()}. @p selection maps ref -> id;
// @p getFilters returns the page's filters; @p done() reloads the page.
export function bulkBar(selection, getFilters, done) {
  const count = h("span", { id: "bulk-count" });
  const reason = h("input", { id: "bulk-reason", autocomplete: "off",
    placeholder: "reason (optional)", "aria-label": "Reason for the selected" });
  const buttons = [];
  const act = (action, text, attrs) => {
    const b = h("button", Object.assign({ type: "button", "data-action": action,
      onclick: () => run(action) }, attrs), text);
    buttons.push(b);
    return b;
  };
  const limit = h("span", { class: "bulk-limit", hidden: true },
    "At most " + SELECT_MAX + " at once: use “Cancel all matching…” for more.");
  const el = h("div", { id: "bulk", class: "bulk", role: "region",
    "aria-label": "Bulk actions", hidden: true },
  count, " ", reason, " ",
  act("cancel", "Cancel selected…", { id: "bulk-cancel" }), " ",
  act("terminate", "Terminate selected…", { id: "bulk-terminate" }), " ",
  act("suspend", "Suspend selected…", { id: "bulk-suspend" }), " ",
  act("resume", "Resume selected…", { id: "bulk-resume" }), " ",
  h("button", { type: "button", id: "bulk-clear",
    onclick: () => { selection.clear(); done(false); } }, "Clear selection"),
  " ", limit);

  function update(readOnly) {
    const n = selection.size;
    el.hidden = n === 0;
    count.textContent = n + " selected";
    limit.hidden = n <= SELECT_MAX;
    for (const b of buttons) {
      b.disabled = n === 0 || n > SELECT_MAX;
      b.hidden = !!readOnly;
    }
    reason.hidden = !!readOnly;
  }

  async function run(action) {
    const refs = [...selection.keys()];
    const ids = [...selection.values()];
    const [verb, what] = CONFIRM[action];
    const n = refs.length + (refs.length === 1 ? " instance" : " instances");
    const { ok } = await confirmAction({ id: "bulk-action",
      title: verb + " " + n + "?",
      text: what + (reason.value ? " Reason: \u201C" + userPlain(reason.value) + "\u201D." : "") +
        " The selected, from every page:",
      ids, yes: verb + " " + n, no: "Keep them" });
    if (!ok) return;
    buttons.forEach((b) => { b.disabled = true; });
    try {
      const body = { action, refs };
      if (reason.value) body.reason = reason.value;
      const r = await post("bulk/control", body);
      const others = {};
      for (const x of r.results) {
        if (x.outcome !== "cancelled" && x.outcome !== "requested") {
          others[x.outcome] = (others[x.outcome] || 0) + 1;
        }
      }
      const rest = Object.entries(others).map(([k, v]) => v + " " + k).join(", ");
      say(action + ": " + r.changed + " of " + refs.length + " changed" +
        (rest ? " (" + rest + ")" : ""));
      selection.clear();
      done(true);
    } catch (e) {
      say(action + " failed: " + e.message, true);
      update(false);
    }
  }

  // The "all matching" dialog.
  const matched = h("p", { id: "bulk-matched" });
  const sample = h("ul", { id: "bulk-sample", class: "sample" });
  const qReason = h("input", { id: "bulk-query-reason", autocomplete: "off",
    placeholder: "cancelled from duro ui" });
  const apply = h("button", { type: "button", id: "bulk-apply", disabled: true }, "Cancel them");
  const result = h("p", { id: "bulk-result", role: "status" });
  const what = h("p", { id: "bulk-filter" });
  const close = h("button", { type: "button", id: "bulk-close", onclick: () => dialog.close() },
    "Close");
  const dialog = h("dialog", { id: "bulk-dialog", "aria-labelledby": "bulk-title" },
    h("h3", { id: "bulk-title" }, "Cancel every instance matching the filter"),
    what, matched, sample,
    h("p", {}, h("label", { for: "bulk-query-reason" }, "Reason "), qReason),
    // Close first, and focused: no key but a deliberate one reaches apply.
    h("p", {}, close, " ", apply),
    result);
  let preview = null;

  apply.addEventListener("click", async () => {
    if (!preview) return;
    apply.disabled = true;
    try {
      const body = { filter: preview.filter, as_of_ms: preview.as_of_ms };
      if (qReason.value) body.reason = qReason.value;
      const r = await post("bulk/cancel", body);
      result.textContent = "Cancelled " + r.cancelled + " of the " +
        preview.matched + " previewed" + (r.cancelled < preview.matched
        ? " (the others finished or were cancelled in between)." : ".");
      result.dataset.cancelled = String(r.cancelled);
      preview = null;
      done(true);
    } catch (e) {
      result.textContent = "Cancel failed: " + e.message;
      apply.disabled = false;
    }
  });

  async function openMatching() {
    const filters = getFilters();
    const { filter, why } = cancelFilter(filters);
    preview = null;
    apply.disabled = true;
    apply.textContent = "Cancel them";
    result.textContent = "";
    delete result.dataset.cancelled;
    sample.replaceChildren();
    what.textContent = "Filter (as the form shows it): " + describe(filters) + ".";
    matched.textContent = filter ? "Counting…" : "Nothing to cancel: " + why + ".";
    if (!dialog.open) dialog.showModal();
    close.focus();
    if (!filter) return;
    try {
      const p = await post("bulk/cancel", { filter, dry_run: true });
      preview = { filter, as_of_ms: p.as_of_ms, matched: p.matched };
      matched.textContent = p.matched + (p.matched === 1 ? " instance" : " instances") +
        " would be cancelled (pending " + p.by_status.pending + ", running " +
        p.by_status.running + "), created before " +
        time(new Date(p.as_of_ms).toISOString()) + ". Instances started later are not touched.";
      matched.dataset.matched = String(p.matched);
      sample.replaceChildren(...p.sample.map((s) => h("li", { class: "id" }, userText(s.id))));
      if (p.matched > p.sample.length) {
        sample.append(h("li", {}, "… and " + (p.matched - p.sample.length) + " more"));
      }
      apply.textContent = "Cancel these " + p.matched;
      apply.disabled = p.matched === 0;
    } catch (e) {
      matched.textContent = "Preview failed: " + e.message;
    }
  }

  // How many instances "Cancel all matching" would cancel now (a dry
  // run), or null when the filter shows none that can be.
  async function countMatching() {
    const { filter } = cancelFilter(getFilters());
    if (!filter) return null;
    return (await post("bulk/cancel", { filter, dry_run: true })).matched;
  }

  return { el, dialog, update, openMatching, countMatching };
}
