#!/bin/sh
# pg_cost_bench.sh - what `duro list` (its first page of 100) and `duro
# metrics` cost on a PostgreSQL store of INSTANCES instances, QUEUED of
# them pending with a ready START message: the wall time of each command,
# process start and connection included, for each build directory given,
# ROUNDS rounds after one warm-up run each, the builds' order rotated each
# round (A B, B A, ...) so that what else runs on the machine weighs on
# both alike. The store is loaded once, straight into the tables with
# generate_series (rows as wide as the provider's own: JSON outputs and
# payloads), and vacuumed as autovacuum would, in schema costbench_<pid>
# of the server at URL, made by the first build's `duro start` and dropped
# at the end, after a failure too.
#
#   bench/pg_cost_bench.sh URL ROUNDS INSTANCES QUEUED BUILD [BUILD...]
#
# URL is a postgres:// or postgresql:// URL (?schema=... is appended);
# psql must reach it. Prints one JSON object per run, then one per build
# and verb with the median and range:
#   {"bench":"pg_cost","build":"B","round":1,"verb":"list",
#    "instances":220000,"queued":100000,"ms":21.4}
#   {"bench":"pg_cost","summary":true,"build":"B","verb":"list",...,
#    "runs":5,"median_ms":21.4,"min_ms":19.8,"max_ms":25.0}
# where build is the directory's last component. Exit 1 when a command
# failed (its runs are still printed, with "failed":true).
set -u
[ $# -ge 5 ] || {
    echo "usage: pg_cost_bench.sh URL ROUNDS INSTANCES QUEUED BUILD [BUILD...]" >&2
    exit 2
}
url=$1 rounds=$2 instances=$3 queued=$4
shift 4
[ "$queued" -le "$instances" ] || {
    echo "pg_cost_bench: QUEUED ($queued) is more than INSTANCES ($instances)" >&2
    exit 2
}
for dir in "$@"; do
    [ -x "$dir/tools/duro/duro" ] || {
        echo "pg_cost_bench: no $dir/tools/duro/duro" >&2
        exit 2
    }
done
schema="costbench_$$"
case $url in
*\?*) store="$url&schema=$schema" ;;
*) store="$url?schema=$schema" ;;
esac
export PGOPTIONS="${PGOPTIONS:-} -c client_min_messages=warning"
out=$(mktemp) || exit 1
cleanup() {
    psql "$url" -qXc "DROP SCHEMA IF EXISTS $schema CASCADE" >/dev/null 2>&1 ||
        echo "pg_cost_bench: could not drop schema $schema" >&2
    rm -f "$out"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP
sql() { psql "$url" -qXv ON_ERROR_STOP=1 -c "$1" >/dev/null || exit 1; }

"$1/tools/duro/duro" --db "$store" start Seed seed >/dev/null || exit 1
sql "SET search_path TO $schema;
TRUNCATE instances, orchestrator_queue, orchestrator_ready;
INSERT INTO instances(instance_id, name, status, execution_id, created_ms,
    updated_ms, output, error, finished_ms)
SELECT 'i-' || lpad(g::text, 7, '0'), (ARRAY['Pay', 'Ship', 'User'])[1 + g % 3],
    CASE WHEN g <= $queued THEN 1 WHEN g % 50 = 0 THEN 4 ELSE 3 END,
    CASE WHEN g <= $queued THEN 0 ELSE 1 END,
    1700000000000 + g * 10, 1700000000000 + g * 10,
    CASE WHEN g > $queued AND g % 50 <> 0
        THEN '{\"receipt\":\"' || repeat(md5(g::text), 6) || '\"}' END,
    CASE WHEN g > $queued AND g % 50 = 0 THEN 'card declined' END,
    CASE WHEN g > $queued THEN 1700000000000 + g * 10 + 5 END
FROM generate_series(1, $instances) AS g;
INSERT INTO orchestrator_queue(instance_id, kind, name, payload, enqueued_ms,
    visible_at)
SELECT 'i-' || lpad(g::text, 7, '0'), 1, (ARRAY['Pay', 'Ship', 'User'])[1 + g % 3],
    '{\"order\":' || g || ',\"lines\":\"' || repeat(md5(g::text), 8) || '\"}',
    1700000000000 + g * 10, 1700000000000 + g * 10
FROM generate_series(1, $queued) AS g;
INSERT INTO orchestrator_ready(instance_id, ready_at)
SELECT 'i-' || lpad(g::text, 7, '0'), 1700000000000 + g * 10
FROM generate_series(1, $queued) AS g"
for t in instances orchestrator_queue orchestrator_ready; do
    sql "VACUUM (ANALYZE) $schema.$t"
done

status=0
# run BUILD ROUND VERB: one timed run (ROUND 0: the warm-up, not printed)
run() {
    start=$(date +%s%N)
    if [ "$3" = list ]; then
        "$1/tools/duro/duro" --db "$store" list >/dev/null 2>&1
    else
        "$1/tools/duro/duro" --db "$store" metrics >/dev/null 2>&1
    fi
    rc=$?
    end=$(date +%s%N)
    failed=
    if [ $rc -ne 0 ]; then
        failed=',"failed":true'
        status=1
        echo "pg_cost_bench: $1: duro $3 exited $rc" >&2
    fi
    [ "$2" = 0 ] && return
    ms=$(((end - start) / 10000))
    printf '{"bench":"pg_cost","build":"%s","round":%d,"verb":"%s","instances":%d,"queued":%d,"ms":%d.%02d%s}\n' \
        "$(basename "$1")" "$2" "$3" "$instances" "$queued" $((ms / 100)) \
        $((ms % 100)) "$failed" | tee -a "$out"
}

for dir in "$@"; do
    run "$dir" 0 list
    run "$dir" 0 metrics
done
nbuilds=$#
r=1
while [ "$r" -le "$rounds" ]; do
    # rotate: round r starts with build (r - 1) mod n
    k=0
    while [ "$k" -lt "$nbuilds" ]; do
        i=$((((r - 1 + k) % nbuilds) + 1))
        eval "dir=\${$i}"
        run "$dir" "$r" list
        run "$dir" "$r" metrics
        k=$((k + 1))
    done
    r=$((r + 1))
done

python3 - "$out" <<'EOF'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
keys = []
for r in runs:
    k = (r["build"], r["verb"])
    if k not in keys:
        keys.append(k)
for build, verb in keys:
    ms = [r["ms"] for r in runs if (r["build"], r["verb"]) == (build, verb)]
    base = next(r for r in runs if (r["build"], r["verb"]) == (build, verb))
    print(json.dumps({"bench": "pg_cost", "summary": True, "build": build,
                      "verb": verb, "instances": base["instances"],
                      "queued": base["queued"], "runs": len(ms),
                      "median_ms": round(statistics.median(ms), 2),
                      "min_ms": min(ms), "max_ms": max(ms)},
                     separators=(",", ":")))
EOF
exit $status
