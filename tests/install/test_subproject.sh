#!/bin/sh
# test_subproject.sh SOURCE CC CMAKE GENERATOR
#
# Builds subproject/, a project that takes duro in with add_subdirectory
# (as FetchContent does), in a temporary directory: its configure checks
# that duro::duro and duro::duro_static exist and that duro's tests,
# benchmarks and examples are not its targets; then it builds
# consumer/consumer.c against each (only the libraries, not the duro
# command) and runs both. PostgreSQL is left out to keep the second build
# of the library short. DURO_TEST_KEEP=1 keeps the temporary directory.
set -eu

if [ $# -ne 4 ]; then
    echo "usage: $0 SOURCE CC CMAKE GENERATOR" >&2
    exit 2
fi
source=$1 cc=$2 cmake=$3 generator=$4

tmp=$(mktemp -d "${TMPDIR:-/tmp}/duro-subproject-test.XXXXXX")
cleanup() {
    if [ -n "${DURO_TEST_KEEP:-}" ]; then
        echo "kept $tmp"
    else
        rm -rf "$tmp"
    fi
}
trap cleanup EXIT
trap 'exit 1' HUP INT TERM

fail() {
    printf 'FAIL: %s\n' "$*" >&2
    exit 1
}
# run LOG CMD...: runs CMD with its output in LOG, shown when it fails.
run() {
    log=$1
    shift
    if ! "$@" >"$log" 2>&1; then
        cat "$log" >&2
        fail "$*"
    fi
}

printf '== add_subdirectory(%s)\n' "$source"
run "$tmp/configure.log" "$cmake" -G "$generator" \
    -S "$source/tests/install/subproject" -B "$tmp/build" \
    -DCMAKE_C_COMPILER="$cc" -DDURO_SOURCE="$source" -DDURO_POSTGRES=OFF
grep 'duro::duro' "$tmp/configure.log" | sed 's/^-- //'
run "$tmp/build.log" "$cmake" --build "$tmp/build" -j 2 \
    --target consumer_shared consumer_static
for kind in shared static; do
    env -u LD_LIBRARY_PATH "$tmp/build/consumer_$kind" "$tmp/$kind.db" ||
        fail "consumer_$kind"
done
echo "== ok: duro::duro and duro::duro_static from add_subdirectory"
