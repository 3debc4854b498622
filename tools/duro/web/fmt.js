// fmt.js - numbers and times for people: relative ages beside absolute
// times, event offsets in human units, sizes in bytes. Pure functions and
// h() nodes; runs on the page's thread.
import { h, time } from "./dom.js";

// A non-negative span as "42 s", "4 min 52 s", "3 h 5 min", "2 d 4 h":
// the two largest units, whole seconds from a minute up.
export function span(ms) {
  if (ms < 1000) return Math.round(ms) + " ms";
  if (ms < 60000) {
    const s = ms / 1000;
    return (s < 10 ? s.toFixed(1).replace(/\.0$/, "") : String(Math.floor(s))) + " s";
  }
  const units = [["d", 86400], ["h", 3600], ["min", 60], ["s", 1]];
  let rest = Math.floor(ms / 1000);
  const parts = [];
  for (const [unit, n] of units) {
    if (parts.length === 0 && rest < n) continue;
    parts.push(Math.floor(rest / n) + " " + unit);
    rest %= n;
    if (parts.length === 2) break;
  }
  return parts.filter((p) => !/^0 /.test(p) || p === parts[0]).join(" ");
}

// An event's offset from the execution's start: "+0", "+850 ms",
// "+4 min 52 s".
export function offset(ms) {
  return ms <= 0 ? "+0" : "+" + span(ms);
}

// The age of @p ms (epoch ms) at @p now: "just now", "5 min ago",
// "in 2 h 3 min" (as duro status says it).
export function age(ms, now = Date.now()) {
  const d = now - ms;
  if (Math.abs(d) < 1000) return "just now";
  return d > 0 ? span(d) + " ago" : "in " + span(-d);
}

// A time of the API ("…_at" RFC 3339 and "…_at_ms") as a <time> node:
// the absolute UTC time, then its relative age; "-" when unset.
export function when(iso, ms, now) {
  if (!iso || ms === null || ms === undefined) return "-";
  return h("time", { datetime: iso, class: "when" }, time(iso),
    h("span", { class: "age" }, " (" + age(ms, now) + ")"));
}

// A size: "812 bytes", "6,000 bytes (5.9 KiB)", "1,048,576 bytes (1 MiB)".
export function bytes(n) {
  const whole = n.toLocaleString("en-US") + (n === 1 ? " byte" : " bytes");
  if (n < 1024) return whole;
  const [v, u] = n < 1048576 ? [n / 1024, "KiB"] : [n / 1048576, "MiB"];
  return whole + " (" + (v < 10 ? v.toFixed(1).replace(/\.0$/, "") : Math.round(v)) +
    " " + u + ")";
}
