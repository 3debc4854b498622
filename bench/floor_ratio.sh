#!/usr/bin/env bash
# floor_ratio.sh - duro's chain beside the floor of a chain, on one store,
# in the same rounds: issue 25's measure of how close a turn is to what its
# SQL costs.
#
#   bench/floor_ratio.sh RUNS BUILD STORE [N] [FLOOR_ARGS...]
#
# STORE is "sqlite" (fresh files in a temporary directory each round) or a
# postgres:// URL with a query part (floor_bench makes and drops a schema
# of its own; the chain runs on a fresh schema, &schema=... appended,
# dropped after the run with psql; a CHECKPOINT, when allowed, before each
# benchmark). Each round runs floor_bench then
# orch_bench --workload chain with N instances (default 1000) and prints
# both JSON lines with "run":R added, then a line
# {"bench":"floor_ratio","run":R,"ratio":chain/floor}. Summarize with
# bench/summarize.py --metric chains_per_s --metric orch_per_s --metric ratio.
set -euo pipefail
[ $# -ge 3 ] || {
    echo "usage: bench/floor_ratio.sh RUNS BUILD STORE [N] [FLOOR_ARGS...]" >&2
    exit 2
}
runs="$1" build="$2" store="$3" n="${4:-1000}"
shift $(($# >= 4 ? 4 : 3))
for b in floor_bench orch_bench; do
    [ -x "$build/bench/$b" ] || { echo "floor_ratio.sh: no $build/bench/$b" >&2; exit 2; }
done
tmp=$(mktemp -d)
schema=
drop() { [ -z "$schema" ] || psql "$store" -qc "DROP SCHEMA IF EXISTS $schema CASCADE" >/dev/null 2>&1 || true; schema=; }
trap 'drop; rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM HUP
checkpoint() { [ "$store" = sqlite ] || psql "$store" -qc CHECKPOINT >/dev/null 2>&1 || true; }
for run in $(seq 1 "$runs"); do
    if [ "$store" = sqlite ]; then
        rm -f "$tmp"/*
        floor_url="sqlite:$tmp/floor.db" chain_url="sqlite:$tmp/chain.db"
    else
        schema="floor_ratio_${run}_$$"
        floor_url="$store" chain_url="$store&schema=$schema"
    fi
    checkpoint
    floor=$("$build/bench/floor_bench" --url "$floor_url" --n "$n" "$@")
    checkpoint
    chain=$("$build/bench/orch_bench" --workload chain --n "$n" --url "$chain_url" |
        grep '"workload":"chain"')
    drop
    echo "$floor" | sed "s/^{/{\"run\":$run,/"
    echo "$chain" | sed "s/^{/{\"run\":$run,/"
    python3 - "$floor" "$chain" "$run" <<'PY'
import json, sys
f, c, run = json.loads(sys.argv[1]), json.loads(sys.argv[2]), int(sys.argv[3])
print(json.dumps({"bench": "floor_ratio", "run": run,
                  "ratio": round(c["orch_per_s"] / f["chains_per_s"], 3)}))
PY
done
