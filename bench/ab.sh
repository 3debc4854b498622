#!/usr/bin/env bash
# ab.sh - compares two builds of duro on one machine with interleaved runs, so
# drift in the machine's load hits both alike.
#
#   bench/ab.sh RUNS BUILD_A BUILD_B -- BENCH [ARGS...]
#
# Runs BUILD_A/bench/BENCH ARGS and BUILD_B/bench/BENCH ARGS alternately
# (A B A B ..., RUNS times each) and prints every JSON line the benchmark
# prints, with "build":"A"|"B" and "run":N added in front. Summarize with
# bench/summarize.py.
set -euo pipefail
if [ $# -lt 5 ] || [ "$4" != "--" ]; then
    echo "usage: bench/ab.sh RUNS BUILD_A BUILD_B -- BENCH [ARGS...]" >&2
    exit 2
fi
runs="$1" a="$2" b="$3"
shift 4
bench="$1"
shift
for dir in "$a" "$b"; do
    [ -x "$dir/bench/$bench" ] || { echo "ab.sh: no $dir/bench/$bench" >&2; exit 2; }
done
for run in $(seq 1 "$runs"); do
    for side in A B; do
        dir="$a"
        [ "$side" = B ] && dir="$b"
        "$dir/bench/$bench" "$@" | sed "s/^{/{\"build\":\"$side\",\"run\":$run,/"
    done
done
