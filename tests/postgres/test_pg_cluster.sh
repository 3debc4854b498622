#!/bin/sh
# test_pg_cluster.sh PG_CLUSTER - .ci/pg-cluster keeps to the port its
# cluster started on: a cluster started with DURO_PG_PORT set is crashed,
# restarted, taken down and up, and stopped without it (crash used to wait
# on the default port 5544, report that the server did not accept
# connections, and stop and delete the running cluster); down keeps the
# cluster, up serves it again. Its own cluster, on port $DURO_PG_PORT (default
# 5544) plus 4, so the fixture's keeps serving the other tests. Needs the
# server binaries (exit 77, skipped, without them). DURO_TEST_KEEP=1 keeps
# the cluster's directory after a failure.
set -u

if [ $# -ne 1 ]; then
    echo "usage: $0 PG_CLUSTER" >&2
    exit 2
fi
pg_cluster=$1
port=$((${DURO_PG_PORT:-5544} + 4))
tmp=$(mktemp -d "${TMPDIR:-/tmp}/duro-pg-cluster-test.XXXXXX") || exit 1
dir="$tmp/cluster"
failures=0
fail() {
    printf 'FAIL: %s\n' "$*" >&2
    failures=$((failures + 1))
}
# as_started CMD...: runs pg-cluster with the port it was started on.
as_started() { DURO_PG_PORT=$port sh "$pg_cluster" "$@"; }
# without_port CMD...: runs pg-cluster without DURO_PG_PORT.
without_port() (
    unset DURO_PG_PORT
    sh "$pg_cluster" "$@"
)
cleanup() {
    if [ -d "$dir" ]; then
        as_started stop "$dir" >/dev/null 2>&1
    fi
    if [ -n "${DURO_TEST_KEEP:-}" ] && [ "$failures" != 0 ]; then
        echo "kept $tmp"
    else
        rm -rf "$tmp"
    fi
}
trap cleanup EXIT
trap 'exit 1' HUP INT TERM

sh "$pg_cluster" bindir >/dev/null 2>&1
rc=$?
if [ "$rc" = 77 ]; then
    echo "PostgreSQL server binaries not found: skipped"
    exit 77
fi
bindir=$(sh "$pg_cluster" bindir) || exit 1

echo "== start on port $port"
url=$(as_started start "$dir" </dev/null) || {
    echo "FAIL: pg-cluster start failed" >&2
    exit 1
}
echo "$url"
root=$(cat "$dir/root")
[ "$(cat "$dir/port" 2>/dev/null)" = "$port" ] ||
    fail "$dir/port does not record port $port"

# A bounded wait, so that a crash waiting on the wrong port fails soon.
export DURO_PG_START_TIMEOUT=15
echo "== crash without DURO_PG_PORT"
if ! without_port crash "$dir" </dev/null >"$tmp/crash.log" 2>&1; then
    fail "pg-cluster crash without DURO_PG_PORT failed: $(cat "$tmp/crash.log")"
fi
[ -d "$dir" ] || fail "crash removed the cluster's directory"
"$bindir/pg_isready" -q -h "$root" -p "$port" -t 10 ||
    fail "the server does not accept connections on port $port after crash"

echo "== restart fast, down and up without DURO_PG_PORT"
if ! without_port restart "$dir" fast </dev/null >"$tmp/restart.log" 2>&1; then
    fail "pg-cluster restart fast failed: $(cat "$tmp/restart.log")"
fi
"$bindir/pg_isready" -q -h "$root" -p "$port" -t 10 ||
    fail "the server does not accept connections after restart"
if ! without_port down "$dir" </dev/null >"$tmp/down.log" 2>&1; then
    fail "pg-cluster down failed: $(cat "$tmp/down.log")"
fi
"$bindir/pg_isready" -q -h "$root" -p "$port" -t 2 &&
    fail "the server still accepts connections after down"
[ -d "$root/data" ] || fail "down removed the cluster"
if ! without_port up "$dir" </dev/null >"$tmp/up.log" 2>&1; then
    fail "pg-cluster up failed: $(cat "$tmp/up.log")"
fi
"$bindir/pg_isready" -q -h "$root" -p "$port" -t 10 ||
    fail "the server does not accept connections after up"

echo "== stop without DURO_PG_PORT"
if ! without_port stop "$dir" </dev/null >"$tmp/stop.log" 2>&1; then
    fail "pg-cluster stop without DURO_PG_PORT failed: $(cat "$tmp/stop.log")"
fi
[ ! -e "$dir" ] || fail "stop left $dir"
[ ! -e "$root" ] || fail "stop left $root"

echo "$failures failed"
[ "$failures" = 0 ]
