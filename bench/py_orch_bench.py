#!/usr/bin/env python3
"""py_orch_bench.py - orch_bench's chain and long workloads written in
Python (duro's Python package), on a fresh SQLite file (WAL) and a runtime
of default options, printing the same JSON lines as bench/orch_bench.c with
"lang":"python" added, so the two compare field by field (bench/py_vs_c.sh
runs them interleaved). Not a timed test: CTest runs it once with a tiny N.

    PYTHONPATH=build/python python3 bench/py_orch_bench.py \
        [--workload chain|long|long_cold|all] [--n N] [--url sqlite:PATH]

Methods, as orch_bench's (see its header):
  chain      N (default 1000) instances of an `async def` awaiting 5
             no-op activities in sequence, all started through the client
             first; the clock runs from Runtime.start() until the runtime's
             completed counter reaches N (polled every millisecond), then
             every instance is checked Completed through the client.
             orch_per_s = N / wall. No p50/p99: the Python client's history
             has no timestamps.
  long       one instance of N (default 5100) sequential activities, each
             recording when it began (time.monotonic_ns()); first/last
             window means and medians, max, and step_ms_at_E: the median of
             the 10 intervals from step E/2 on, whose turns read E to E + 20
             events (E = 10 .. 10,000, those the run reaches).
  long_cold  the same with cache_size 0: every turn replays the coroutine
             from the start of the history.
  peak_rss_kb is getrusage(RUSAGE_SELF).ru_maxrss at the end; each workload
  runs in a process of its own (forked before duro is imported), so it is
  that workload's, the interpreter included. cpu_busy_pct: the machine's
  busy share while the clock ran (/proc/stat)."""
import argparse
import json
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time

CHAIN_STEPS = 5
LONG_WINDOW = 100
AT_WINDOW = 10
AT_EVENTS = (10, 100, 1000, 10000)
DEADLINE_S = 600


def cpu_ticks():
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:9]]
    except (OSError, ValueError):
        return 0, 0
    total = sum(v)
    return total - v[3] - v[4], total


def cpu_busy_pct(t0):
    busy, total = cpu_ticks()
    if total <= t0[1]:
        return -1.0
    return 100.0 * (busy - t0[0]) / (total - t0[1])


def peak_rss_kb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def wait_completed(rt, n):
    t0 = time.monotonic()
    while True:
        m = rt.metrics()
        if m["orchestrations_failed"] > 0:
            sys.exit(f"py_orch_bench: {m['orchestrations_failed']} "
                     "orchestration(s) failed")
        if m["orchestrations_completed"] >= n:
            return m
        if time.monotonic() - t0 > DEADLINE_S:
            sys.exit(f"py_orch_bench: {m['orchestrations_completed']} of {n}"
                     f" completed after {DEADLINE_S} s")
        time.sleep(0.001)


def emit(obj):
    print(json.dumps(obj, separators=(",", ":")), flush=True)


def bench_chain(duro, url, n):
    reg = duro.Registry()

    @reg.activity("Noop")
    def noop(ctx, x):
        return None

    @reg.orchestration("Chain")
    async def chain(ctx, x):
        for _ in range(CHAIN_STEPS):
            await ctx.call_activity("Noop", None)

    rt = duro.Runtime(url, reg)
    client = duro.Client(url)
    t = time.monotonic()
    for i in range(n):
        client.start("Chain", f"chain-{i}", None)
    enqueue_ms = (time.monotonic() - t) * 1000
    busy0 = cpu_ticks()
    t = time.monotonic()
    rt.start()
    m = wait_completed(rt, n)
    wall_ms = (time.monotonic() - t) * 1000
    busy = cpu_busy_pct(busy0)
    for i in range(n):
        info = client.status(f"chain-{i}")
        if info.status != "Completed":
            sys.exit(f"py_orch_bench: chain-{i} is {info.status}")
    rt.shutdown()
    emit({"bench": "orch", "workload": "chain", "lang": "python",
          "label": f"{n} concurrent {CHAIN_STEPS}-step chains",
          "provider": "sqlite", "n": n, "procs": 1,
          "activities": n * CHAIN_STEPS,
          "orch_per_s": round(n * 1000 / wall_ms, 1),
          "act_per_s": round(n * CHAIN_STEPS * 1000 / wall_ms, 1),
          "wall_ms": round(wall_ms, 1), "enqueue_ms": round(enqueue_ms, 1),
          "turns": m["turns"], "peak_rss_kb": peak_rss_kb(),
          "cpu_busy_pct": round(busy, 1)})


def bench_long(duro, url, n, cold):
    began = [0] * n
    reg = duro.Registry()

    @reg.activity("Stamp")
    def stamp(ctx, i):
        began[i] = time.monotonic_ns()

    @reg.orchestration("Long")
    async def long_(ctx, steps):
        for i in range(steps):
            await ctx.call_activity("Stamp", i)

    rt = duro.Runtime(url, reg, cache_size=0 if cold else -1)
    client = duro.Client(url)
    rt.start()
    t = time.monotonic()
    client.start("Long", "long", n)
    m = wait_completed(rt, 1)
    wall_ms = (time.monotonic() - t) * 1000
    if client.status("long").status != "Completed":
        sys.exit("py_orch_bench: long did not complete")
    rt.shutdown()  # joins the workers: every stamp is written
    steps = [(began[i + 1] - began[i]) / 1e6 for i in range(n - 1)]
    window = min(LONG_WINDOW, (n - 1) // 2)
    out = {"bench": "orch", "workload": "long_cold" if cold else "long",
           "lang": "python", "fiber_cache_size": 0 if cold else "default",
           "provider": "sqlite", "n": n,
           "act_per_s": round(n * 1000 / wall_ms, 1),
           "wall_ms": round(wall_ms, 1)}
    if window > 0:
        out.update(
            first_turn_ms=round(statistics.fmean(steps[:window]), 3),
            last_turn_ms=round(statistics.fmean(steps[-window:]), 3),
            window=window,
            first_turn_p50_ms=round(statistics.median(steps[:window]), 3),
            last_turn_p50_ms=round(statistics.median(steps[-window:]), 3))
    out.update(max_turn_ms=round(max(steps, default=0), 3),
               turns=m["turns"], replays=m["replays"],
               peak_rss_kb=peak_rss_kb())
    for e in AT_EVENTS:
        first = e // 2
        if first + AT_WINDOW < n:
            out[f"step_ms_at_{e}"] = round(
                statistics.median(steps[first:first + AT_WINDOW]), 3)
    emit(out)


def run_child(workload, url, n):
    """Runs one workload in a forked process (peak RSS its own); True when
    it succeeded."""
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            import duro  # imported here: the parent never loads it

            if workload == "chain":
                bench_chain(duro, url, n or 1000)
            else:
                bench_long(duro, url, n or 5100, workload == "long_cold")
            code = 0
        finally:
            sys.stdout.flush()
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    if status != 0:
        print(f"py_orch_bench: workload {workload} failed (status "
              f"{status:#x})", file=sys.stderr)
    return status == 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workload", default="all",
                    choices=["chain", "long", "long_cold", "all"])
    ap.add_argument("--n", type=int, default=0)
    ap.add_argument("--url", default=None)
    args = ap.parse_args()
    workloads = (["chain", "long", "long_cold"] if args.workload == "all"
                 else [args.workload])
    tmp = None if args.url else tempfile.mkdtemp(prefix="py-orch-bench-")
    ok = True
    try:
        for w in workloads:
            url = args.url or f"sqlite:{tmp}/{w}.db"
            ok &= run_child(w, url, args.n)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
