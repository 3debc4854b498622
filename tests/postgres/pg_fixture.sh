#!/bin/sh
# pg_fixture.sh start|stop PG_CLUSTER DIR URL_FILE - the CTest fixture around
# the PostgreSQL tests (pg_cluster_start, pg_cluster_stop): start runs
# `PG_CLUSTER start DIR` (.ci/pg-cluster) and leaves the URL in URL_FILE,
# which the tests read; stop stops that cluster, removes DIR and URL_FILE.
# CTest runs stop even when tests fail. With DURO_TEST_PG_URL set, the tests
# use that server instead and no cluster is started.
# pg_fixture.sh skipped REASON - the test postgres_skipped, registered
# instead of the fixture when the build found no server binaries or no
# libpq: says so and exits 77, which CTest reports as skipped.
set -u

if [ $# -eq 2 ] && [ "$1" = skipped ]; then
    if [ -n "${DURO_TEST_PG_URL:-}" ]; then
        echo "$2: no throwaway cluster; the PostgreSQL tests that were" \
             "built use DURO_TEST_PG_URL"
    else
        echo "$2: the PostgreSQL tests were skipped"
    fi
    exit 77
fi
if [ $# -ne 4 ]; then
    echo "usage: $0 start|stop PG_CLUSTER DIR URL_FILE | skipped REASON" >&2
    exit 2
fi
action=$1 pg_cluster=$2 dir=$3 url_file=$4

case $action in
start)
    if [ -n "${DURO_TEST_PG_URL:-}" ]; then
        echo "DURO_TEST_PG_URL is set: the PostgreSQL tests use that server;" \
             "no cluster started"
        rm -f "$url_file"
        exit 0
    fi
    mkdir -p "$(dirname "$url_file")" || exit 1
    url=$(sh "$pg_cluster" start "$dir" "$url_file") || exit $?
    echo "PostgreSQL cluster started: $url"
    ;;
stop)
    rm -f "$url_file"
    sh "$pg_cluster" stop "$dir" || exit $?
    echo "PostgreSQL cluster in $dir stopped and removed"
    ;;
*)
    echo "$0: unknown action '$action'" >&2
    exit 2
    ;;
esac
