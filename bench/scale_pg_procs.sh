#!/usr/bin/env bash
# scale_pg_procs.sh - does a second runtime process add throughput on
# PostgreSQL? Interleaved `chain` runs of one build with one and with two
# runtime processes, each process capped at CAP CPUs (orch_bench --cpu-cap:
# a cgroup of its own, as if each process had a machine of its own, with
# the server keeping the rest; needs root and a cgroup cpu controller).
# This is the measurement of record: on a 2-core machine shared with the
# server, processes that are not capped only compete for the same cores
# (bench/RESULTS.md). Each run on a fresh schema, dropped after it (and on
# a failure or an interrupt), after a CHECKPOINT.
#
#   bench/scale_pg_procs.sh ROUNDS BUILD URL CAP [N]
#
# Prints every JSON line with "run":R in front. URL is a postgres:// or
# postgresql:// URL with a query part (&schema=... is appended); psql must
# reach it. N chains per run (default 2000).
set -euo pipefail
[ $# -ge 4 ] || { echo "usage: bench/scale_pg_procs.sh ROUNDS BUILD URL CAP [N]" >&2; exit 2; }
rounds=$1 dir=$2 url=$3 cap=$4 n=${5:-2000}
[ -x "$dir/bench/orch_bench" ] || { echo "scale_pg_procs.sh: no $dir/bench/orch_bench" >&2; exit 2; }
awk -v c="$cap" 'BEGIN { exit !(c > 0) }' || { echo "scale_pg_procs.sh: CAP must be a number of CPUs above 0" >&2; exit 2; }
schema=
drop() { [ -z "$schema" ] || psql "$url" -qc "DROP SCHEMA IF EXISTS $schema CASCADE" >/dev/null 2>&1 || true; schema=; }
trap drop EXIT
trap 'exit 1' INT TERM HUP
for i in $(seq 1 "$rounds"); do
    for procs in 1 2; do
        schema="scale_${procs}_${i}_$$"
        psql "$url" -qc "CHECKPOINT" >/dev/null 2>&1 || true
        "$dir/bench/orch_bench" --workload chain --n "$n" --procs "$procs" \
            --cpu-cap "$cap" --url "$url&schema=$schema" | sed "s/^{/{\"run\":$i,/"
        drop
    done
done
