#!/usr/bin/env bash
# py_vs_c.sh - the Python package against C on one build, interleaved: per
# round orch_bench's chain, then py_orch_bench.py's, then long in C and in
# Python, then long_cold in both (each workload on a fresh SQLite file), so
# drift in the machine's load hits both alike.
#
#   bench/py_vs_c.sh RUNS BUILD [CHAIN_N [LONG_N [COLD_N]]]
#
# Defaults: 1000 chains, 5100 long steps (history lengths up to 10,000
# events), 1100 long_cold steps (0: no long_cold). BUILD is a build
# directory (bench/orch_bench and python/duro). Prints every JSON line with
# "lang":"c"|"python" and "run":N in front; summarize with
#   bench/summarize.py --metric orch_per_s --metric peak_rss_kb ...
set -euo pipefail
[ $# -ge 2 ] || {
    echo "usage: bench/py_vs_c.sh RUNS BUILD [CHAIN_N [LONG_N [COLD_N]]]" >&2
    exit 2
}
runs="$1"
build="$(cd "$2" && pwd)"
chain_n="${3:-1000}"
long_n="${4:-5100}"
cold_n="${5:-1100}"
here="$(cd "$(dirname "$0")" && pwd)"
python=/usr/bin/python3 # the interpreter python/CMakeLists.txt builds for
[ -x "$python" ] || python=python3
[ -x "$build/bench/orch_bench" ] || {
    echo "py_vs_c.sh: no $build/bench/orch_bench" >&2
    exit 2
}
[ -d "$build/python/duro" ] || {
    echo "py_vs_c.sh: no $build/python/duro" >&2
    exit 2
}
c() {
    "$build/bench/orch_bench" --workload "$1" --n "$2" |
        sed "s/^{/{\"lang\":\"c\",\"run\":$run,/"
}
py() {
    PYTHONPATH="$build/python" "$python" "$here/py_orch_bench.py" \
        --workload "$1" --n "$2" |
        sed "s/^{/{\"run\":$run,/; s/,\"lang\":\"python\"//; s/^{/{\"lang\":\"python\",/"
}
for run in $(seq 1 "$runs"); do
    c chain "$chain_n"
    py chain "$chain_n"
    c long "$long_n"
    py long "$long_n"
    if [ "$cold_n" -gt 0 ]; then
        c long_cold "$cold_n"
        py long_cold "$cold_n"
    fi
done
