#!/usr/bin/env bash
# ab_pg_chain.sh - interleaved `chain` runs of two builds on PostgreSQL (one
# process and two) and SQLite, each PostgreSQL run on a fresh schema that
# is dropped after it (a reused schema carries the last run's dead rows).
#
#   bench/ab_pg_chain.sh ROUNDS BUILD_A BUILD_B URL
#
# Per round: A, B with one process; A, B with --procs 2; A, B on a fresh
# SQLite file. Prints every JSON line with "build":"a"|"b" and "run":N in
# front. URL is a postgres:// or postgresql:// URL with a query part (the
# schema is appended as &schema=...); psql must reach it to drop schemas.
# Before each PostgreSQL run the server is asked for a CHECKPOINT (needs a
# superuser; skipped quietly otherwise), so no run pays for a checkpoint
# that the runs before it left due, and each starts with the same full-page
# writes to come.
set -euo pipefail
[ $# -eq 4 ] || { echo "usage: bench/ab_pg_chain.sh ROUNDS BUILD_A BUILD_B URL" >&2; exit 2; }
rounds=$1 a=$2 b=$3 url=$4
tmp=$(mktemp -d)
schema=
# the run's schema goes after the run, and on a failure (set -e) too
drop() { [ -z "$schema" ] || psql "$url" -qc "DROP SCHEMA IF EXISTS $schema CASCADE" >/dev/null 2>&1 || true; schema=; }
trap 'drop; rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM HUP
for dir in "$a" "$b"; do
    [ -x "$dir/bench/orch_bench" ] || { echo "ab_pg_chain.sh: no $dir/bench/orch_bench" >&2; exit 2; }
done
tag() { sed "s/^{/{\"build\":\"$1\",\"run\":$2,/"; }
for i in $(seq 1 "$rounds"); do
    for procs in 1 2; do
        for build in a b; do
            dir=$a; [ "$build" = b ] && dir=$b
            schema="ab_${build}${procs}_${i}_$$"
            psql "$url" -qc "CHECKPOINT" >/dev/null 2>&1 || true
            "$dir/bench/orch_bench" --workload chain --procs "$procs" \
                --url "$url&schema=$schema" | tag "$build" "$i"
            drop
        done
    done
    for build in a b; do
        dir=$a; [ "$build" = b ] && dir=$b
        "$dir/bench/orch_bench" --workload chain --url "sqlite:$tmp/$build-$i.db" |
            tag "$build" "$i"
    done
done
