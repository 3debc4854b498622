#!/usr/bin/env python3
"""summarize.py - median and range of benchmark JSON lines.

Reads the lines bench/ab.sh (or a benchmark) prints from stdin, groups them by
every string field plus the numeric fields named in --key (build, workload,
variant fields such as "rows" or "from"), and prints, for each numeric metric,
the median and the min..max over the runs of each group.

    bench/ab.sh 5 build-a build-b -- orch_bench --workload chain | \
        bench/summarize.py --metric orch_per_s --metric p99_ms
"""
import argparse
import json
import statistics
import sys

SKIP = {"run"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--metric", action="append", default=[],
                    help="numeric field to summarize (default: all)")
    ap.add_argument("--key", action="append", default=[],
                    help="numeric field that identifies a variant "
                         "(e.g. lock_timeout_ms)")
    args = ap.parse_args()
    groups = {}
    order = []
    for line in sys.stdin:
        line = line.strip()
        if not line.startswith("{"):
            continue
        obj = json.loads(line)
        key = tuple((k, v) for k, v in obj.items()
                    if k not in SKIP and (isinstance(v, str) or k in args.key))
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(obj)
    for key in order:
        rows = groups[key]
        label = " ".join(f"{k}={v}" for k, v in key)
        print(f"{label}  (runs: {len(rows)})")
        metrics = args.metric or [k for k, v in rows[0].items()
                                  if isinstance(v, (int, float))
                                  and k not in SKIP and k not in args.key]
        for m in metrics:
            vals = [r[m] for r in rows if m in r]
            if not vals:
                continue
            print(f"  {m}: median {statistics.median(vals):.6g}  "
                  f"range {min(vals):.6g} .. {max(vals):.6g}")


if __name__ == "__main__":
    main()
