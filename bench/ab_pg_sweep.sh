#!/bin/sh
# ab_pg_sweep.sh URL ROUNDS A B [N]: times `duro cancel --name bulka` (a
# PostgreSQL sweep: cancel_matching) over N pending instances (default
# 50,000) with the duro command of build directory A, then of B, ROUNDS
# times interleaved. The instances live in schema sweepbench of the server
# at URL (created, with build B's duro and psql, when missing, and dropped
# at the end); before each run their cancellations and queued messages are
# removed and the tables vacuumed. Prints one JSON object per run:
# {"build": "a"|"b", "round": R, "ms": wall time of the command}.
set -u
[ $# -ge 4 ] || {
    echo "usage: ab_pg_sweep.sh URL ROUNDS A B [N]" >&2
    exit 2
}
url=$1 rounds=$2 a=$3 b=$4 n=${5:-50000}
store="$url&schema=sweepbench"
case $url in *\?*) ;; *) store="$url?schema=sweepbench" ;; esac

export PGOPTIONS="${PGOPTIONS:-} -c client_min_messages=warning"
sql() { psql "$url" -qXc "$1" >/dev/null || exit 1; }

sql "DROP SCHEMA IF EXISTS sweepbench CASCADE"
"$b/tools/duro/duro" --db "$store" start bulka b0 >/dev/null || exit 1
sql "INSERT INTO sweepbench.instances(instance_id, name, version, status,
     execution_id, created_ms, updated_ms, category)
     SELECT 'b' || lpad(g::text, 7, '0'), 'bulka', '', 1, 0,
     1700000000000 + g, 1700000000000 + g, 0
     FROM generate_series(1, $n - 1) AS g"

reset() {
    sql "UPDATE sweepbench.instances SET cancel_requested_ms = NULL,
         cancel_reason = NULL, cancelled_by = NULL;
         DELETE FROM sweepbench.orchestrator_queue;
         DELETE FROM sweepbench.orchestrator_ready"
    for t in instances orchestrator_queue orchestrator_ready; do
        sql "VACUUM ANALYZE sweepbench.$t"
    done
}

for r in $(seq 1 "$rounds"); do
    for build in a b; do
        dir=$a
        [ "$build" = b ] && dir=$b
        reset
        start=$(date +%s%N)
        "$dir/tools/duro/duro" --db "$store" cancel --name bulka \
            --reason bench >/dev/null ||
            echo "ab_pg_sweep: round $r of $build failed" >&2
        end=$(date +%s%N)
        echo "{\"build\":\"$build\",\"round\":$r,\"ms\":$(((end - start) / 1000000))}"
    done
done
sql "DROP SCHEMA sweepbench CASCADE"
