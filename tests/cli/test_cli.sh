#!/bin/sh
# test_cli.sh DURO FIXTURE TOOLDIR - runs the duro command against real SQLite files
# that FIXTURE (cli_fixture) filled with instances in known states, and
# checks exit statuses, JSON shapes (with python3 when present), human
# output, bad input, and that read verbs never create a database; then that
# the man page (TOOLDIR/duro.1) documents every verb and the bash completion
# (TOOLDIR/duro.bash) completes verbs, options and status names.
# DURO_TEST_KEEP=1 keeps the temporary directory.
set -u

if [ $# -ne 3 ]; then
    echo "usage: $0 DURO FIXTURE TOOLDIR" >&2
    exit 2
fi
duro=$1 fixture=$2 tooldir=$3
here=$(cd "$(dirname "$0")" && pwd) # pty_run.py
tmp=$(mktemp -d "${TMPDIR:-/tmp}/duro-cli-test.XXXXXX")
serve_pid=""
cleanup() {
    # a runtime left serving (cli_fixture serve) by a test that failed
    [ -n "$serve_pid" ] && kill "$serve_pid" 2>/dev/null
    if [ -n "${DURO_TEST_KEEP:-}" ]; then echo "kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
trap 'exit 1' HUP INT TERM

db="sqlite:$tmp/store.db"
export DURO_DB="$db"
unset NO_COLOR || true
failures=0
checks=0
fail() {
    printf 'FAIL: %s\n' "$*" >&2
    failures=$((failures + 1))
}
# run EXPECTED_RC ARGS...: runs duro with ARGS; stdout in $tmp/out, stderr
# in $tmp/err.
run() {
    want=$1
    shift
    checks=$((checks + 1))
    "$duro" "$@" >"$tmp/out" 2>"$tmp/err"
    got=$?
    if [ "$got" != "$want" ]; then
        fail "duro $* exited $got, expected $want"
        sed 's/^/  stdout: /' "$tmp/out" >&2
        sed 's/^/  stderr: /' "$tmp/err" >&2
    fi
    if grep -q "$(printf '\033')" "$tmp/out" "$tmp/err"; then
        fail "duro $*: ESC byte in output that is not a terminal"
    fi
}
# contains FILE TEXT: FILE has TEXT (fixed string).
contains() {
    grep -qF -- "$2" "$1" || fail "$1 lacks '$2': $(head -c 600 "$1")"
}
# one_line: stderr is exactly one line.
one_line() {
    n=$(wc -l <"$tmp/err")
    [ "$n" = 1 ] || fail "stderr has $n lines, expected 1: $(cat "$tmp/err")"
}
have_python=0
command -v python3 >/dev/null 2>&1 && have_python=1
# json EXPR: evaluates python EXPR with d = the JSON on stdout; fails
# unless it is true. Skipped without python3.
json() {
    [ "$have_python" = 1 ] || return 0
    checks=$((checks + 1))
    if ! python3 -c '
import json, re, sys
d = json.load(open(sys.argv[1], encoding="utf-8"))
rfc = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
ok = eval(sys.argv[2])
sys.exit(0 if ok else 1)' "$tmp/out" "$1" 2>"$tmp/pyerr"; then
        fail "JSON check failed: $1 on $(head -c 800 "$tmp/out") $(cat "$tmp/pyerr")"
    fi
}

echo "== populate $db"
if ! "$fixture" populate "$db"; then
    echo "FAIL: cli_fixture populate" >&2
    exit 1
fi

echo "== help, version, usage errors"
run 0 --help
contains "$tmp/out" "Verbs:"
run 0 version
contains "$tmp/out" "duro "
run 0 version --json
json 'set(d) == {"version", "library_version"}'
for verb in list status history start raise wait cancel terminate suspend \
    resume delete purge prune metrics runtimes version; do
    run 0 "$verb" --help
    contains "$tmp/out" "usage: duro $verb"
    run 0 "$verb" -h
done
run 2
contains "$tmp/err" "Verbs:"
run 2 --json
json 'd["error"]["code"] == "usage"'
run 2 frobnicate
one_line
run 2 list --bogus
one_line
contains "$tmp/err" "unknown option '--bogus'"
run 2 --bogus list
run 2 list --stat completed
contains "$tmp/err" "abbreviated"
run 2 list --limit
contains "$tmp/err" "needs a value"
run 2 list --json --status sideways
json 'd["error"]["code"] == "usage" and "sideways" in d["error"]["message"]'
one_line
run 2 status
run 2 status a b
# an empty id is a usage error everywhere, with one clean message
for verb in status history wait; do
    run 2 "$verb" ""
    one_line
    contains "$tmp/err" "duro $verb: the instance id must not be empty"
done
run 2 start Hello ""
run 2 raise "" go
run 2 delete ""
run 2 prune "" --keep 1
# an over-long id is quoted shortened, and the reason shows
long_id=$(printf '%03000d' 7)
run 1 status "$long_id"
one_line
contains "$tmp/err" "…: instance id is longer than 1024 bytes"
[ "$(wc -c <"$tmp/err")" -lt 300 ] || fail "the long id is quoted whole: $(wc -c <"$tmp/err") bytes"
run 2 history hello-1 --execution -1
contains "$tmp/err" "expected 1 to 18446744073709551615"
run 2 prune hello-1 --keep 0
contains "$tmp/err" "expected 1 to"
# --json is an option only where getopt sees one, not an option's value
run 0 start Hello jj --input --json
contains "$tmp/out" "started jj (Hello)"
run 0 list --name --json
[ -s "$tmp/out" ] && fail "list --name --json printed JSON: $(cat "$tmp/out")"
contains "$tmp/err" "no instances match"
run 2 list --status sideways --json
json 'd["error"]["code"] == "usage"'
run 2 list -- --json
run 0 delete jj --force
run 0 cancel --help
contains "$tmp/out" "name from"
contains "$tmp/out" "the password database, else \$USER"
run 0 raise --help
contains "$tmp/out" "suspended: a suspended one records it"
run 0 wait --help
contains "$tmp/out" "0 completed, 8 failed, 9 cancelled, 10 terminated, 7"
run 0 --help
contains "$tmp/out" "wait: 8 ended failed, 9 cancelled, 10 terminated"

echo "== metrics"
run 0 metrics
for line in \
    'duro_instances{orchestration="Hello",status="completed"} 2' \
    'duro_instances{orchestration="Hello",status="pending"} 1' \
    'duro_instances{orchestration="Hello",status="failed"} 0' \
    'duro_instances{orchestration="Boom",status="failed"} 1' \
    'duro_instances{orchestration="Waiter",status="running"} 3' \
    'duro_instances{orchestration="Slow",status="cancelled"} 1' \
    'duro_queue_messages{queue="orchestrator",state="delayed"} 1' \
    'duro_queue_messages{queue="orchestrator",state="ready"} 0' \
    'duro_queue_messages{queue="worker",state="locked"} 0' \
    'duro_queue_oldest_ready_age_seconds{queue="worker"} 0.000' \
    '# TYPE duro_instances_stuck gauge'; do
    grep -qxF -- "$line" "$tmp/out" || fail "metrics lacks the line '$line'"
done
grep -Eqx 'duro_store_size_bytes [1-9][0-9]*' "$tmp/out" ||
    fail "metrics has no store size"
cp "$tmp/out" "$tmp/metrics.txt"
# The exposition format, line by line: every family's HELP then TYPE before
# its samples, one uninterrupted group each, no series twice, a final
# newline; then promtool's verdict when it is available.
if [ "$have_python" = 1 ]; then
    checks=$((checks + 1))
    python3 - "$tmp/metrics.txt" <<'PY' 2>"$tmp/pyerr" ||
import re, sys
text = open(sys.argv[1], encoding="utf-8").read()
assert text.endswith("\n"), "no final newline"
sample = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="(\\[\\"n]|[^\\"\n])*"(,[a-zA-Z_][a-zA-Z0-9_]*="(\\[\\"n]|[^\\"\n])*")*)?\})? (-?[0-9]+(\.[0-9]+)?|NaN|[+-]Inf)$')
seen_families, seen_series, current = set(), set(), None
state = None
for line in text[:-1].split("\n"):
    if line.startswith("# HELP "):
        name = line.split(" ")[2]
        assert name not in seen_families, "family %s twice" % name
        seen_families.add(name); current = name; state = "help"
    elif line.startswith("# TYPE "):
        _, _, name, kind = line.split(" ")
        assert name == current and state == "help", "TYPE without HELP: " + line
        assert kind == "gauge", line
        state = "type"
    else:
        m = sample.match(line)
        assert m, "not a sample: %r" % line
        assert m.group(1) == current and state == "type", "sample outside its family: " + line
        key = (m.group(1), m.group(3))
        assert key not in seen_series, "series twice: " + line
        seen_series.add(key)
assert seen_families == {"duro_instances", "duro_instances_stuck", "duro_queue_messages", "duro_queue_oldest_ready_age_seconds", "duro_store_size_bytes", "duro_schedules", "duro_schedule_overdue_seconds"}, seen_families
PY
        fail "metrics exposition: $(cat "$tmp/pyerr")"
fi
promtool=${DURO_PROMTOOL:-}
[ -n "$promtool" ] || promtool=$(command -v promtool 2>/dev/null) ||
    promtool="${XDG_CACHE_HOME:-${HOME:-/nonexistent}/.cache}/duro/prometheus/usr/bin/promtool"
if [ -x "$promtool" ]; then
    checks=$((checks + 1))
    "$promtool" check metrics <"$tmp/metrics.txt" >"$tmp/prom" 2>&1 ||
        fail "promtool check metrics: $(cat "$tmp/prom")"
else
    echo "note: promtool not found; the python check stands alone"
fi
run 0 metrics --output "$tmp/scrape.prom"
[ -s "$tmp/out" ] && fail "metrics --output also wrote stdout"
grep -v '^duro_store_size_bytes ' "$tmp/scrape.prom" >"$tmp/a"
grep -v '^duro_store_size_bytes ' "$tmp/metrics.txt" >"$tmp/b"
cmp -s "$tmp/a" "$tmp/b" || fail "metrics --output differs from stdout"
ls "$tmp"/scrape.prom.tmp* >/dev/null 2>&1 && fail "metrics --output left a temporary file"
# the mode: the replaced file's, else 0666 less the umask (not mkstemp's 0600)
chmod 644 "$tmp/scrape.prom"
run 0 metrics --output "$tmp/scrape.prom"
[ "$(stat -c %a "$tmp/scrape.prom")" = 644 ] ||
    fail "metrics --output replaced a 0644 file with mode $(stat -c %a "$tmp/scrape.prom")"
chmod 640 "$tmp/scrape.prom"
run 0 metrics --output "$tmp/scrape.prom"
[ "$(stat -c %a "$tmp/scrape.prom")" = 640 ] ||
    fail "metrics --output did not keep mode 0640: $(stat -c %a "$tmp/scrape.prom")"
(umask 022 && "$duro" metrics --output "$tmp/new.prom") ||
    fail "metrics --output new.prom failed"
[ "$(stat -c %a "$tmp/new.prom")" = 644 ] ||
    fail "metrics --output made a new file with mode $(stat -c %a "$tmp/new.prom") under umask 022"
run 0 metrics --json
json 'set(d) == {"at", "at_ms", "instances", "stuck", "queues", "store_size_bytes", "schedules"}'
json '{"orchestration": "Waiter", "status": "running", "count": 3} in d["instances"]'
json 'd["queues"]["orchestrator"]["delayed"] == 1 and d["queues"]["worker"]["ready"] == 0 and d["queues"]["worker"]["oldest_ready_ms"] is None'
run 2 metrics --json --output "$tmp/x.prom"
run 2 metrics extra
run 1 --db "sqlite:$tmp/absent.db" metrics
[ -e "$tmp/absent.db" ] && fail "metrics created a database"
# Label values are escaped: a name with a quote, a backslash and a newline.
run 0 --db "sqlite:$tmp/labels.db" start 'we"ird\na
me' odd-1
run 0 --db "sqlite:$tmp/labels.db" metrics
grep -qxF 'duro_instances{orchestration="we\"ird\\na\nme",status="pending"} 1' "$tmp/out" ||
    fail "metrics did not escape a label value: $(grep orchestration=.we "$tmp/out")"
grep -qxF 'duro_queue_messages{queue="orchestrator",state="ready"} 1' "$tmp/out" ||
    fail "metrics: the START of odd-1 is not ready"
grep -Eqx 'duro_queue_oldest_ready_age_seconds\{queue="orchestrator"\} [0-9]+\.[0-9]{3}' "$tmp/out" ||
    fail "metrics: no age for the ready START"

echo "== list"
run 0 list
contains "$tmp/out" "ID"
contains "$tmp/out" "hello-1"
grep -Eq "(just now|ago)" "$tmp/out" || fail "list shows no relative age"
run 0 list --json
json 'set(d) == {"instances", "total", "total_capped", "truncated"} and d["total"] == 8 and d["total_capped"] is False and d["truncated"] is False and len(d["instances"]) == 8'
json '[i["id"] for i in d["instances"]] == sorted(i["id"] for i in d["instances"])'
json 'all(rfc.match(i["created_at"]) and isinstance(i["created_at_ms"], int) for i in d["instances"])'
run 0 list --limit 2 --json
json 'd["total"] == 8 and d["truncated"] is True and len(d["instances"]) == 2'
run 0 list --limit 2
contains "$tmp/err" "showing 2 of 8"
run 0 list --status completed,failed --json
json 'sorted(i["id"] for i in d["instances"]) == ["boom-1", "hello-1", "hello-2"]'
run 0 --json list --status RUNNING --name Waiter
json 'd["total"] == 3'
run 0 list --since 1h --json
json 'd["total"] == 8'
run 0 list --until "30m ago" --json
json 'd["total"] == 0'
run 0 list --since 2000-01-01 --until 2999-12-31T00:00:00Z --json
json 'd["total"] == 8'
run 0 list --since "2000-01-01T00:00:00.5+02:00" --json
json 'd["total"] == 8'
echo "== list --json over many pages"
# 2,600 more instances (the listing reads 1,000 per page and --json prints
# each page as it comes): the document is whole, in id order, formatted as
# one indented dump of it would be, and --limit cuts across a page.
cp "$tmp/store.db" "$tmp/many.db"
"$fixture" sql "$tmp/many.db" "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL
    SELECT i + 1 FROM n WHERE i < 2600)
    INSERT INTO instances(instance_id, name, status, created_ms, updated_ms)
    SELECT printf('many-%05d', i), 'Many', 1, 1700000000000 + i,
    1700000000000 + i FROM n" || fail "cli_fixture sql (many)"
run 0 --db "sqlite:$tmp/many.db" list --limit 0 --json
json 'd["total"] == 2608 and d["truncated"] is False and len(d["instances"]) == 2608'
json '[i["id"] for i in d["instances"]] == sorted(set(i["id"] for i in d["instances"]))'
json 'open(sys.argv[1], encoding="utf-8").read() == json.dumps(d, indent=2, ensure_ascii=False) + "\n"'
run 0 --db "sqlite:$tmp/many.db" list --limit 1500 --json
json 'd["total"] == 2608 and d["truncated"] is True and len(d["instances"]) == 1500'
json '[i["id"] for i in d["instances"]] == sorted(set(i["id"] for i in d["instances"]))'
run 0 --db "sqlite:$tmp/many.db" list --status completed --json
json 'open(sys.argv[1], encoding="utf-8").read() == json.dumps(d, indent=2, ensure_ascii=False) + "\n"'
run 0 --db "sqlite:$tmp/many.db" list --name Nobody --json
json 'd == {"instances": [], "total": 0, "total_capped": False, "truncated": False}'
json 'open(sys.argv[1], encoding="utf-8").read() == json.dumps(d, indent=2, ensure_ascii=False) + "\n"'
echo "== list counts up to 10,000"
# 10,001 more instances: the first page counts the matches up to 10,000
# (more than that: "more than"), a --limit above that counts up to it,
# and a filter that matches fewer is counted exactly.
cp "$tmp/store.db" "$tmp/lots.db"
"$fixture" sql "$tmp/lots.db" "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL
    SELECT i + 1 FROM n WHERE i < 10001)
    INSERT INTO instances(instance_id, name, status, created_ms, updated_ms)
    SELECT printf('lots-%05d', i), 'Lots', 1, 1700000000000 + i,
    1700000000000 + i FROM n" || fail "cli_fixture sql (lots)"
run 0 --db "sqlite:$tmp/lots.db" list
contains "$tmp/err" "showing 100 of more than 10000; use --limit K (0: all)"
run 0 --db "sqlite:$tmp/lots.db" list --json
json 'd["total"] == 10000 and d["total_capped"] is True and d["truncated"] is True and len(d["instances"]) == 100'
run 0 --db "sqlite:$tmp/lots.db" list --name Lots --limit 5 --json
json 'd["total"] == 10000 and d["total_capped"] is True and d["truncated"] is True and len(d["instances"]) == 5'
run 0 --db "sqlite:$tmp/lots.db" list --limit 10005 --json
json 'd["total"] == 10005 and d["total_capped"] is True and d["truncated"] is True and len(d["instances"]) == 10005'
run 0 --db "sqlite:$tmp/lots.db" list --limit 20000 --json
json 'd["total"] == 10009 and d["total_capped"] is False and d["truncated"] is False and len(d["instances"]) == 10009'
run 0 --db "sqlite:$tmp/lots.db" list --status completed,failed --limit 1
contains "$tmp/err" "showing 1 of 3; use --limit K (0: all)"

run 2 list --since yesterday
contains "$tmp/err" "bad time 'yesterday'"
run 2 list --until 2026-13-01
run 2 list --limit -1
# dates that do not exist and malformed offsets are refused, not normalised
for t in 2026-02-31 2026-04-31 2026-02-29 "2026-05-01T12:00+02:" \
    "2026-05-01T12:00+02:0" "2026-05-01T12:00+25:00" "2026-05-01T12:00+02:60"; do
    run 2 list --since "$t"
    contains "$tmp/err" "bad time"
done
run 0 list --since 2024-02-29 --json
json 'd["total"] == 8'
run 0 list --since "2000-01-01T12:00+02" --json
json 'd["total"] == 8'
run 0 list --since "2000-01-01T12:00-0130" --json
json 'd["total"] == 8'
# continued_as_new is no instance's status: refused, not an empty match
run 2 list --status continued_as_new
contains "$tmp/err" "stays running"
run 0 list --help
contains "$tmp/out" "continues as new stays running"

echo "== status"
run 0 status hello-1
contains "$tmp/out" "status:"
contains "$tmp/out" "completed"
contains "$tmp/out" "cancelled_by:"
contains "$tmp/out" "next_attempt:"
run 0 status hello-1 --json
json 'd["id"] == "hello-1" and d["status"] == "completed" and d["output"] == {"greeting": "hi"}'
json 'rfc.match(d["finished_at"]) and d["finished_at_ms"] >= d["created_at_ms"] and d["cancel_requested_at"] is None'
run 0 status hello-2 --json
json '"\ufffd" in d["output"] and d["output"].startswith("not json ")'
run 0 status boom-1 --json
json 'd["status"] == "failed" and "flux capacitor" in d["error"]'
run 0 status slow-1
contains "$tmp/out" "user:alice"
contains "$tmp/out" "bad deploy"
run 0 status slow-1 --json
json 'd["status"] == "cancelled" and d["cancelled_by"] == "user:alice" and d["cancel_reason"] == "bad deploy" and rfc.match(d["cancel_requested_at"])'
run 0 status later-1 --json
json 'd["status"] == "pending" and d["cancel_outcome"] is None'
run 0 status slow-1 --json
json 'd["cancel_outcome"] == "cancelled" and d["cancelling"] is False'
# a cancel that arrived while the turn that finished the instance ran: it
# ended completed (failed) with the request recorded, and is never shown
# as cancelled or cancelling (the race itself: "cancel --wait" below)
cp "$tmp/store.db" "$tmp/late.db"
[ -e "$tmp/store.db-wal" ] && cp "$tmp/store.db-wal" "$tmp/late.db-wal"
"$fixture" sql "$tmp/late.db" "UPDATE instances SET cancel_requested_ms =
    finished_ms, cancel_reason = 'too slow', cancelled_by = 'user:zed'
    WHERE instance_id IN ('hello-1', 'boom-1')" || fail "cli_fixture sql (late)"
run 0 --db "sqlite:$tmp/late.db" status hello-1
grep -Eq '^status: +completed$' "$tmp/out" || fail "status hello-1 (late): $(cat "$tmp/out")"
grep -Eq '^cancel_requested: .* by user:zed, arrived after the instance completed: not applied$' "$tmp/out" ||
    fail "status hello-1 (late): $(cat "$tmp/out")"
grep -Eq '^cancelled_by: +-$' "$tmp/out" || fail "status hello-1 (late) names a canceller: $(cat "$tmp/out")"
contains "$tmp/out" "too slow"
run 0 --db "sqlite:$tmp/late.db" status boom-1
contains "$tmp/out" "by user:zed, arrived after the instance failed: not applied"
run 0 --db "sqlite:$tmp/late.db" status hello-1 --json
json 'd["status"] == "completed" and d["cancel_outcome"] == "too_late" and d["cancelling"] is False and d["cancelled_by"] == "user:zed" and rfc.match(d["cancel_requested_at"])'
run 0 --db "sqlite:$tmp/late.db" list --json
json '[(i["id"], i["cancel_outcome"]) for i in d["instances"] if i["cancel_outcome"] == "too_late"] == [("boom-1", "too_late"), ("hello-1", "too_late")]'
json 'not any(i["cancelling"] for i in d["instances"] if i["id"] in ("boom-1", "hello-1"))'
run 0 --db "sqlite:$tmp/late.db" list --status completed
grep -q cancel "$tmp/out" && fail "list shows a late cancel as cancelling: $(cat "$tmp/out")"
run 0 status --help
contains "$tmp/out" "did not apply"
run 3 status nope
one_line
contains "$tmp/err" "nope"
run 3 status nope --json
json 'd == {"error": {"code": "not_found", "message": d["error"]["message"]}} and "nope" in d["error"]["message"]'
one_line

echo "== history"
run 0 history slow-1
contains "$tmp/out" '#1'
contains "$tmp/out" "OrchestrationCancelRequested"
contains "$tmp/out" 'reason="bad deploy" by=user:alice'
# not registered with observe_cancel: no "observed"
grep -Eq 'OrchestrationCancelRequested +- +reason="bad deploy" by=user:alice$' "$tmp/out" ||
    fail "history slow-1: $(cat "$tmp/out")"
contains "$tmp/out" 'reason="instance_cancelled" by=user:alice'
contains "$tmp/out" "(#2, "
run 0 history hello-1 --execution 1 --json
json 'd["instance_id"] == "hello-1" and d["execution_id"] == 1 and [e["kind"] for e in d["events"]] == ["OrchestrationStarted", "ActivityScheduled", "ActivityCompleted", "OrchestrationCompleted"]'
json 'd["events"][2]["source_event_id"] == 2 and d["events"][2]["payload"] == {"greeting": "hi"} and all(rfc.match(e["timestamp"]) for e in d["events"])'
# when the worker ran the activity: RFC 3339 and _ms, in order, only on completions
json 'rfc.match(d["events"][2]["started"]) and rfc.match(d["events"][2]["finished"]) and d["events"][1]["timestamp_ms"] <= d["events"][2]["started_ms"] <= d["events"][2]["finished_ms"] <= d["events"][2]["timestamp_ms"]'
json 'not any("started" in e or "finished_ms" in e for e in d["events"] if e["kind"] != "ActivityCompleted")'
run 0 history hello-1 --execution 1
grep -Eq 'ActivityCompleted .*output=.* ran [0-9.]+m?s \(\+[0-9.]+m?s -> \+[0-9.]+m?s\)$' "$tmp/out" ||
    fail "history hello-1, the run time: $(cat "$tmp/out")"
run 0 history slow-1 --json
json '[e for e in d["events"] if e["kind"] == "OrchestrationCancelRequested"][0]["requested_by"] == "user:alice"'
json 'all(e.get("requested_by") == "user:alice" for e in d["events"] if e["kind"] in ("ActivityCancelRequested", "OrchestrationCancelled"))'
json 'len([e for e in d["events"] if e["kind"] in ("ActivityCancelRequested", "OrchestrationCancelled")]) == 2'
json 'not any("observed" in e or "cleanup_deadline" in e for e in d["events"])'
run 0 history later-1 --json
json 'd == {"instance_id": "later-1", "execution_id": 0, "events": []}'
run 0 history later-1
contains "$tmp/out" "pending"
run 3 cancel --reason "dash dash" -- --dry-run
contains "$tmp/err" "--dry-run: no such instance"
run 3 history nope
run 3 history hello-1 --execution 7
contains "$tmp/err" "has no execution 7 (the current one is 1)"
run 2 history hello-1 --execution x
# the export replay tests read: every execution, payloads as the stored
# strings, times as integer milliseconds (docs/history-json.md)
run 0 history --export hello-1
json 'd["format"] == "duro-history" and d["format_version"] == 1 and d["instance_id"] == "hello-1" and [x["execution_id"] for x in d["executions"]] == [1]'
json '[e["kind"] for e in d["executions"][0]["events"]] == ["OrchestrationStarted", "ActivityScheduled", "ActivityCompleted", "OrchestrationCompleted"] and [e["event_id"] for e in d["executions"][0]["events"]] == [1, 2, 3, 4]'
json 'all(isinstance(e.get("payload", ""), str) and isinstance(e["timestamp_ms"], int) for e in d["executions"][0]["events"]) and d["executions"][0]["events"][2]["source_event_id"] == 2'
run 0 history --export later-1
json 'd["instance_id"] == "later-1" and d["executions"] == []'
run 3 history --export nope
run 2 history --export hello-1 --execution 1
contains "$tmp/err" "takes no --execution"

echo "== wait"
run 0 wait hello-1
contains "$tmp/out" "completed"
# one exit status per way of ending: failed 8, cancelled 9 (an operator's
# cancel is not a failure), terminated 10 (the control store's term-1)
run 8 wait boom-1
contains "$tmp/out" "boom-1 failed"
run 8 wait boom-1 --json
json 'd["timed_out"] is False and d["instance"]["status"] == "failed"'
run 9 wait slow-1
contains "$tmp/out" "slow-1 cancelled"
run 9 wait slow-1 --json
json 'd["timed_out"] is False and d["instance"]["status"] == "cancelled"'
run 7 wait wait-1 --timeout 100ms --json
json 'd["timed_out"] is True and d["instance"]["status"] == "running"'
run 3 wait nope --timeout 1s
run 2 wait hello-1 --timeout 5x
contains "$tmp/err" "bad duration '5x'"
run 2 wait hello-1 --timeout ""

echo "== ids with control characters are escaped in text output"
evil=$(printf 'evil\nid\033[31m')
run 0 --db "sqlite:$tmp/evil.db" start "$(printf 'Na\033me')" "$evil" --json
json 'd["id"] == "evil\nid\x1b[31m" and d["version"] == ""'
run 0 --db "sqlite:$tmp/evil.db" start Hello "$evil-2"
contains "$tmp/out" 'started evil\nid\x1b[31m-2 (Hello)'
run 0 --db "sqlite:$tmp/evil.db" list
contains "$tmp/out" 'evil\nid\x1b[31m  '
contains "$tmp/out" 'Na\x1bme'
[ "$(wc -l <"$tmp/out")" = 3 ] || fail "list: an id broke a line: $(cat "$tmp/out")"
run 0 --db "sqlite:$tmp/evil.db" status "$evil"
contains "$tmp/out" 'evil\nid\x1b[31m'
run 0 --db "sqlite:$tmp/evil.db" history "$evil"
contains "$tmp/out" 'evil\nid\x1b[31m'
run 7 --db "sqlite:$tmp/evil.db" wait "$evil" --timeout 10ms
contains "$tmp/out" 'evil\nid\x1b[31m pending'
contains "$tmp/err" "instance 'evil\nid\x1b[31m' still pending"
for verb in cancel terminate suspend; do
    run 0 --db "sqlite:$tmp/evil.db" "$verb" "$evil" --dry-run --by "$(printf 'b\ny')"
    contains "$tmp/out" 'evil\nid\x1b[31m: would be'
done
run 0 --db "sqlite:$tmp/evil.db" cancel --name "$(printf 'Na\033me')" --dry-run
contains "$tmp/out" 'would cancel 1 instance of Na\x1bme'
contains "$tmp/out" '  evil\nid\x1b[31m'
run 0 --db "sqlite:$tmp/evil.db" raise "$evil" "$(printf 'go\033')"
contains "$tmp/out" 'raised go\x1b on evil\nid\x1b[31m'
run 3 --db "sqlite:$tmp/evil.db" status "$evil-3"
one_line
contains "$tmp/err" "instance 'evil\nid\x1b[31m-3' does not exist"
run 3 --db "sqlite:$tmp/evil.db" cancel "$evil-3"
contains "$tmp/err" 'evil\nid\x1b[31m-3: no such instance'
run 2 --db "sqlite:$tmp/evil.db" list "$evil"
one_line
run 0 --db "sqlite:$tmp/evil.db" suspend "$evil-2" --by "$(printf 'ops\033')" --reason "$(printf 'r\ns')"
run 0 --db "sqlite:$tmp/evil.db" delete "$evil-2" --force
contains "$tmp/out" 'deleted evil\nid\x1b[31m-2'
echo "== bidirectional and C1 controls are escaped in text output"
# U+202E (right-to-left override), U+2066 and U+2069 (isolates), U+009B
# (CSI): each shown as \uXXXX, never as the bytes a terminal obeys
bidi=$(printf 'bidi\342\200\256dI\342\201\246x\342\201\251\302\233')
bidi_shown='bidi\u202edI\u2066x\u2069\u009b'
bidi_name=$(printf 'Na\342\200\217me\330\234')
bdb="sqlite:$tmp/bidi.db"
# no_raw_bidi: neither stdout nor stderr holds a bidirectional control,
# a line or paragraph separator or a C1 control
no_raw_bidi() {
    checks=$((checks + 1))
    if LC_ALL=C grep -q "$(printf '\342\200[\216\217\250-\256]\|\342\201[\246-\251]\|\330\234\|\302[\200-\237]')" \
        "$tmp/out" "$tmp/err"; then
        fail "raw bidirectional or C1 control in the output: $(cat -v "$tmp/out" "$tmp/err")"
    fi
}
run 0 --db "$bdb" start Hello "$bidi"
contains "$tmp/out" "started $bidi_shown (Hello)"
no_raw_bidi
run 0 --db "$bdb" start "$bidi_name" plain-b
contains "$tmp/out" 'started plain-b (Na\u200fme\u061c)'
no_raw_bidi
run 0 --db "$bdb" list
contains "$tmp/out" "$bidi_shown  "
contains "$tmp/out" 'Na\u200fme\u061c'
no_raw_bidi
run 0 --db "$bdb" raise "$bidi" "$(printf 'go\342\200\256')"
contains "$tmp/out" "raised go\\u202e on $bidi_shown"
no_raw_bidi
run 7 --db "$bdb" wait "$bidi" --timeout 10ms
contains "$tmp/out" "$bidi_shown pending"
contains "$tmp/err" "instance '$bidi_shown' still pending"
no_raw_bidi
run 0 --db "$bdb" cancel "$bidi" --reason "$(printf 'why\342\200\256not')" \
    --by "$(printf 'ops\342\201\246')"
contains "$tmp/out" "$bidi_shown: cancelled (was pending)"
no_raw_bidi
run 0 --db "$bdb" cancel --name "$bidi_name" --dry-run
contains "$tmp/out" 'would cancel 1 instance of Na\u200fme\u061c'
no_raw_bidi
"$fixture" run "$bdb" "$bidi=cancelled" 2>"$tmp/settle" ||
    fail "cli_fixture run $bidi=cancelled: $(cat "$tmp/settle")"
run 0 --db "$bdb" status "$bidi"
contains "$tmp/out" "$bidi_shown"
contains "$tmp/out" 'why\u202enot'
contains "$tmp/out" 'ops\u2066'
no_raw_bidi
run 0 --db "$bdb" history "$bidi"
contains "$tmp/out" "$bidi_shown"
contains "$tmp/out" 'reason="why\u202enot" by=ops\u2066'
no_raw_bidi
run 3 --db "$bdb" status "$bidi-3"
contains "$tmp/err" "instance '$bidi_shown-3' does not exist"
no_raw_bidi
run 0 --db "$bdb" prune "$bidi" --keep 1
contains "$tmp/out" "of $bidi_shown"
no_raw_bidi
run 0 --db "$bdb" purge --before now --dry-run
contains "$tmp/out" "  $bidi_shown"
no_raw_bidi
run 0 --db "$bdb" delete "$bidi"
contains "$tmp/out" "deleted $bidi_shown"
no_raw_bidi
# an error message of the library quoting what was typed
run 2 --db "$bdb" list --status "$(printf 'run\342\200\256')"
no_raw_bidi
run 2 --db "$bdb" "$(printf 'li\342\200\256st')"
no_raw_bidi
grep -qF 'payloads cut to one line with control characters escaped' "$tooldir/duro.1" &&
    grep -qF 'Ids, names, versions, reasons, requesters and event names' "$tooldir/duro.1" ||
    fail "duro.1 does not promise escaping for ids and names"

echo "== missing database: never created"
for args in "list" "status hello-1" "history hello-1" "wait hello-1" \
    "cancel hello-1" "raise wait-1 go" "delete hello-1" \
    "purge --before 1d" "prune hello-1 --keep 1" "cancel --name Waiter" \
    "runtimes"; do
    # shellcheck disable=SC2086
    run 1 --db "sqlite:$tmp/missing.db" $args
    one_line
    contains "$tmp/err" "missing.db"
    [ ! -e "$tmp/missing.db" ] || fail "duro $args created missing.db"
    rm -f "$tmp/missing.db"
done
DURO_DB="sqlite:$tmp/missing.db" run 1 list --json
json 'd["error"]["code"] == "no_database"'
[ ! -e "$tmp/missing.db" ] || fail "DURO_DB read created missing.db"
run 2 --db "sqlite:$tmp/x.db?pool=99" list
[ ! -e "$tmp/x.db" ] || fail "a bad URL created a file"
printf 'not a database at all, not at all, really not a database file\n' >"$tmp/notdb"
run 1 --db "sqlite:$tmp/notdb" list
one_line
contains "$tmp/err" "$tmp/notdb"
contains "$tmp/err" "opening the store sqlite:$tmp/notdb:"
# The URL as given: never with the create=0 that read verbs add.
run 2 --db "sqlite:$tmp/x.db?pool=1&bogus=1" list
run 1 --db "sqlite:///" list
one_line
contains "$tmp/err" "opening the store sqlite:///:"
for u in "sqlite:$tmp/notdb" "sqlite:$tmp/notdb?pool=1" "sqlite:///" \
    "sqlite:$tmp/x.db?pool=1&bogus=1" "postgres://u:pw@[bad/db" \
    "postgres://u:pw@[bad/db?schema=s" "postgres://u@h/db?bogus=1"; do
    "$duro" --db "$u" list >"$tmp/out" 2>"$tmp/err"
    grep -q 'create=0' "$tmp/err" &&
        fail "duro --db '$u' list quotes create=0: $(cat "$tmp/err")"
    grep -q pw "$tmp/err" && fail "duro --db '$u' shows the password"
done
"$duro" --db "postgres://u:pw@[bad/db?schema=s" list >"$tmp/out" 2>"$tmp/err"
if grep -q libpq "$tmp/err"; then # built with PostgreSQL
    contains "$tmp/err" "'postgres://u:***@[bad/db?schema=s' is not a valid"
fi

echo "== a file that is no duro store is never changed"
"$fixture" sql "$tmp/other.db" "CREATE TABLE users(id INTEGER); INSERT INTO users VALUES(1)" ||
    fail "cli_fixture sql"
cp "$tmp/other.db" "$tmp/other.orig"
: >"$tmp/empty.db"
for file in other.db empty.db; do
    for args in "list" "status hello-1" "history hello-1" "metrics" \
        "wait hello-1" "cancel hello-1" "delete hello-1"; do
        # shellcheck disable=SC2086
        run 1 --db "sqlite:$tmp/$file" $args
        one_line
        contains "$tmp/err" "database file $tmp/$file is not a duro store"
        contains "$tmp/err" "nothing in it was changed"
        for side in -wal -shm -journal; do
            [ ! -e "$tmp/$file$side" ] || fail "duro $args created $file$side"
        done
    done
done
cmp -s "$tmp/other.db" "$tmp/other.orig" || fail "a read verb changed other.db"
[ -s "$tmp/empty.db" ] && fail "a read verb wrote to empty.db"
run 1 --db "sqlite:$tmp/other.db" start Hello x-1
contains "$tmp/err" "another application's database"
cmp -s "$tmp/other.db" "$tmp/other.orig" || fail "start changed other.db"
run 1 --db "sqlite:$tmp/other.db" list --json
json 'd["error"]["code"] == "no_database"'
run 0 --db "sqlite:$tmp/empty.db" start Hello e-1
contains "$tmp/out" "started e-1"

echo "== the read verbs open read-only: an older schema is not migrated"
cp "$tmp/store.db" "$tmp/older.db"
[ -e "$tmp/store.db-wal" ] && cp "$tmp/store.db-wal" "$tmp/older.db-wal"
"$fixture" sql "$tmp/older.db" "DROP TABLE schedule_fires; DROP TABLE schedules;
    DELETE FROM duro_schema WHERE version = 10;
    ALTER TABLE instances DROP COLUMN deadline_ms;
    DELETE FROM duro_schema WHERE version = 9; DROP TABLE runtimes;
    DELETE FROM duro_schema WHERE version = 8; DROP INDEX instances_status_created;
    DROP INDEX instances_status_updated;
    DROP INDEX instances_name_status_created;
    DROP INDEX instances_name_status_updated; DROP INDEX history_control;
    DELETE FROM duro_schema WHERE version = 7; DROP TABLE event_ids;
    DELETE FROM duro_schema WHERE version = 6" || fail "cli_fixture sql"
run 1 --db "sqlite:$tmp/older.db" list
one_line
contains "$tmp/err" "has an older schema version"
contains "$tmp/err" "duro --db 'sqlite:$tmp/older.db?mode=rw' list"
run 1 --db "sqlite:$tmp/older.db" status hello-1 --json
json 'd["error"]["code"] == "schema"'
run 0 --db "sqlite:$tmp/older.db?mode=rw" list
run 0 --db "sqlite:$tmp/older.db" status hello-1

echo "== another user's store"
if [ "$(id -u)" = 0 ] && command -v runuser >/dev/null 2>&1 &&
    id daemon >/dev/null 2>&1 && id nobody >/dev/null 2>&1; then
    chmod 755 "$tmp"
    mkdir -m 777 "$tmp/shared"
    as() { # as USER EXPECTED_RC ARGS...
        u=$1 want=$2
        shift 2
        checks=$((checks + 1))
        runuser -u "$u" -- "$duro" "$@" >"$tmp/out" 2>"$tmp/err"
        got=$?
        [ "$got" = "$want" ] || fail "$u: duro $* exited $got, expected $want: $(cat "$tmp/err")"
    }
    app="sqlite:$tmp/shared/app.db"
    as daemon 0 --db "$app" start Hello own-1
    [ ! -e "$tmp/shared/app.db-shm" ] || fail "the owner's close left app.db-shm"
    for args in "list" "status own-1" "metrics" "cancel own-1"; do
        # shellcheck disable=SC2086
        as nobody 1 --db "$app" $args
        contains "$tmp/err" "refused: the file belongs to daemon"
        contains "$tmp/err" "Run this as daemon"
        [ ! -e "$tmp/shared/app.db-shm" ] && [ ! -e "$tmp/shared/app.db-wal" ] ||
            fail "nobody's duro $args left -wal or -shm"
    done
    as daemon 0 --db "$app" start Hello own-2
    chmod 755 "$tmp/shared"
    as nobody 1 --db "$app" list
    contains "$tmp/err" "its directory is not writable by nobody"
    grep -qF "attempt to write a readonly database (" "$tmp/err" &&
        fail "SQLite's message for a directory: $(cat "$tmp/err")"
    chmod 777 "$tmp/shared"
    as daemon 0 --db "$app" list
else
    echo "   skipped: needs root, runuser and the users daemon and nobody"
fi

echo "== newer schema"
cp "$tmp/store.db" "$tmp/newer.db"
[ -e "$tmp/store.db-wal" ] && cp "$tmp/store.db-wal" "$tmp/newer.db-wal"
"$fixture" newer-schema "$tmp/newer.db" || fail "cli_fixture newer-schema"
run 1 --db "sqlite:$tmp/newer.db" list
one_line
contains "$tmp/err" "schema version 99"
run 1 --db "sqlite:$tmp/newer.db" status hello-1 --json
json 'd["error"]["code"] == "schema"'

echo "== start and raise"
run 0 start Hello new-1 --input '"x"'
contains "$tmp/out" "started new-1"
run 0 status new-1 --json
json 'd["status"] == "pending" and d["name"] == "Hello"'
run 1 start Hello new-1
contains "$tmp/err" "new-1"
# the command's own words, not the library's call names
one_line
contains "$tmp/err" "duro start: new-1: an instance with this id already exists"
grep -q enqueue_for_orchestrator "$tmp/err" && fail "start names an internal call: $(cat "$tmp/err")"
run 1 start Hello new-1 --json
json 'd["error"]["code"] == "already_exists"'
printf '{"from":"file"}' >"$tmp/input.json"
run 0 start Hello new-2 --input "@$tmp/input.json" --delay 1h --json
json 'd["id"] == "new-2" and d["delay_ms"] == 3600000'
run 2 start Hello new-3 --input "@$tmp/no-such-file"
run 2 start Hello new-3 --delay soon
# --deadline: a duration after the start, or an RFC 3339 time; status shows it
run 0 start Hello dl-1 --deadline 2h --json
json 'rfc.match(d["deadline"]) and abs(d["deadline_ms"] - __import__("time").time() * 1000 - 7200000) < 60000'
run 0 status dl-1 --json
json 'rfc.match(d["deadline"]) and d["deadline_ms"] > 0 and d["status"] == "pending"'
run 0 status dl-1
grep -q '^deadline: .*(in ' "$tmp/out" || fail "status shows no deadline: $(cat "$tmp/out")"
run 0 start Hello dl-2 --deadline 2030-01-01T00:00:00Z --delay 1h --json
json 'd["deadline"] == "2030-01-01T00:00:00.000Z" and d["deadline_ms"] == 1893456000000'
run 0 start Hello dl-3 --deadline 30m
contains "$tmp/out" "started dl-3 (Hello), deadline "
run 2 start Hello dl-4 --deadline soon
one_line
contains "$tmp/err" "--deadline: bad deadline"
run 2 start Hello dl-4 --deadline 0s
run 0 status hello-1 --json
json 'd["deadline"] is None and d["deadline_ms"] is None'
run 0 delete dl-1 dl-2 dl-3 --force
run 2 start Hello
run 0 --db "sqlite:$tmp/fresh.db" start Hello first
[ -e "$tmp/fresh.db" ] || fail "start did not create its database"
run 0 raise wait-1 go '"payload"'
run 0 raise wait-2 go "@$tmp/input.json" --json
json 'd == {"id": "wait-2", "event": "go", "raised": "go"}'
run 4 raise hello-1 go
one_line
contains "$tmp/err" "duro raise: hello-1: it has finished (completed); it takes no more events"
run 4 raise hello-1 go --json
json 'd["error"]["code"] == "invalid_state" and "(completed)" in d["error"]["message"]'
run 0 start Hello new-4 --json
json 'd["version"] == ""'
run 0 start Hello new-5 --version v2 --json
json 'd["version"] == "v2"'
run 0 delete new-4 new-5 --force
run 3 raise nope go
run 2 raise wait-1
run 2 raise wait-3 go --event-id ''
# --event-id: a repeat with the same id (a retry) delivers nothing more
queued() { # queued ID: messages queued for ID
    python3 -c 'import sqlite3, sys
print(sqlite3.connect(sys.argv[1]).execute(
    "SELECT COUNT(*) FROM orchestrator_queue WHERE instance_id = ?",
    (sys.argv[2],)).fetchone()[0])' "$tmp/store.db" "$1"
}
if [ "$have_python" = 1 ]; then
    before=$(queued wait-3)
    run 0 raise wait-3 go '"once"' --event-id order-7
    run 0 raise wait-3 go '"once"' --event-id order-7
    contains "$tmp/out" "with event id order-7 (delivered once, however often"
    [ "$(queued wait-3)" = $((before + 1)) ] ||
        fail "raise --event-id twice queued $(($(queued wait-3) - before)) events"
    run 0 raise wait-3 go '"twice"' --event-id order-8
    [ "$(queued wait-3)" = $((before + 2)) ] ||
        fail "another --event-id did not queue its event"
fi

echo "== terminate, suspend, resume: help and bad input"
run 0 terminate --help
contains "$tmp/out" "[--status pending,running,suspended]"
contains "$tmp/out" "3 not found, 4 already finished"
run 0 suspend --help
contains "$tmp/out" "[--status pending,running]"
run 0 resume --help
contains "$tmp/out" "[--status suspended]"
run 0 cancel --help
contains "$tmp/out" "[--status pending,running,suspended]"
contains "$tmp/out" "(default: pending,running)"
contains "$tmp/out" "observe_cancel"
run 0 terminate --help
contains "$tmp/out" "(default: pending,running)"
for verb in terminate suspend resume; do
    run 2 "$verb"
    one_line
    contains "$tmp/err" "expected instance ids or --name"
    run 2 "$verb" wait-3 --name Waiter
    contains "$tmp/err" "not both"
    run 2 "$verb" --before 1h
    contains "$tmp/err" "need --name"
    run 2 "$verb" --name Waiter --status sleeping
    contains "$tmp/err" "unknown status 'sleeping'"
    run 2 "$verb" --name Waiter --status completed
    contains "$tmp/err" "--status: only"
    run 2 "$verb" --name Waiter --before tomorrow
    run 2 "$verb" --name ""
    run 2 "$verb" ""
    run 2 "$verb" --json --name Waiter --status terminated
    json 'd["error"]["code"] == "usage" and "--status" in d["error"]["message"]'
    run 2 "$verb" wait-3 --reason
    contains "$tmp/err" "needs a value"
done
run 2 suspend --name Waiter --status running,suspended
contains "$tmp/err" "only pending and running instances can be suspended"
run 2 resume --name Waiter --status running
contains "$tmp/err" "only suspended instances can be resumed"
run 2 terminate --name Waiter --status pending,terminated
contains "$tmp/err" "only pending, running and suspended instances can be terminated"
run 2 cancel --name Waiter --status completed
contains "$tmp/err" "only pending, running and suspended instances can be cancelled"

echo "== terminate, suspend, resume: dry runs by ids read status only"
run 0 list --json
cp "$tmp/out" "$tmp/before.json"
run 0 metrics
grep '^duro_queue_messages' "$tmp/out" >"$tmp/queues-before.txt"
run 0 terminate wait-3 later-1 --dry-run --json
json 'd == {"dry_run": True, "results": [{"id": "wait-3", "outcome": "requested", "status": "running"}, {"id": "later-1", "outcome": "requested", "status": "pending"}]}'
run 0 terminate wait-3 --dry-run
contains "$tmp/out" "wait-3: would be terminated (was running)"
run 0 suspend later-1 --dry-run
contains "$tmp/out" "later-1: would be suspended (was pending)"
run 0 resume wait-3 --dry-run
contains "$tmp/out" "wait-3: not suspended; nothing to resume (running)"
run 4 terminate hello-1 --dry-run
one_line
contains "$tmp/err" "duro terminate: hello-1: it has finished (completed); nothing to terminate"
run 4 suspend slow-1 --dry-run --json
json 'd["results"] == [{"id": "slow-1", "outcome": "finished", "status": "cancelled"}]'
run 3 resume nope --dry-run
one_line
contains "$tmp/err" "duro resume: nope: no such instance"
run 3 terminate nope --dry-run --json
json 'd["results"] == [{"id": "nope", "outcome": "not_found", "status": "not_found"}]'
run 1 suspend wait-3 nope hello-1 wait-3 --dry-run --json
json '[(r["id"], r["outcome"], r["status"]) for r in d["results"]] == [("wait-3", "requested", "running"), ("nope", "not_found", "not_found"), ("hello-1", "finished", "completed"), ("wait-3", "duplicate", "running")]'
[ "$(wc -l <"$tmp/err")" = 2 ] || fail "bulk suspend: one stderr line per failure: $(cat "$tmp/err")"
run 1 terminate boom-1 wait-3 --dry-run
contains "$tmp/err" "boom-1: it has finished (failed)"
contains "$tmp/out" "wait-3: would be terminated"
run 0 list --json
cmp -s "$tmp/out" "$tmp/before.json" || fail "a dry run by ids changed an instance"
run 0 metrics
grep '^duro_queue_messages' "$tmp/out" >"$tmp/queues-after.txt"
cmp -s "$tmp/queues-before.txt" "$tmp/queues-after.txt" ||
    fail "a dry run by ids queued a message: $(cat "$tmp/queues-before.txt" "$tmp/queues-after.txt")"
run 0 list --status suspended,terminated --json
json 'd["total"] == 0'

echo "== reset and rewind"
# on a copy: boom-1 failed (Started, Explode scheduled, failed, Failed)
cp "$tmp/store.db" "$tmp/reset.db"
[ -e "$tmp/store.db-wal" ] && cp "$tmp/store.db-wal" "$tmp/reset.db-wal"
rdb="sqlite:$tmp/reset.db"
run 0 --db "$rdb" rewind boom-1 --dry-run
contains "$tmp/out" "boom-1: would be rewound to event 2 of execution 1 (was failed); execution 2 would go on from there (1 activity again)"
run 0 --db "$rdb" rewind boom-1 --dry-run --json
json 'd["dry_run"] is True and d["results"] == [{"id": "boom-1", "ok": True, "status": "failed", "from_execution": 1, "execution": 2, "to_event": 2, "activities": 1, "timers": 0, "children": 0}]'
run 0 --db "$rdb" reset --name Boom --since 2000-01-01T00:00:00Z --dry-run
contains "$tmp/out" "would reset 1 instance of Boom"
contains "$tmp/out" "boom-1: would be reset to event 2 of execution 1"
run 0 --db "$rdb" status boom-1 --json
json 'd["status"] == "failed" and d["execution_id"] == 1'
# refusals: inside a turn, unknown event, the ending, not failed, live
run 1 --db "$rdb" reset boom-1 --to 1
one_line
contains "$tmp/err" "inside a turn (event 2, ActivityScheduled, is a decision of the same turn); the nearest point a reset may keep up to is event 2"
run 3 --db "$rdb" reset boom-1 --to 99
contains "$tmp/err" "has no event 99"
run 1 --db "$rdb" reset boom-1 --to 4 --json
json 'd["error"]["code"] == "invalid" and "ending" in d["error"]["message"]'
run 4 --db "$rdb" rewind hello-1
contains "$tmp/err" "only a Failed instance can be rewound"
run 4 --db "$rdb" reset wait-1 --last-good
contains "$tmp/err" "it is Running; only an ended instance"
run 3 --db "$rdb" rewind nope
contains "$tmp/err" "instance 'nope' does not exist"
# bad command lines
run 2 reset boom-1
contains "$tmp/err" "say where: --to EVENT or --last-good"
run 2 reset boom-1 --to 2 --last-good
run 2 reset boom-1 --to 0
run 2 reset boom-1 --to x
run 2 rewind boom-1 --to 2
run 2 rewind --name Boom --status failed
run 2 reset --status failed
run 2 reset boom-1 --name Boom
run 2 reset --name Boom --to 2
run 2 reset --name Boom --status running
contains "$tmp/err" "only completed, failed, cancelled and terminated instances can be reset"
run 2 reset --name Boom --max 501
run 2 reset boom-1 hello-1 --to 2
run 2 reset "" --to 2
run 2 reset --name "" --dry-run
run 0 --db "$rdb" list --json
cp "$tmp/out" "$tmp/reset-before.json"
# nothing above changed the store
run 0 --db "$rdb" rewind boom-1 --dry-run
run 0 --db "$rdb" list --json
cmp -s "$tmp/out" "$tmp/reset-before.json" || fail "a dry run or a refused reset changed the store"
# the rewind: recorded who and why; the old execution stays readable
run 0 --db "$rdb" rewind boom-1 --reason "capacitor cooled" --by user:ops
contains "$tmp/out" "boom-1: rewound to event 2 of execution 1 (was failed); execution 2 goes on from there (1 activity again)"
run 0 --db "$rdb" status boom-1 --json
json 'd["status"] == "running" and d["execution_id"] == 2'
run 0 --db "$rdb" history boom-1 --execution 1 --json
json '[e["kind"] for e in d["events"]][-1] == "OrchestrationFailed"'
run 0 --db "$rdb" history boom-1
contains "$tmp/out" "ExecutionReset"
contains "$tmp/out" "rewind of execution 1 after event 2"
contains "$tmp/out" "capacitor cooled"
run 0 --db "$rdb" history boom-1 --json
json '[e["kind"] for e in d["events"]] == ["OrchestrationStarted", "ActivityScheduled", "ExecutionReset"] and d["events"][2]["requested_by"] == "user:ops"'
# a runtime runs the activity again: it fails again, in execution 2
"$fixture" run "$rdb" boom-1=failed || fail "cli_fixture run boom-1=failed (after the rewind)"
run 0 --db "$rdb" history boom-1 --json
json 'd["execution_id"] == 2 and [e["kind"] for e in d["events"]][-2:] == ["ActivityFailed", "OrchestrationFailed"]'
# a reset of execution 1, which is no longer current: overtaken
run 4 --db "$rdb" reset boom-1 --to 2 --execution 1
contains "$tmp/err" "its current execution is 2"
run 0 --db "$rdb" reset boom-1 --last-good --execution 2 --json
json 'd["dry_run"] is False and d["results"][0]["execution"] == 3 and d["results"][0]["to_event"] == 3'
# deadlines: a rewind keeps the instance's own, or takes a new one or none
"$fixture" run "$rdb" boom-1=failed || fail "cli_fixture run boom-1=failed (after the reset)"
run 0 --db "$rdb" rewind boom-1 --deadline 2h --json
json 'd["results"][0]["execution"] == 4'
run 0 --db "$rdb" status boom-1 --json
json 'rfc.match(d["deadline"]) and abs(d["deadline_ms"] - __import__("time").time() * 1000 - 7200000) < 60000'
rewind_deadline=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["deadline_ms"])' "$tmp/out")
"$fixture" run "$rdb" boom-1=failed || fail "cli_fixture run boom-1=failed (under a deadline)"
run 0 --db "$rdb" rewind boom-1
run 0 --db "$rdb" status boom-1 --json
json "d['execution_id'] == 5 and d['deadline_ms'] == $rewind_deadline"
"$fixture" run "$rdb" boom-1=failed || fail "cli_fixture run boom-1=failed (the deadline kept)"
# one that has passed is refused (it would end again at once), unless
# replaced or dropped
"$fixture" sql "$tmp/reset.db" "UPDATE instances SET deadline_ms = 1000 WHERE instance_id = 'boom-1'" ||
    fail "cli_fixture sql"
run 4 --db "$rdb" rewind boom-1 --dry-run
contains "$tmp/err" "its deadline (1970-01-01T00:00:01.000Z) has passed, so it would end again at once; give it a new deadline or none"
run 1 --db "$rdb" rewind boom-1 --deadline 2000-01-01T00:00:00Z
contains "$tmp/err" "the new deadline (2000-01-01T00:00:00.000Z) has already passed"
run 2 rewind boom-1 --deadline 2h --no-deadline
contains "$tmp/err" "--deadline or --no-deadline, not both"
run 2 rewind boom-1 --deadline soon
run 0 --db "$rdb" rewind boom-1 --no-deadline
run 0 --db "$rdb" status boom-1 --json
json 'd["execution_id"] == 6 and d["deadline_ms"] is None and d["status"] == "running"'

echo "== cancel"
run 0 list --json
cp "$tmp/out" "$tmp/before.json"
run 0 cancel --name Waiter --dry-run --json
json 'd["dry_run"] is True and d["count"] == 3 and d["ids"] == ["wait-1", "wait-2", "wait-3"]'
run 1 cancel wait-1 hello-1 --dry-run --json
json '[r["outcome"] for r in d["results"]] == ["requested", "not_cancellable"]'
run 0 list --json
cmp -s "$tmp/out" "$tmp/before.json" || fail "a dry run changed the store"
run 0 cancel --name Waiter --dry-run
contains "$tmp/out" "would cancel 3 instances of Waiter"
run 0 cancel wait-1 --reason "operator test"
contains "$tmp/out" "wait-1"
run 0 status wait-1 --json
json 'd["cancel_reason"] == "operator test" and d["cancelled_by"].startswith("user:")'
run 0 cancel wait-1 --json
json 'd == {"dry_run": False, "results": [{"id": "wait-1", "outcome": "already_cancelled", "status": "running"}]}'
run 4 cancel hello-1
one_line
run 3 cancel nope
one_line
run 1 cancel wait-2 nope hello-1 --json
json '[r["outcome"] for r in d["results"]] == ["requested", "not_found", "not_cancellable"]'
[ "$(wc -l <"$tmp/err")" = 2 ] || fail "bulk cancel: one stderr line per failure: $(cat "$tmp/err")"
run 0 cancel wait-1 wait-2 wait-2 --json
json '[r["outcome"] for r in d["results"]] == ["already_cancelled", "already_cancelled", "duplicate"]'
run 2 cancel wait-3 --name Waiter
contains "$tmp/err" "not both"
run 2 cancel --status running
run 2 cancel --name Waiter --status completed
run 2 cancel --name Waiter --before tomorrow
run 2 cancel
run 0 cancel --name Waiter --status running --before 0s --reason rollout --by ops-bot --json
json 'd["dry_run"] is False and d["count"] == 1 and d["ids"] == ["wait-3"]'
run 0 status wait-3 --json
json 'd["cancelled_by"] == "ops-bot" and d["cancel_reason"] == "rollout"'
run 0 cancel --name Waiter
contains "$tmp/out" "cancel requested for 0 instances"
grep -q "closest" "$tmp/err" && fail "a known name got the unknown-name note: $(cat "$tmp/err")"
# a name no instance in the store has: said, with the closest one there
run 0 cancel --name Waitr
contains "$tmp/out" "cancel requested for 0 instances of Waitr"
contains "$tmp/err" "duro cancel: no instance in the store has the orchestration name 'Waitr'; the closest name there is 'Waiter'"
run 0 cancel --name Waitr --dry-run --json
json 'd["count"] == 0'
contains "$tmp/err" "the closest name there is 'Waiter'"
for verb in terminate suspend resume; do
    run 0 "$verb" --name Bom --json
    one_line
    contains "$tmp/err" "duro $verb: no instance in the store has the orchestration name 'Bom'; the closest name there is 'Boom'"
done
run 0 purge --before now --name Helo
contains "$tmp/err" "duro purge: no instance in the store has the orchestration name 'Helo'; the closest name there is 'Hello'"
run 0 list --name hello
contains "$tmp/err" "no instances match"
contains "$tmp/err" "duro list: no instance in the store has the orchestration name 'hello'; the closest name there is 'Hello'"
run 0 list --name Hello --status running
grep -q "closest" "$tmp/err" && fail "list: a known name got the unknown-name note: $(cat "$tmp/err")"
run 0 --db "sqlite:$tmp/gone.db" start Hello gone-1
run 0 --db "sqlite:$tmp/gone.db" delete gone-1 --force
run 0 --db "sqlite:$tmp/gone.db" cancel --name Hello
contains "$tmp/err" "no instance in the store has the orchestration name 'Hello'; the store has no instances"

echo "== cancel, terminate and purge by query ask on a terminal"
# on_tty EXPECTED_RC [--expect T|--send T]... -- ARGS...: runs duro ARGS
# on a pseudo-terminal (stdin, stdout and stderr), answering as told;
# what it printed in $tmp/tty
on_tty() {
    want=$1
    shift
    checks=$((checks + 1))
    python3 "$here/pty_run.py" "$@" >"$tmp/tty" 2>"$tmp/tty.err"
    got=$?
    [ "$got" = "$want" ] ||
        fail "on a terminal: $* exited $got, expected $want: $(cat -v "$tmp/tty" "$tmp/tty.err")"
}
if [ "$have_python" = 1 ]; then
    adb="sqlite:$tmp/ask.db"
    for id in a-1 a-2 a-3; do
        run 0 --db "$adb" start Waiter "$id"
    done
    run 0 --db "$adb" start Slow s-1
    # no: nothing changes, exit 1
    on_tty 1 --expect "Cancel 3 instances of Waiter? [y/N] " --send 'n\n' \
        -- "$duro" --db "$adb" cancel --name Waiter
    contains "$tmp/tty" "not confirmed; nothing was changed"
    run 0 --db "$adb" list --json
    json 'all(i["cancel_requested_at"] is None for i in d["instances"])'
    # the end of input is no too
    on_tty 1 --expect "Cancel 3 instances of Waiter? [y/N] " --send '\x04' \
        -- "$duro" --db "$adb" cancel --name Waiter --reason eof
    run 0 --db "$adb" list --json
    json 'all(i["cancel_requested_at"] is None for i in d["instances"])'
    # a dry run never asks
    on_tty 0 -- "$duro" --db "$adb" cancel --name Waiter --dry-run
    contains "$tmp/tty" "would cancel 3 instances of Waiter"
    grep -qF "[y/N]" "$tmp/tty" && fail "a dry run asked: $(cat "$tmp/tty")"
    # nor a run with stderr not a terminal (the question would go unseen)
    on_tty 0 -- sh -c '"$0" --db "$1" terminate --name Slow --dry-run 2>/dev/null' "$duro" "$adb"
    grep -qF "[y/N]" "$tmp/tty" && fail "asked without stderr on a terminal: $(cat "$tmp/tty")"
    # yes: it acts
    on_tty 0 --expect "Cancel 3 instances of Waiter? [y/N] " --send 'yes\n' \
        -- "$duro" --db "$adb" cancel --name Waiter --reason asked
    contains "$tmp/tty" "3 instances of Waiter"
    run 0 --db "$adb" list --name Waiter --json
    json 'all(i["cancel_reason"] == "asked" for i in d["instances"])'
    on_tty 0 --expect "Terminate 1 instance of Slow? [y/N] " --send 'Y\n' \
        -- "$duro" --db "$adb" terminate --name Slow
    contains "$tmp/tty" "1 instance of Slow"
    # -y and --yes: no question
    run 0 --db "$adb" start Slow s-2
    run 0 --db "$adb" start Slow s-3
    on_tty 0 -- "$duro" --db "$adb" terminate --name Slow -y --status pending --json
    grep -qF "[y/N]" "$tmp/tty" && fail "-y asked: $(cat "$tmp/tty")"
    contains "$tmp/tty" '"s-2"'
    run 2 --db "$adb" suspend --name Slow --yes
    contains "$tmp/err" "--yes is for cancel and terminate: suspend never asks"
    # the count with thousands separated: 2,600 pending instances of Many
    on_tty 1 --expect "Cancel 2,600 instances of Many? [y/N] " --send '\n' \
        -- "$duro" --db "sqlite:$tmp/many.db" cancel --name Many
    # purge: late.db holds 4 finished instances
    on_tty 1 --expect "Purge 4 instances? [y/N] " --send 'no\n' \
        -- "$duro" --db "sqlite:$tmp/late.db" purge --before now
    run 0 --db "sqlite:$tmp/late.db" purge --before now --dry-run --json
    json 'd["count"] == 4'
    on_tty 0 --expect "Purge 1 instance of Boom? [y/N] " --send 'y\n' \
        -- "$duro" --db "sqlite:$tmp/late.db" purge --before now --name Boom
    contains "$tmp/tty" "purged 1 instance"
    on_tty 0 -- "$duro" --db "sqlite:$tmp/late.db" purge --before now --yes
    contains "$tmp/tty" "purged 3 instances"
    # without a terminal it acts as it always did (no question)
    run 0 --db "$adb" start Waiter a-4
    run 0 --db "$adb" cancel --name Waiter </dev/null
    grep -qF "[y/N]" "$tmp/err" && fail "asked without a terminal: $(cat "$tmp/err")"
    contains "$tmp/out" "1 instance of Waiter"
    run 0 cancel --help
    contains "$tmp/out" '"Cancel N instances of NAME? [y/N]"'
else
    echo "   skipped: needs python3"
fi

echo "== delete, purge, prune"
run 4 delete new-1
one_line
contains "$tmp/err" "duro delete: new-1: it or one of its sub-orchestrations has not finished; cancel or terminate it first, or delete it with --force"
grep -q -e delete_instance -e 'with force' "$tmp/err" &&
    fail "delete names an internal call or no flag: $(cat "$tmp/err")"
run 0 delete new-1 --force
run 3 delete new-1
run 1 delete new-2 nope --force --json
json '[r["outcome"] for r in d["results"]] == ["deleted", "not_found"]'
run 2 delete
run 2 purge
contains "$tmp/err" "--before"
run 2 purge --before 1d --status running
run 2 purge --before 1d --status sleeping
run 0 list --json
cp "$tmp/out" "$tmp/before.json"
run 0 purge --before now --status completed --dry-run --json
json 'd["dry_run"] is True and d["count"] == 2 and d["ids"] == ["hello-1", "hello-2"]'
run 0 list --json
cmp -s "$tmp/out" "$tmp/before.json" || fail "a purge dry run changed the store"
run 0 purge --before 1d --json
json 'd["count"] == 0'
run 0 purge --before now --name Boom
contains "$tmp/out" "purged 1 instance"
run 3 status boom-1
run 0 prune hello-1 --keep 1 --json
json 'd == {"id": "hello-1", "kept": 1, "pruned": 0}'
# kept is what is left, not --keep: one execution, or none yet
run 0 prune hello-1 --keep 2 --json
json 'd == {"id": "hello-1", "kept": 1, "pruned": 0}'
run 0 prune hello-1 --keep 2
contains "$tmp/out" "pruned 0 executions of hello-1; 1 kept"
run 0 prune later-1 --keep 3 --json
json 'd == {"id": "later-1", "kept": 0, "pruned": 0}'
# a chain of 5 executions: 2 kept of 5, then 2 kept (not 3) of 2
run 0 start Chain chain-1 --input 4
"$fixture" run "$db" chain-1=completed 2>"$tmp/settle" ||
    fail "cli_fixture run chain-1=completed: $(cat "$tmp/settle")"
run 0 status chain-1 --json
json 'd["execution_id"] == 5 and d["status"] == "completed"'
run 0 prune chain-1 --keep 2 --json
json 'd == {"id": "chain-1", "kept": 2, "pruned": 3}'
# the export holds the executions the store kept
run 0 history --export chain-1
json '[x["execution_id"] for x in d["executions"]] == [4, 5] and d["executions"][1]["events"][-1]["kind"] == "OrchestrationCompleted"'
run 0 prune chain-1 --keep 3 --json
json 'd == {"id": "chain-1", "kept": 2, "pruned": 0}'
run 0 prune chain-1 --keep 1000000 --json
json 'd == {"id": "chain-1", "kept": 2, "pruned": 0}'
run 0 prune chain-1 --keep 1 --json
json 'd == {"id": "chain-1", "kept": 1, "pruned": 1}'
run 0 prune chain-1 --keep 1 --json
json 'd == {"id": "chain-1", "kept": 1, "pruned": 0}'
run 3 prune nope --keep 1
run 2 prune hello-1
run 2 prune hello-1 --keep 0

echo "== control store: suspended, terminated and cancelling instances"
cdb="sqlite:$tmp/control.db"
if ! "$fixture" control "$cdb"; then
    fail "cli_fixture control"
fi
# settle ID=STATUS...: a runtime handles what the commands sent
settle() {
    checks=$((checks + 1))
    "$fixture" run "$cdb" "$@" 2>"$tmp/settle" ||
        fail "cli_fixture run $*: $(cat "$tmp/settle")"
}
# event_is ID INDEX KIND REASON BY: event INDEX (-1: the last) of ID's
# current execution is a KIND with REASON, requested by BY ("user:*": by
# any user)
event_is() {
    run 0 history "$1" --json
    json "(lambda e: e['kind'] == '$3' and e.get('reason') == '$4' and (e.get('requested_by') == '$5' or ('$5'.endswith('*') and (e.get('requested_by') or '').startswith('${5%\*}'))))(d['events'][$2])"
}
# a cancel by name leaves a suspended instance alone unless --status
# names it (a copy of the store: the request is recorded, no runtime runs)
cp "$tmp/control.db" "$tmp/susp.db"
[ -e "$tmp/control.db-wal" ] && cp "$tmp/control.db-wal" "$tmp/susp.db-wal"
run 0 --db "sqlite:$tmp/susp.db" cancel --name Waiter --json
json 'd["ids"] == ["resumed-1", "w-1", "w-2", "w-3", "w-4"]'
run 0 --db "sqlite:$tmp/susp.db" status susp-1 --json
json 'd["status"] == "suspended" and d["cancel_requested_at"] is None and d["cancel_outcome"] is None'
run 0 --db "sqlite:$tmp/susp.db" status w-1 --json
json 'd["cancel_outcome"] == "pending"'
run 0 --db "sqlite:$tmp/susp.db" cancel --name Waiter --status suspended --json
json 'd["ids"] == ["susp-1"]'
run 0 --db "sqlite:$tmp/susp.db" status susp-1 --json
json 'd["cancel_outcome"] == "pending" and d["cancelling"] is True'
run 0 --db "sqlite:$tmp/susp.db" terminate --name Careful
contains "$tmp/out" "terminate requested for 1 instance of Careful"
export DURO_DB="$cdb"
run 0 list --status suspended --json
json '[i["id"] for i in d["instances"]] == ["susp-1"] and d["instances"][0]["status"] == "suspended"'
run 0 list --status TERMINATED --json
json '[i["id"] for i in d["instances"]] == ["term-1"]'
run 0 list --status suspended,terminated
contains "$tmp/out" "suspended"
contains "$tmp/out" "terminated"
run 0 list --json
json 'd["total"] == 10 and [i["id"] for i in d["instances"] if i["cancelling"]] == ["careful-1"]'
run 0 status susp-1
grep -Eq '^status: +suspended$' "$tmp/out" || fail "status susp-1: $(grep status: "$tmp/out")"
run 0 status susp-1 --json
json 'd["status"] == "suspended" and d["cancelling"] is False and d["finished_at"] is None'
run 0 status term-1
grep -Eq '^status: +terminated$' "$tmp/out" || fail "status term-1: $(grep status: "$tmp/out")"
run 0 status term-1 --json
json 'd["status"] == "terminated" and rfc.match(d["finished_at"]) and d["cancelling"] is False'
run 0 status careful-1
grep -Eq '^status: +running \(cancelling\)$' "$tmp/out" || fail "status careful-1: $(grep status: "$tmp/out")"
contains "$tmp/out" "rollback"
run 0 status careful-1 --json
json 'd["status"] == "running" and d["cancelling"] is True and d["cancelled_by"] == "user:dave" and d["cancel_reason"] == "rollback"'
run 0 status w-1
grep -Eq '^status: +running$' "$tmp/out" || fail "status w-1: $(grep status: "$tmp/out")"
run 10 wait term-1 --json
json 'd["timed_out"] is False and d["instance"]["status"] == "terminated"'
run 7 wait susp-1 --timeout 50ms
contains "$tmp/err" "still suspended"
# colours on a terminal (script(1) gives the command one)
if command -v script >/dev/null 2>&1; then
    for pair in "susp-1:$(printf '\033[34m')suspended" \
        "term-1:$(printf '\033[35m')terminated"; do
        checks=$((checks + 1))
        TERM=xterm script -qec "'$duro' status ${pair%%:*}" /dev/null \
            </dev/null >"$tmp/tty" 2>&1
        grep -qF "${pair#*:}" "$tmp/tty" ||
            fail "no colour for ${pair#*:}: $(cat -v "$tmp/tty")"
    done
fi

run 0 history susp-1
grep -Eq 'ExecutionSuspended +- +reason="maintenance" by=user:bob$' "$tmp/out" ||
    fail "history susp-1: $(cat "$tmp/out")"
contains "$tmp/out" 'EventRaised'
run 0 history susp-1 --json
json '[e["kind"] for e in d["events"]][-2:] == ["ExecutionSuspended", "EventRaised"] and d["events"][-2]["reason"] == "maintenance" and d["events"][-2]["requested_by"] == "user:bob"'
run 0 history term-1
grep -Eq 'OrchestrationTerminated +- +reason="stuck" by=user:carol$' "$tmp/out" ||
    fail "history term-1: $(cat "$tmp/out")"
grep -Eq 'ActivityCancelRequested +Block +\(#2, [^)]*\) reason="instance_terminated" by=user:carol$' "$tmp/out" ||
    fail "history term-1, the activity's cancel: $(cat "$tmp/out")"
run 0 history term-1 --json
json 'd["events"][-1]["kind"] == "OrchestrationTerminated" and d["events"][-1]["requested_by"] == "user:carol" and any(e["kind"] == "ActivityCancelRequested" and e["reason"] == "instance_terminated" for e in d["events"])'
# the text's by= is in the JSON too
json '[e.get("requested_by") for e in d["events"] if e["kind"] == "ActivityCancelRequested"] == ["user:carol"]'
run 0 history resumed-1
grep -Eq 'ExecutionSuspended +- +reason="suspended" by=user:erin$' "$tmp/out" ||
    fail "history resumed-1: $(cat "$tmp/out")"
grep -Eq 'ExecutionResumed +- +reason="all clear" by=user:erin$' "$tmp/out" ||
    fail "history resumed-1: $(cat "$tmp/out")"
run 0 history careful-1
grep -Eq 'OrchestrationCancelRequested +- +reason="rollback" by=user:dave observed$' "$tmp/out" ||
    fail "history careful-1: $(cat "$tmp/out")"
grep -Eq 'TimerCreated .* cleanup deadline$' "$tmp/out" ||
    fail "history careful-1, the cleanup deadline: $(cat "$tmp/out")"
run 0 history careful-1 --json
json '[e.get("observed") for e in d["events"] if e["kind"] == "OrchestrationCancelRequested"] == [True]'
json '[e.get("cleanup_deadline") for e in d["events"] if e["kind"] == "TimerCreated"] == [True] and all(("observed" in e) == (e["kind"] == "OrchestrationCancelRequested") for e in d["events"])'

run 0 metrics
for line in \
    'duro_instances{orchestration="Waiter",status="suspended"} 1' \
    'duro_instances{orchestration="Waiter",status="running"} 5' \
    'duro_instances{orchestration="Waiter",status="terminated"} 0' \
    'duro_instances{orchestration="Slow",status="terminated"} 1' \
    'duro_instances{orchestration="Slow",status="suspended"} 0' \
    'duro_instances{orchestration="Careful",status="running"} 1' \
    'duro_instances{orchestration="Hello",status="completed"} 1' \
    'duro_instances{orchestration="Hello",status="pending"} 1'; do
    grep -qxF -- "$line" "$tmp/out" || fail "metrics lacks the line '$line'"
done
[ "$(grep -c '^duro_instances{orchestration="Waiter"' "$tmp/out")" = 7 ] ||
    fail "metrics: not 7 statuses for Waiter: $(grep '^duro_instances{' "$tmp/out")"
run 0 metrics --json
json '{"orchestration": "Waiter", "status": "suspended", "count": 1} in d["instances"] and {"orchestration": "Slow", "status": "terminated", "count": 1} in d["instances"]'

run 0 purge --before now --status terminated --dry-run --json
json 'd["dry_run"] is True and d["ids"] == ["term-1"]'
run 0 purge --before now --dry-run --json
json 'd["ids"] == ["done-1", "term-1"]'
run 4 delete susp-1
contains "$tmp/err" "susp-1"

echo "== suspend, resume, terminate by ids"
run 0 suspend w-1 --reason "disk full" --by ops
contains "$tmp/out" "w-1: suspend requested (was running)"
settle w-1=suspended
run 0 status w-1 --json
json 'd["status"] == "suspended"'
event_is w-1 -1 ExecutionSuspended "disk full" ops
run 0 suspend w-1 --json
json 'd == {"dry_run": False, "results": [{"id": "w-1", "outcome": "requested", "status": "suspended"}]}'
run 0 suspend w-1
contains "$tmp/out" "w-1: already suspended (suspended)"
run 0 raise w-1 go '"while suspended"'
settle w-1=suspended
run 0 history w-1 --json
json '[e["kind"] for e in d["events"]][-2:] == ["ExecutionSuspended", "EventRaised"] and d["events"][-1]["payload"] == "while suspended"'
run 0 status w-1 --json
json 'd["status"] == "suspended" and d["output"] is None'
run 0 resume w-1 --json --by ops
json 'd == {"dry_run": False, "results": [{"id": "w-1", "outcome": "requested", "status": "suspended"}]}'
settle w-1=completed
run 0 status w-1 --json
json 'd["output"] == "while suspended"'
event_is w-1 -2 ExecutionResumed resumed ops
json 'd["events"][-1]["kind"] == "OrchestrationCompleted"'
run 0 resume w-2
contains "$tmp/out" "w-2: not suspended; nothing to resume (running)"
run 0 terminate w-2 --reason "wrong input"
contains "$tmp/out" "w-2: terminate requested (was running)"
settle w-2=terminated
event_is w-2 -1 OrchestrationTerminated "wrong input" "user:*"
run 0 status w-2 --json
json 'd["status"] == "terminated" and rfc.match(d["finished_at"])'
# terminating a terminated instance is not an error (as cancelling a
# cancelled one); suspending or resuming it is
run 0 terminate w-2 --json
json 'd["results"] == [{"id": "w-2", "outcome": "finished", "status": "terminated"}]'
run 0 terminate w-2
contains "$tmp/out" "w-2: already terminated (terminated)"
run 0 terminate w-2 --dry-run
contains "$tmp/out" "w-2: already terminated (terminated)"
run 4 terminate done-1
contains "$tmp/err" "duro terminate: done-1: it has finished (completed); nothing to terminate"
for verb in suspend resume; do
    run 4 "$verb" w-2
    one_line
    contains "$tmp/err" "duro $verb: w-2: it has finished (terminated); nothing to $verb"
done
for verb in terminate suspend resume; do
    run 3 "$verb" nope --json
    json 'd["results"] == [{"id": "nope", "outcome": "not_found", "status": "not_found"}]'
    one_line
done
run 4 cancel w-2
contains "$tmp/err" "it has finished (terminated)"
run 1 terminate w-3 nope done-1 w-3 --json
json '[(r["outcome"], r["status"]) for r in d["results"]] == [("requested", "running"), ("not_found", "not_found"), ("finished", "completed"), ("duplicate", "running")]'
[ "$(wc -l <"$tmp/err")" = 2 ] || fail "bulk terminate: one stderr line per failure: $(cat "$tmp/err")"
# a second terminate while the first is pending: still live, requested
# again (the first request wins), as duro.1 says
run 0 terminate w-3 --by second
contains "$tmp/out" "w-3: terminate requested (was running)"
grep -qF 'terminate requested' "$tooldir/duro.1" &&
    ! grep -qF 'terminate pending) is not an error: it says' "$tooldir/duro.1" ||
    fail "duro.1 does not say what a second terminate while one is pending says"
settle w-3=terminated
run 0 cancel careful-1 --dry-run --json
json 'd["results"] == [{"id": "careful-1", "outcome": "already_cancelled", "status": "running"}]'
run 0 cancel careful-1
contains "$tmp/out" "careful-1: already cancelled (running)"
run 0 terminate careful-1 --dry-run
contains "$tmp/out" "careful-1: would be terminated (was running)"
run 0 terminate careful-1 --by ops
contains "$tmp/out" "careful-1: terminate requested (was running)"
settle careful-1=terminated
run 0 status careful-1 --json
json 'd["status"] == "terminated" and d["cancelling"] is False and d["cancel_outcome"] == "terminated"'
run 0 status careful-1
contains "$tmp/out" "by user:dave, then terminated before the cancel took effect: not applied"
grep -Eq '^cancelled_by: +-$' "$tmp/out" || fail "status careful-1 (terminated) names a canceller: $(cat "$tmp/out")"
event_is careful-1 -1 OrchestrationTerminated terminated ops

echo "== suspend, resume, terminate by query"
# live now: susp-1 suspended; resumed-1, w-4 running (Waiter); pend-1 pending
run 0 list --json
cp "$tmp/out" "$tmp/before.json"
run 0 metrics
grep '^duro_queue_messages' "$tmp/out" >"$tmp/queues-before.txt"
run 0 suspend --name Waiter --dry-run --json
json 'd == {"dry_run": True, "count": 2, "applied": 0, "ids": ["resumed-1", "w-4"]}'
run 0 resume --name Waiter --dry-run --json
json 'd == {"dry_run": True, "count": 1, "applied": 0, "ids": ["susp-1"]}'
# by query, a suspended instance is taken only when --status names it
run 0 terminate --name Waiter --dry-run --json
json 'd["count"] == 2 and d["ids"] == ["resumed-1", "w-4"]'
run 0 terminate --name Waiter --status suspended --dry-run --json
json 'd["ids"] == ["susp-1"]'
run 0 terminate --name Waiter --status pending,running,suspended --dry-run --json
json 'd["ids"] == ["resumed-1", "susp-1", "w-4"]'
run 0 cancel --name Waiter --dry-run --json
json 'd["ids"] == ["resumed-1", "w-4"]'
run 0 cancel --name Waiter --status suspended --dry-run --json
json 'd["ids"] == ["susp-1"]'
run 0 suspend --name Waiter --before 2000-01-01 --dry-run --json
json 'd["count"] == 0 and d["ids"] == []'
run 0 terminate --name Waiter --dry-run
contains "$tmp/out" "would terminate 2 instances of Waiter"
grep -q susp-1 "$tmp/out" && fail "terminate --name took a suspended instance: $(cat "$tmp/out")"
run 0 terminate --name Waiter --status suspended --dry-run
contains "$tmp/out" "would terminate 1 instance of Waiter"
contains "$tmp/out" "  susp-1"
run 0 list --json
cmp -s "$tmp/out" "$tmp/before.json" || fail "a dry run by query changed an instance"
run 0 metrics
grep '^duro_queue_messages' "$tmp/out" >"$tmp/queues-after.txt"
cmp -s "$tmp/queues-before.txt" "$tmp/queues-after.txt" ||
    fail "a dry run by query queued a message: $(cat "$tmp/queues-before.txt" "$tmp/queues-after.txt")"
run 0 suspend --name Waiter --status running --reason bulk --json
json 'd == {"dry_run": False, "count": 2, "applied": 0, "ids": ["resumed-1", "w-4"]}'
settle resumed-1=suspended w-4=suspended
run 0 list --status suspended --name Waiter --json
json '[i["id"] for i in d["instances"]] == ["resumed-1", "susp-1", "w-4"]'
run 0 resume --name Waiter
contains "$tmp/out" "resume requested for 3 instances of Waiter"
# susp-1 gets the "go" kept since the fixture suspended it, in order
settle susp-1=completed resumed-1=running w-4=running
run 0 status susp-1 --json
json 'd["output"] == "early"'
run 0 resume --name Waiter
contains "$tmp/out" "resume requested for 0 instances of Waiter"
run 0 terminate --name Waiter --status pending,running --by ops-bot --json
json 'd["ids"] == ["resumed-1", "w-4"]'
settle resumed-1=terminated w-4=terminated
event_is w-4 -1 OrchestrationTerminated terminated ops-bot
run 0 terminate --name Hello --status pending
contains "$tmp/out" "terminated 1 instance of Hello"
settle pend-1=terminated
run 0 list --status terminated --json
json 'sorted(i["id"] for i in d["instances"]) == ["careful-1", "pend-1", "resumed-1", "term-1", "w-2", "w-3", "w-4"]'
run 0 purge --before now --status terminated --name Slow
contains "$tmp/out" "purged 1 instance"
run 3 status term-1
run 0 delete w-2
contains "$tmp/out" "deleted w-2"
export DURO_DB="$db"

echo "== cancel and terminate --wait, with a runtime serving the store"
run 2 cancel wait-1 --wait=5x
contains "$tmp/err" "--wait: bad duration '5x'"
run 2 cancel wait-1 --wait --dry-run
contains "$tmp/err" "not with --dry-run"
for verb in suspend resume; do
    run 2 "$verb" wait-1 --wait
    contains "$tmp/err" "--wait is for cancel and terminate"
done
run 0 cancel --help
contains "$tmp/out" "[--wait[=D]]"
contains "$tmp/out" "60s; the '=' is needed"
if [ "$have_python" = 1 ] && command -v mkfifo >/dev/null 2>&1; then
    wdb="sqlite:$tmp/wait.db"
    # await ID PYEXPR: until `duro status ID --json` (d) satisfies PYEXPR,
    # 30 s at most
    await() {
        checks=$((checks + 1))
        n=0
        while [ "$n" -lt 600 ]; do
            "$duro" --db "$wdb" status "$1" --json >"$tmp/await" 2>/dev/null &&
                python3 -c 'import json, sys
d = json.load(open(sys.argv[1], encoding="utf-8"))
sys.exit(0 if eval(sys.argv[2]) else 1)' "$tmp/await" "$2" && return 0
            sleep 0.05
            n=$((n + 1))
        done
        fail "$1 never satisfied $2: $(cat "$tmp/await")"
        return 1
    }
    # await_file PATH: until PATH exists, 30 s at most
    await_file() {
        checks=$((checks + 1))
        n=0
        while [ ! -e "$1" ] && [ "$n" -lt 600 ]; do
            sleep 0.05
            n=$((n + 1))
        done
        [ -e "$1" ] || fail "$1 never appeared"
    }
    for id in cw-1 cw-2 cw-3 cw-4 sx-1 tw-1; do
        run 0 --db "$wdb" start Waiter "$id"
    done
    run 0 --db "$wdb" start Racer race-1 --input "$tmp/race1"
    run 0 --db "$wdb" start Racer race-2 --input "$tmp/race2"
    mkfifo "$tmp/serve.in"
    "$fixture" serve "$wdb" <"$tmp/serve.in" 2>"$tmp/serve.err" &
    serve_pid=$!
    exec 9>"$tmp/serve.in" # the runtime serves until this closes
    for id in cw-1 cw-2 cw-3 cw-4 sx-1 tw-1 race-1 race-2; do
        await "$id" 'd["status"] == "running" and d["history_count"] >= 2'
    done
    export DURO_DB="$wdb"

    # by ids: 0 when it ended as asked, and what it ended as
    run 0 cancel cw-1 --wait=30s
    contains "$tmp/out" "cw-1: cancel requested (was running)"
    contains "$tmp/out" "cw-1: ended cancelled"
    run 0 cancel cw-2 --wait=30s --json
    json 'd == {"dry_run": False, "results": [{"id": "cw-2", "outcome": "requested", "status": "running", "final_status": "cancelled", "timed_out": False}]}'
    run 0 terminate tw-1 --wait=30s
    contains "$tmp/out" "tw-1: terminate requested (was running)"
    contains "$tmp/out" "tw-1: ended terminated"
    # already cancelled: nothing sent, and it has ended cancelled
    run 0 cancel cw-1 --wait
    contains "$tmp/out" "cw-1: already cancelled (cancelled)"
    contains "$tmp/out" "cw-1: ended cancelled"
    # a request that failed for one id: exit as without --wait
    run 1 cancel cw-2 nope --wait=30s --json
    json '[(r["id"], r["outcome"], r["final_status"]) for r in d["results"]] == [("cw-2", "already_cancelled", "cancelled"), ("nope", "not_found", None)]'

    # by query: a suspended instance stays out unless --status names it
    run 0 suspend sx-1
    await sx-1 'd["status"] == "suspended"'
    run 0 cancel --name Waiter --wait=30s --json
    json 'd == {"dry_run": False, "count": 2, "applied": 0, "ids": ["cw-3", "cw-4"], "results": [{"id": "cw-3", "final_status": "cancelled", "timed_out": False}, {"id": "cw-4", "final_status": "cancelled", "timed_out": False}]}'
    run 0 status sx-1 --json
    json 'd["status"] == "suspended" and d["cancel_outcome"] is None'
    run 0 cancel --name Waiter --status suspended --wait=30s
    contains "$tmp/out" "cancel requested for 1 instance of Waiter"
    contains "$tmp/out" "  sx-1"
    contains "$tmp/out" "sx-1: ended cancelled"

    # the race "cancel vs complete": the request is recorded while the
    # turn that completes the instance runs (Racer holds that turn until
    # told); the cancel fails: exit 4, and status says it came too late
    # race VERB ID FILE: sends VERB --wait while ID's completing turn runs
    race() {
        run 0 raise "$2" go
        await_file "$3.in-turn"
        "$duro" "$1" "$2" --wait=30s --json >"$tmp/out" 2>"$tmp/err" &
        verb_pid=$!
        # the request is on record, the instance still running: the race
        # is on (a cancel shows on the instance, a terminate is a queued
        # message, kind 11)
        if [ "$1" = cancel ]; then
            await "$2" 'd["cancel_requested_at"] is not None and d["status"] == "running"'
        else
            checks=$((checks + 1))
            n=0
            until python3 -c 'import sqlite3, sys
sys.exit(0 if sqlite3.connect(sys.argv[1]).execute(
    "SELECT COUNT(*) FROM orchestrator_queue WHERE instance_id = ? AND kind = 11",
    (sys.argv[2],)).fetchone()[0] else 1)' "$tmp/wait.db" "$2" 2>/dev/null; do
                n=$((n + 1))
                [ "$n" -lt 600 ] || break
                sleep 0.05
            done
            [ "$n" -lt 600 ] || fail "the terminate of $2 was never queued"
            await "$2" 'd["status"] == "running"'
        fi
        : >"$3.release"
        wait "$verb_pid"
        got=$?
        checks=$((checks + 1))
        [ "$got" = 4 ] || fail "duro $1 $2 --wait lost the race but exited $got: $(cat "$tmp/out" "$tmp/err")"
    }
    race cancel race-1 "$tmp/race1"
    json 'd["results"] == [{"id": "race-1", "outcome": "requested", "status": "running", "final_status": "completed", "timed_out": False}]'
    contains "$tmp/err" "duro cancel: race-1: it ended completed before the cancel took effect; it was not cancelled"
    run 0 status race-1
    grep -Eq '^status: +completed$' "$tmp/out" || fail "status race-1: $(cat "$tmp/out")"
    contains "$tmp/out" "arrived after the instance completed: not applied"
    grep -Eq '^cancelled_by: +-$' "$tmp/out" || fail "status race-1 names a canceller: $(cat "$tmp/out")"
    run 0 status race-1 --json
    json 'd["status"] == "completed" and d["output"] == "raced" and d["cancel_outcome"] == "too_late" and d["cancelling"] is False'
    run 0 list --json
    json '[i["id"] for i in d["instances"] if i["cancelling"]] == []'
    race terminate race-2 "$tmp/race2"
    json 'd["results"] == [{"id": "race-2", "outcome": "requested", "status": "running", "final_status": "completed", "timed_out": False}]'
    contains "$tmp/err" "duro terminate: race-2: it ended completed before the terminate took effect; it was not terminated"

    # no runtime: the deadline passes, exit 7
    run 0 start Waiter cw-5
    await cw-5 'd["status"] == "running" and d["history_count"] >= 2'
    exec 9>&-
    wait "$serve_pid" || fail "cli_fixture serve: $(cat "$tmp/serve.err")"
    serve_pid=""
    run 7 cancel cw-5 --wait=200ms
    contains "$tmp/out" "cw-5: cancel requested (was running)"
    contains "$tmp/err" "duro cancel: cw-5: still running at the deadline (--wait=200ms)"
    run 7 cancel cw-5 --wait=0 --json
    json 'd["results"] == [{"id": "cw-5", "outcome": "already_cancelled", "status": "running", "final_status": "running", "timed_out": True}]'
    run 7 terminate --name Waiter --wait=100ms --json
    json 'd["ids"] == ["cw-5"] and d["results"] == [{"id": "cw-5", "final_status": "running", "timed_out": True}]'
    export DURO_DB="$db"
else
    echo "   skipped: needs python3 and mkfifo"
fi

echo "== colour"
NO_COLOR=1 TERM=xterm run 0 list
NO_COLOR=1 TERM=xterm run 0 history slow-1

echo "== a password in --db never shows"
for url in 'postgresql://app:s3cret@db.invalid/orders?bogus=1' \
    'postgresql://app:s3cret@/orders?host=/nonexistent-duro-socket-dir' \
    'postgres://app:s3cret@db.invalid/orders?schema=bad-schema!' \
    'frob://app:s3cret@db.invalid/orders'; do
    for json in "" --json; do
        checks=$((checks + 1))
        "$duro" --db "$url" $json list >"$tmp/out" 2>"$tmp/err"
        rc=$?
        [ "$rc" != 0 ] || fail "duro --db $url list succeeded"
        if grep -q s3cret "$tmp/out" "$tmp/err"; then
            fail "the password shows: $(cat "$tmp/out" "$tmp/err")"
        fi
        one_line
    done
done

echo "== list --version and runtimes: which instances wait for which version, who has it"
vdb="sqlite:$tmp/versions.db"
run 0 --db "$vdb" start Order ver-1 --version 1
run 0 --db "$vdb" start Order ver-2a --version 2
run 0 --db "$vdb" start Order ver-2b --version 2
run 0 --db "$vdb" start Order ver-def --version ''
run 0 --db "$vdb" start Order ver-none
run 0 --db "$vdb" list --version 2 --json
json '[i["id"] for i in d["instances"]] == ["ver-2a", "ver-2b"] and d["total"] == 2 and d["instances"][0]["version"] == "2"'
run 0 --db "$vdb" list --version '' --json
json '[i["id"] for i in d["instances"]] == ["ver-def"]'
run 0 --db "$vdb" list --version 2 --status pending --name Order
contains "$tmp/out" "ver-2b"
grep -q "ver-1" "$tmp/out" && fail "list --version 2 shows ver-1"
run 0 --db "$vdb" list --version 9
contains "$tmp/err" "no instances match"
big=$(head -c 1025 /dev/zero | tr '\0' v)
run 1 --db "$vdb" list --version "$big"
contains "$tmp/err" "orchestration_version"
contains "$tmp/err" "1024"
run 2 --db "$vdb" list --version
run 0 --db "$vdb" runtimes
contains "$tmp/err" "no live runtimes"
run 0 --db "$vdb" runtimes --json
json 'd["runtimes"] == [] and rfc.match(d["read"])'
# two live runtimes as runtimes record themselves (a heartbeat period of a
# day keeps them live through the test), and one gone (no heartbeat for
# three periods)
now='CAST(strftime('"'"'%s'"'"', '"'"'now'"'"') AS INTEGER) * 1000'
"$fixture" sql "$tmp/versions.db" "INSERT INTO runtimes VALUES
    ('rt-a', 'host-a', 1234, $now - 2000, $now, 86400000,
     '[[\"Order\",\"1\"]]', '[]'),
    ('rt-b', 'host-b', 99, $now - 1000, $now, 86400000,
     '[[\"Order\",\"1\"],[\"Order\",\"2\"],[\"Ship\",\"\"]]', '[\"Greet\"]'),
    ('rt-gone', 'host-c', 7, 0, $now - 40000, 10000, '[]', '[]')" ||
    fail "cli_fixture sql: inserting runtimes"
run 0 --db "$vdb" runtimes
contains "$tmp/out" "RUNTIME"
contains "$tmp/out" "host-a:1234"
contains "$tmp/out" "Order@1, Order@2, Ship@(default)"
grep -q "host-c" "$tmp/out" && fail "runtimes lists a runtime that missed its heartbeats"
[ "$(grep -n host-a "$tmp/out" | cut -d: -f1)" -lt "$(grep -n host-b "$tmp/out" | cut -d: -f1)" ] ||
    fail "runtimes: not oldest start first: $(cat "$tmp/out")"
run 0 --db "$vdb" runtimes --name Order
contains "$tmp/out" "VERSIONS"
contains "$tmp/out" "1, 2"
run 0 --db "$vdb" runtimes --name Ship
contains "$tmp/out" "(default)"
contains "$tmp/out" "none"
run 0 --db "$vdb" runtimes --json
json '[r["host"] for r in d["runtimes"]] == ["host-a", "host-b"] and d["runtimes"][1]["orchestrations"] == [{"name": "Order", "version": "1"}, {"name": "Order", "version": "2"}, {"name": "Ship", "version": ""}] and d["runtimes"][1]["activities"] == ["Greet"] and d["runtimes"][0]["pid"] == 1234 and rfc.match(d["runtimes"][0]["heartbeat"]) and d["runtimes"][0]["heartbeat_every_ms"] == 86400000'
run 0 --db "$vdb" runtimes --name Order --json
json 'd["runtimes"][1]["orchestrations"] == [{"name": "Order", "version": "1"}, {"name": "Order", "version": "2"}]'
run 2 --db "$vdb" runtimes --name ''
# status shows a version's wait whole: the live runtimes come last
problem="orchestration 'Order' version '2' is not registered in this runtime; left to a live runtime that has it; waits for version '2' of 'Order'; live runtimes: $(printf 'host-%02d:1 has 1; ' 1 2 3 4 5 6 7 8 9 10 11 12)host-b:99 has 1, 2"
"$fixture" sql "$tmp/versions.db" "UPDATE instances SET last_problem = '$(printf %s "$problem" | sed "s/'/''/g")', last_problem_ms = 1 WHERE instance_id = 'ver-2a'" ||
    fail "cli_fixture sql: setting a problem"
run 0 --db "$vdb" status ver-2a
contains "$tmp/out" "host-b:99 has 1, 2"
contains "$tmp/out" "waits for version '2' of 'Order'"
run 2 --db "$vdb" runtimes extra

echo "== schedule"
sdb="sqlite:$tmp/sched.db"
run 0 --db "$sdb" schedule create nightly --orchestration Report \
    --cron '30 2 * * *' --zone Europe/Berlin --dry-run
contains "$tmp/out" "would create schedule nightly"
# the fire times on the zone's wall clock (02:30 in winter and summer),
# then in UTC
grep -Eq '^  [0-9]{4}-[0-9]{2}-[0-9]{2} 02:30 \+0[12]:00 Europe/Berlin  \([0-9-]{10}T0[01]:30:00\.000Z\)$' "$tmp/out" ||
    fail "next fires not on Berlin's clock: $(cat "$tmp/out")"
[ ! -e "$tmp/sched.db" ] || fail "a dry run created the store"
run 0 --db "$sdb" schedule create nightly --orchestration Report \
    --cron '30 2 * * *' --zone Europe/Berlin --input '{"k":1}' --json
json 'd["created"] is True and d["dry_run"] is False and len(d["next_fires"]) == 5'
json 'd["spec"]["time_zone"] == "Europe/Berlin" and d["spec"]["input"] == {"k": 1}'
run 1 --db "$sdb" schedule create nightly --orchestration Report --every 1h
contains "$tmp/err" "already exists"
run 0 --db "$sdb" schedule create hourly --orchestration Report --every 1h \
    --overlap buffer-one --catchup 2h --paused --note "not yet" --timeout 90m
contains "$tmp/out" "paused"
run 0 --db "$sdb" schedule list --json
json '[s["id"] for s in d["schedules"]] == ["hourly", "nightly"]'
json 'd["schedules"][0]["spec"]["paused"] is True and d["schedules"][0]["spec"]["note"] == "not yet"'
run 0 --db "$sdb" schedule resume hourly --dry-run
contains "$tmp/out" "would resume schedule hourly"
run 0 --db "$sdb" schedule describe hourly --json
json 'd["spec"]["paused"] is True and d["spec"]["overlap"] == "buffer-one" and d["spec"]["timeout_ms"] == 5400000'
run 0 --db "$sdb" schedule describe hourly
contains "$tmp/out" "timeout       1h30m (each instance's deadline after its start)"
run 2 --db "$sdb" schedule create late --orchestration Report --every 1h --timeout soon
run 0 --db "$sdb" schedule resume hourly
run 0 --db "$sdb" schedule trigger nightly --json
json 'd["instance"].startswith("nightly@trigger-") and d["action"] == "triggered"'
run 0 --db "$sdb" schedule describe nightly --next 3 --fires 5 --json
json 'len(d["next_fires"]) == 3 and d["recent_fires"][0]["action"] == "started"'
json 'd["recent_fires"][0]["instance_status"] == "pending" and d["fires"] == 1'
run 0 --db "$sdb" schedule describe nightly
contains "$tmp/out" "cron          30 2 * * * in Europe/Berlin"
contains "$tmp/out" "started  nightly@trigger-"
run 0 --db "$sdb" schedule pause nightly --note holidays
contains "$tmp/out" "instances it already started are not touched"
run 0 --db "$sdb" schedule delete nightly --dry-run --json
json 'd["dry_run"] is True and d["note"] == "instances it already started are not touched"'
run 0 --db "$sdb" schedule delete nightly
contains "$tmp/out" "deleted schedule nightly"
contains "$tmp/out" "instances it already started are not touched"
run 0 --db "$sdb" list
contains "$tmp/out" "nightly@trigger-"
run 3 --db "$sdb" schedule delete nightly
run 3 --db "$sdb" schedule describe nightly --json
json 'd["error"]["code"] == "not_found"'
run 0 --db "$sdb" schedule update hourly --orchestration Report --cron '@daily'
contains "$tmp/out" "updated schedule hourly"
run 0 --db "$sdb" metrics
contains "$tmp/out" 'duro_schedules{state="active"} 1'
contains "$tmp/out" 'duro_schedules{state="paused"} 0'
contains "$tmp/out" 'duro_schedule_overdue_seconds 0.000'
run 0 --db "$sdb" metrics --json
json 'd["schedules"] == {"active": 1, "paused": 0, "overdue_ms": 0}'
# bad input: a clear error each
run 2 --db "$sdb" schedule create bad --orchestration R --cron '61 * * * *'
contains "$tmp/err" "field 1 (minute): 61 is out of range 0-59"
run 3 --db "$sdb" schedule create bad --orchestration R --cron '@daily' --zone Mars/Base
contains "$tmp/err" "time zone 'Mars/Base' is not in the tz database"
run 2 --db "$sdb" schedule create bad --orchestration R --every 1h --cron '@daily'
contains "$tmp/err" "both a cron expression and an interval"
run 2 --db "$sdb" schedule create bad --orchestration R --every 1h --overlap sometimes
contains "$tmp/err" "--overlap: 'sometimes' is none of"
run 2 --db "$sdb" schedule create bad --orchestration R --every 1h --note x
contains "$tmp/err" "--note goes with --paused"
run 2 --db "$sdb" schedule pause hourly --cron x
run 2 --db "$sdb" schedule list extra
run 2 --db "$sdb" schedule
contains "$tmp/err" "expected a verb"
run 2 --db "$sdb" schedule frobnicate x
contains "$tmp/err" "unknown verb 'frobnicate'"
run 2 --db "$sdb" schedule trigger
run 0 schedule --help
contains "$tmp/out" "terminate-other"

echo "== man page and completion"
for verb in list status history start raise wait cancel terminate suspend resume \
    reset rewind delete purge prune schedule metrics runtimes version; do
    grep -q "^\.SS $verb" "$tooldir/duro.1" || fail "duro.1 has no section for $verb"
done
for word in "EXIT STATUS" "JSON OUTPUT" '"truncated"' '"dry_run"' NO_COLOR; do
    grep -qF -- "$word" "$tooldir/duro.1" || fail "duro.1 does not mention $word"
done
# duro.1's SYNOPSIS lists, for each verb, the options its --help's usage
# lines list, and no other (the common --db, --json and --help aside)
if [ "$have_python" = 1 ]; then
    for verb in list status history start raise wait cancel terminate \
        suspend resume reset rewind delete purge prune schedule metrics runtimes version ui; do
        "$duro" "$verb" --help | sed -n '1,/^$/p' >"$tmp/usage.$verb"
    done
    # a duro built without the console has no ui usage: its synopsis
    # stands as it is
    [ -s "$tmp/usage.ui" ] || echo "usage: duro ui [--listen ADDR:PORT] [--token-file F] [--read-only]" >"$tmp/usage.ui"
    checks=$((checks + 1))
    python3 - "$tooldir/duro.1" "$tmp" <<'PY' 2>"$tmp/pyerr" ||
import re, sys
man = open(sys.argv[1], encoding="utf-8").read()
synopsis = man.split(".SH SYNOPSIS", 1)[1].split(".SH DESCRIPTION", 1)[0]
in_man = {}
for entry in synopsis.split(".br"):
    m = re.search(r"^\.B duro ([a-z]+)", entry, re.M)
    if m:
        in_man.setdefault(m.group(1), set()).update(
            o.replace("\\-", "-") for o in re.findall(r"\\-\\-[a-z\\-]+[a-z]", entry))
bad = []
for verb in ["list", "status", "history", "start", "raise", "wait", "cancel",
             "terminate", "suspend", "resume", "reset", "rewind", "delete",
             "purge", "prune", "schedule", "metrics", "runtimes", "version", "ui"]:
    usage = open("%s/usage.%s" % (sys.argv[2], verb), encoding="utf-8").read()
    in_help = set(re.findall(r"--[a-z][a-z-]*[a-z]", usage)) - {"--json", "--db", "--help"}
    common = {"--json", "--db", "--help"}
    if in_help != in_man.get(verb, set()) - common:
        bad.append("%s: --help %s, duro.1 %s" % (verb, sorted(in_help), sorted(in_man.get(verb, set()) - common)))
assert not bad, "; ".join(bad)
PY
        fail "duro.1's SYNOPSIS and the verbs' usage lines differ: $(cat "$tmp/pyerr")"
fi
if command -v bash >/dev/null 2>&1; then
    # complete WORDS...: the completions for the last word
    complete_words() {
        bash -c '. "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))
            _duro; echo "${COMPREPLY[*]}"' bash "$tooldir/duro.bash" "$@"
    }
    checks=$((checks + 1))
    [ "$(complete_words duro ca)" = cancel ] || fail "completion of 'ca': $(complete_words duro ca)"
    [ "$(complete_words duro cancel --status '')" = "pending running suspended" ] ||
        fail "completion of cancel --status: $(complete_words duro cancel --status '')"
    for pair in "terminate:pending running suspended" "suspend:pending running" \
        "resume:suspended" "purge:completed failed cancelled terminated" \
        "reset:completed failed cancelled terminated"; do
        verb=${pair%%:*}
        [ "$(complete_words duro "$verb" --status '')" = "${pair#*:}" ] ||
            fail "completion of $verb --status: $(complete_words duro "$verb" --status '')"
    done
    [ "$(complete_words duro te)" = terminate ] || fail "completion of 'te': $(complete_words duro te)"
    [ "$(complete_words duro list --status running,su)" = running,suspended ] ||
        fail "completion of a status list: $(complete_words duro list --status running,su)"
    case " $(complete_words duro resume --) " in
    *" --dry-run "*"--name "*"--status "*"--before "*) ;;
    *) fail "completion of resume options: $(complete_words duro resume --)" ;;
    esac
    [ "$(complete_words duro list --status completed,fa)" = completed,failed ] ||
        fail "completion of a status list: $(complete_words duro list --status completed,fa)"
    [ "$(complete_words duro cancel --status pending,)" = "pending,running pending,suspended" ] ||
        fail "completion offers a given status again: $(complete_words duro cancel --status pending,)"
    [ "$(complete_words duro terminate --status running,pending,)" = running,pending,suspended ] ||
        fail "completion offers a given status again: $(complete_words duro terminate --status running,pending,)"
    [ "$(complete_words duro ui --token-file "$tmp/scrape.pr")" = "$tmp/scrape.prom" ] ||
        fail "completion of ui --token-file: $(complete_words duro ui --token-file "$tmp/scrape.pr")"
    case " $(complete_words duro --db x.db purge --) " in
    *" --dry-run "*" --json "*) ;;
    *) fail "completion of purge options: $(complete_words duro --db x.db purge --)" ;;
    esac
fi

# README's synopsis of the duro command names every verb the man page has
for verb in list status history start raise wait cancel terminate suspend resume \
    reset rewind delete purge prune metrics version ui; do
    sed -n '/^## Operating a store: the `duro` command/,/^## /p' "$tooldir/../../README.md" |
        grep -q "duro $verb\|duro terminate|suspend|resume\|duro [a-z]*|$verb" ||
        fail "README's duro synopsis lacks $verb"
done
# duro ui's address parsing (when built with the console)
run 2 ui --listen "[::1"
if ! grep -q "not built" "$tmp/err"; then
    contains "$tmp/err" "malformed address '[::1'"
    # --json: the first line is one JSON object; the server goes on
    if [ "$have_python" = 1 ]; then
        checks=$((checks + 1))
        printf 'ui-json-token-0123456789\n' >"$tmp/ui.token"
        python3 - "$duro" "$db" "$tmp/ui.token" <<'PY' 2>"$tmp/pyerr" ||
import json, select, signal, subprocess, sys, time
ui = subprocess.Popen([sys.argv[1], "--db", sys.argv[2], "ui", "--listen",
                       "127.0.0.1:0", "--token-file", sys.argv[3], "--json",
                       "--read-only", "--operator", "json-op"],
                      stdout=subprocess.PIPE, stderr=subprocess.PIPE)
try:
    line, deadline = b"", time.monotonic() + 10
    while not line.endswith(b"\n"):
        left = deadline - time.monotonic()
        assert left > 0 and select.select([ui.stdout], [], [], left)[0], \
            "no first line within 10 s"
        chunk = ui.stdout.read1(4096)
        assert chunk, "duro ui ended: %r" % ui.stderr.read()
        line += chunk
    first = line.split(b"\n")[0].decode("utf-8")
    d = json.loads(first)
    assert set(d) == {"url", "listen", "host", "port", "token", "read_only",
                      "operator"}, d
    assert d["token"] == "ui-json-token-0123456789" and d["read_only"] is True, d
    assert d["host"] == "127.0.0.1" and d["listen"] == "127.0.0.1:%d" % d["port"], d
    assert d["operator"] == "json-op", d
    # the URL holds a one-time login code, never the token
    prefix = "http://127.0.0.1:%d/#login=" % d["port"]
    assert d["url"].startswith(prefix) and d["token"] not in d["url"], d
    code = d["url"][len(prefix):]
    assert len(code) == 32 and all(c in "0123456789abcdef" for c in code), d
    assert ui.poll() is None, "duro ui stopped after its first line"
finally:
    ui.send_signal(signal.SIGTERM)
    ui.wait(10)
assert ui.returncode == 0, ui.returncode
PY
            fail "duro ui --json: $(cat "$tmp/pyerr")"
    fi
    run 0 ui --help
    contains "$tmp/out" "With --json it is one JSON object on one line instead"
fi

echo "$checks checks, $failures failed"
[ "$failures" = 0 ]
