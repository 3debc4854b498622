# pg_test_lib.sh - what the PostgreSQL shell tests share; sourced, not run.
#
# pg_test_base: sets $base to the server's URL: DURO_TEST_PG_URL, else the
#   first line of the file DURO_TEST_PG_URL_FILE names (the pg fixture's);
#   without either it says so and exits 77 (skipped).
# fail TEXT, run EXPECTED_RC NAME ARGS... (duro ARGS, stdout in
#   $tmp/NAME.out and stderr in $tmp/NAME.err), contains FILE TEXT: count
#   in $checks and $failures; $duro and $tmp are the caller's.
# pg_wait_role_gone ROLE: waits, polling with a 30 s deadline, until no
#   backend of ROLE is left in pg_stat_activity (psql "$base": $psql is the
#   caller's); fails and returns 1 at the deadline. A client's exit does
#   not wait for its backends to exit, so until they have, a role with a
#   CONNECTION LIMIT can be refused ("too many connections for role").

pg_test_base() {
    if [ -n "${DURO_TEST_PG_URL:-}" ]; then
        base=$DURO_TEST_PG_URL
    elif [ -n "${DURO_TEST_PG_URL_FILE:-}" ]; then
        base=$(head -n 1 "$DURO_TEST_PG_URL_FILE" 2>/dev/null)
        if [ -z "$base" ]; then
            echo "cannot read the PostgreSQL URL from $DURO_TEST_PG_URL_FILE" \
                 "(written by the pg_cluster_start test: run the tests with" \
                 "ctest, or set DURO_TEST_PG_URL)" >&2
            exit 1
        fi
    else
        echo "no PostgreSQL server to test against: DURO_TEST_PG_URL and" \
             "DURO_TEST_PG_URL_FILE are not set; skipped"
        exit 77
    fi
}

failures=0
checks=0
fail() {
    printf 'FAIL: %s\n' "$*" >&2
    failures=$((failures + 1))
}

run() {
    want=$1 name=$2
    shift 2
    checks=$((checks + 1))
    "$duro" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" </dev/null
    got=$?
    if [ "$got" != "$want" ]; then
        fail "duro $name exited $got, expected $want"
        sed 's/^/  stdout: /' "$tmp/$name.out" >&2
        sed 's/^/  stderr: /' "$tmp/$name.err" >&2
    fi
}

contains() {
    checks=$((checks + 1))
    grep -qF -- "$2" "$1" || fail "$1 lacks '$2': $(head -c 600 "$1")"
}

pg_wait_role_gone() {
    wait_role=$1
    wait_deadline=$(($(date +%s) + 30))
    wait_polls=0
    while :; do
        wait_n=$("$psql" "$base" -qAt -c "SELECT COUNT(*) FROM pg_stat_activity
            WHERE usename = '$wait_role'" </dev/null 2>&1)
        [ "$wait_n" = 0 ] && break
        if [ "$(date +%s)" -ge "$wait_deadline" ]; then
            fail "backends of role $wait_role still connected after 30 s" \
                 "(pg_stat_activity: $wait_n)"
            return 1
        fi
        wait_polls=$((wait_polls + 1))
        sleep 0.05 2>/dev/null || sleep 1
    done
    [ "$wait_polls" = 0 ] ||
        echo "   waited $wait_polls polls for role $wait_role's backends to exit"
    return 0
}
