# pg_test_lib.sh - what the PostgreSQL shell tests share; sourced, not run.
#
# pg_test_base: sets $base to the server's URL: DURO_TEST_PG_URL, else the
#   first line of the file DURO_TEST_PG_URL_FILE names (the pg fixture's);
#   without either it says so and exits 77 (skipped).
# fail TEXT, run EXPECTED_RC NAME ARGS... (duro ARGS, stdout in
#   $tmp/NAME.out and stderr in $tmp/NAME.err), contains FILE TEXT: count
#   in $checks and $failures; $duro and $tmp are the caller's.

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
