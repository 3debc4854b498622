#!/bin/sh
# test_pg_cli.sh DURO PG_CLUSTER - runs the duro command against the
# PostgreSQL test server: with a URL that carries a password both as
# user:PASSWORD@ and as password=PASSWORD (the test cluster trusts local
# connections, so libpq connects whatever the password), list, metrics,
# status of a missing instance, a connection that fails (wrong port), the
# password percent-encoded (pass%77ord=) or in another case (Password=)
# and, when this duro has the console, `duro ui` until it serves; the password
# must be in no output at all. Then that a read verb on a schema that does
# not exist fails and creates nothing (duro opens with create=0).
# The server's URL: DURO_TEST_PG_URL, else the first line of the file
# DURO_TEST_PG_URL_FILE names (the pg fixture's); without either, exit 77
# (skipped). psql comes from `PG_CLUSTER bindir`; without it the checks on
# the server are made through duro. DURO_TEST_KEEP=1 keeps the temporary
# directory and the schema.
set -u

if [ $# -ne 2 ]; then
    echo "usage: $0 DURO PG_CLUSTER" >&2
    exit 2
fi
duro=$1 pg_cluster=$2
. "$(dirname "$0")/pg_test_lib.sh"
pg_test_base

tmp=$(mktemp -d "${TMPDIR:-/tmp}/duro-pg-cli-test.XXXXXX") || exit 1
schema="pgcli_$$"
missing="never_made_$$"
other="not_duro_$$"
psql=""
bindir=$(sh "$pg_cluster" bindir 2>/dev/null) && [ -x "$bindir/psql" ] &&
    psql="$bindir/psql"
ui_pid=""
cleanup() {
    [ -n "$ui_pid" ] && kill "$ui_pid" 2>/dev/null
    if [ -n "${DURO_TEST_KEEP:-}" ]; then
        echo "kept $tmp and schema $schema"
        return
    fi
    [ -n "$psql" ] && "$psql" "$base" -qAt -c \
        "SET client_min_messages TO warning;
         DROP SCHEMA IF EXISTS \"$schema\" CASCADE;
         DROP SCHEMA IF EXISTS \"$missing\" CASCADE;
         DROP SCHEMA IF EXISTS \"$other\" CASCADE" </dev/null >/dev/null 2>&1
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' HUP INT TERM

# The password, in the userinfo and as a parameter. The userinfo needs a
# user name: the URL's own, else the user= parameter's (which libpq
# prefers anyway), else the one libpq defaults to.
secret="PASSWORD"
scheme=${base%%://*}
rest=${base#*://}
case $rest in
*/*) authority=${rest%%/*} path=/${rest#*/} ;;
*) authority=$rest path="" ;;
esac
case $authority in
*@*)
    user=${authority%%@*}
    user=${user%%:*}
    host=${authority#*@}
    ;;
*)
    user=$(printf '%s' "$base" | sed -n 's/.*[?&]user=\([^&]*\).*/\1/p')
    [ -n "$user" ] || user=$(id -un)
    host=$authority
    ;;
esac
case $base in
*\?*) sep='&' ;;
*) sep='?' ;;
esac
url="$scheme://$user:$secret@$host$path${sep}password=$secret&schema=$schema"
case $base in
*\?*) nsep='&' ;;
*) nsep='?' ;;
esac

echo "== a store on schema $schema (created by start)"
run 0 start --db "$url" start Greeting g1 --input '"hi"'
if grep -q 'password authentication failed' "$tmp/start.err"; then
    echo "the server checks passwords, so a URL with a made-up one cannot" \
         "connect: skipped (the test cluster trusts local connections)"
    exit 77
fi

echo "== list, metrics, status of a missing instance"
run 0 list --db "$url" list
contains "$tmp/list.out" g1
run 0 json_list --db "$url" --json list
contains "$tmp/json_list.out" '"g1"'
run 0 metrics --db "$url" metrics
contains "$tmp/metrics.out" duro_
run 3 status --db "$url" status nosuch
run 3 json_status --db "$url" --json status nosuch

echo "== a server that takes no writes says so (as a hot standby would)"
ro="$url&options=-c%20default_transaction_read_only%3Don"
run 0 ro_list --db "$ro" list
contains "$tmp/ro_list.out" g1
run 1 ro_start --db "$ro" start Anything ro-1
contains "$tmp/ro_start.err" "(25006); the server takes no writes here"
run 1 ro_cancel --db "$ro" cancel --name Greeting
contains "$tmp/ro_cancel.err" "the batches done before this failure stand"

echo "== a connection that fails: nothing listens on port 1"
run 1 port --db "$url&port=1" list
contains "$tmp/port.err" "cannot connect"
contains "$tmp/port.err" "$user:***@"
contains "$tmp/port.err" "password=***"

echo "== other spellings of the password: percent-encoded, other case"
# libpq decodes parameter names: pass%77ord= is its password; Password= is
# no name of its (refused), but masked all the same.
enc="$scheme://$user@$host$path${sep}pass%77ord=$secret&schema=$missing"
run 1 enc_missing --db "$enc" list
contains "$tmp/enc_missing.err" "schema \"$missing\" does not exist"
contains "$tmp/enc_missing.err" "pass%77ord=***"
run 1 enc_port --db "$enc&port=1" list
contains "$tmp/enc_port.err" "cannot connect"
contains "$tmp/enc_port.err" "pass%77ord=***"
run 2 case_bad --db "$url&Password=$secret" list
contains "$tmp/case_bad.err" "Password=***"
contains "$tmp/case_bad.err" 'invalid URI query parameter: "Password"'

echo "== duro ui"
if "$duro" ui --help >/dev/null 2>&1; then
    "$duro" --db "$url" ui --listen 127.0.0.1:0 >"$tmp/ui.out" \
        2>"$tmp/ui.err" </dev/null &
    ui_pid=$!
    # wait for its "serving" line, with a deadline
    deadline=$(($(date +%s) + 30))
    while ! grep -q 'serving' "$tmp/ui.err" 2>/dev/null; do
        if ! kill -0 "$ui_pid" 2>/dev/null; then
            fail "duro ui exited before serving: $(cat "$tmp/ui.err")"
            break
        fi
        if [ "$(date +%s)" -ge "$deadline" ]; then
            fail "duro ui did not say it was serving within 30 s"
            break
        fi
        sleep 0.05 2>/dev/null || sleep 1
    done
    kill "$ui_pid" 2>/dev/null
    wait "$ui_pid" 2>/dev/null
    ui_pid=""
    contains "$tmp/ui.err" "serving"
    contains "$tmp/ui.err" "$user:***@"
    contains "$tmp/ui.out" "#login="
else
    echo "this duro was built without the console (duro ui --help fails):" \
         "the ui part is skipped"
fi

echo "== a read verb on a schema that does not exist creates nothing"
run 1 missing --db "$base${nsep}schema=$missing" list
contains "$tmp/missing.err" "schema \"$missing\" does not exist"
contains "$tmp/missing.err" "nothing was created"
run 1 json_missing --db "$base${nsep}schema=$missing" --json list
contains "$tmp/json_missing.out" '"no_database"'
checks=$((checks + 1))
if [ -n "$psql" ]; then
    n=$("$psql" "$base" -qAt -c \
        "SELECT COUNT(*) FROM pg_namespace WHERE nspname = '$missing'" \
        </dev/null 2>"$tmp/psql.err")
    [ "$n" = 0 ] || fail "schema $missing exists after duro list" \
                         "(psql says '$n': $(cat "$tmp/psql.err"))"
else
    # create=0 given by us: it still fails, so the schema was not made
    run 1 missing_again --db "$base${nsep}schema=$missing&create=0" list
    contains "$tmp/missing_again.err" "does not exist"
fi

echo "== a read verb on a schema that holds no duro store creates nothing"
if [ -n "$psql" ]; then
    "$psql" "$base" -qAt -c "CREATE SCHEMA \"$other\";
        CREATE TABLE \"$other\".stuff(x int)" </dev/null >/dev/null 2>&1 ||
        fail "psql: creating schema $other"
    for args in "list" "status x-1" "metrics" "cancel x-1"; do
        # shellcheck disable=SC2086
        run 1 other --db "$base${nsep}schema=$other" $args
        contains "$tmp/other.err" "schema \"$other\""
        contains "$tmp/other.err" "holds no duro store"
    done
    checks=$((checks + 1))
    n=$("$psql" "$base" -qAt -c "SELECT COUNT(*) FROM pg_class c JOIN
        pg_namespace s ON s.oid = c.relnamespace WHERE s.nspname = '$other'" \
        </dev/null 2>"$tmp/psql.err")
    [ "$n" = 1 ] || fail "schema $other holds $n relations after the read verbs," \
                         "expected 1 ($(cat "$tmp/psql.err"))"
else
    echo "   skipped: no psql"
fi

echo "== a one-shot verb opens two connections at most (pool=1, the listener)"
if [ -n "$psql" ]; then
    role="pgcli_two_$$"
    "$psql" "$base" -qAt -c "CREATE ROLE $role LOGIN CONNECTION LIMIT 2;
        GRANT USAGE ON SCHEMA \"$schema\" TO $role;
        GRANT SELECT ON ALL TABLES IN SCHEMA \"$schema\" TO $role" \
        </dev/null >/dev/null 2>&1 || fail "psql: creating role $role"
    two=$(printf '%s' "$base${nsep}schema=$schema" |
        sed "s/\([?&]\)user=[^&]*/\1user=$role/")
    case $two in
    *user=$role*) ;;
    *) two="$two&user=$role" ;;
    esac
    # five pooled connections and the listener were refused by the limit;
    # each verb waits for the previous one's backends to exit, which they
    # do after duro has (on a busy machine, not always before the next
    # verb connects)
    pg_wait_role_gone "$role"
    run 0 two_list --db "$two" list
    pg_wait_role_gone "$role"
    run 0 two_metrics --db "$two" metrics
    pg_wait_role_gone "$role"
    run 3 two_status --db "$two" status x-1
    contains "$tmp/two_status.err" "x-1"
    "$psql" "$base" -qAt -c "REVOKE ALL ON ALL TABLES IN SCHEMA \"$schema\"
        FROM $role; REVOKE ALL ON SCHEMA \"$schema\" FROM $role;
        DROP ROLE $role" </dev/null >/dev/null 2>&1
else
    echo "   skipped: no psql"
fi

echo "== the password is in no output"
checks=$((checks + 1))
if grep -rlF -- "$secret" "$tmp" >"$tmp.leaks" 2>/dev/null; then
    fail "the password is in $(tr '\n' ' ' <"$tmp.leaks")"
    grep -rF -- "$secret" "$tmp" | sed 's/^/  /' >&2
fi

rm -f "$tmp.leaks"
echo "$checks checks, $failures failed"
[ "$failures" = 0 ]
