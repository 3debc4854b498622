#!/usr/bin/env bash
# ab.sh - compares builds of duro on one machine with interleaved runs, so
# drift in the machine's load hits every build alike.
#
#   bench/ab.sh RUNS BUILD_A BUILD_B [BUILD_C ...] -- BENCH [ARGS...]
#
# Runs BUILD/bench/BENCH ARGS for each build in turn (A B C A B C ..., RUNS
# rounds) and prints every JSON line the benchmark prints, with
# "build":"A"|"B"|... and "run":N added in front. Summarize with
# bench/summarize.py.
set -euo pipefail
usage() {
    echo "usage: bench/ab.sh RUNS BUILD_A BUILD_B [BUILD ...] -- BENCH [ARGS...]" >&2
    exit 2
}
[ $# -ge 5 ] || usage
runs="$1"
shift
builds=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
    builds+=("$1")
    shift
done
[ $# -ge 2 ] && [ "${#builds[@]}" -ge 2 ] || usage
shift # --
bench="$1"
shift
for dir in "${builds[@]}"; do
    [ -x "$dir/bench/$bench" ] || { echo "ab.sh: no $dir/bench/$bench" >&2; exit 2; }
done
labels=(A B C D E F G H)
for run in $(seq 1 "$runs"); do
    for i in "${!builds[@]}"; do
        "${builds[$i]}/bench/$bench" "$@" |
            sed "s/^{/{\"build\":\"${labels[$i]}\",\"run\":$run,/"
    done
done
