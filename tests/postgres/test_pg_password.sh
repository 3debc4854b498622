#!/bin/sh
# test_pg_password.sh DURO - a store URL without a password works with the
# password libpq finds itself: PGPASSWORD, or a password file (~/.pgpass,
# PGPASSFILE), for the duro command's one-shot verbs and for DURO_DB; and
# without one, the connection fails saying so. Against the fixture's
# cluster, which trusts local connections: the test adds a line to its
# pg_hba.conf that makes one role of its own present a password
# (scram-sha-256), reloads, and puts the file back at the end. Skipped
# (77) when the server's hba file cannot be written (a server of one's
# own, DURO_TEST_PG_URL).
set -u
duro=$1
here=$(dirname "$0")
. "$here/pg_test_lib.sh"
pg_test_base
psql=psql
command -v psql >/dev/null 2>&1 || { echo "psql not found; skipped"; exit 77; }
export PGOPTIONS="${PGOPTIONS:-} -c client_min_messages=warning"
tmp=$(mktemp -d) || exit 1
role="duro_pw_$$"
schema="pgpw_$$"
password="pw-$$-secret"
sql() { "$psql" "$base" -qAtX -v ON_ERROR_STOP=1 -c "$1" </dev/null; }

hba=$(sql "SHOW hba_file") || exit 1
if [ ! -w "$hba" ]; then
    echo "cannot write the server's hba file ($hba): skipped"
    rm -rf "$tmp"
    exit 77
fi
cp "$hba" "$tmp/hba.saved" || exit 1
cleanup() {
    cat "$tmp/hba.saved" >"$hba" && sql "SELECT pg_reload_conf()" >/dev/null
    sql "DROP SCHEMA IF EXISTS $schema CASCADE" >/dev/null
    pg_wait_role_gone "$role" >/dev/null
    sql "DROP ROLE IF EXISTS $role" >/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

sql "CREATE ROLE $role LOGIN PASSWORD '$password'" >/dev/null || exit 1
sql "CREATE SCHEMA $schema AUTHORIZATION $role" >/dev/null || exit 1
# first line wins: this role presents a password over the socket and TCP
{
    printf 'local all %s scram-sha-256\n' "$role"
    printf 'host all %s all scram-sha-256\n' "$role"
    cat "$tmp/hba.saved"
} >"$hba"
[ "$(sql "SELECT pg_reload_conf()")" = t ] || exit 1

# the fixture's URL with this role as its user (user= replaced or added)
url=$(printf '%s' "$base" | sed -e 's/\([?&]\)user=[^&]*&\{0,1\}/\1/' -e 's/[?&]$//')
case $url in *\?*) url="$url&user=$role" ;; *) url="$url?user=$role" ;; esac
store="$url&schema=$schema"
case $store in *password*) fail "the URL under test holds a password: $store" ;; esac

echo "== without a password: refused, and the message says so"
# the server reloads its hba file asynchronously: wait (deadline) until
# the role is asked for one
deadline=$(($(date +%s) + 30))
while :; do
    "$duro" --db "$store" start Hello pw-1 >"$tmp/nopw.out" 2>"$tmp/nopw.err" </dev/null
    rc=$?
    [ $rc != 0 ] && break
    [ "$(date +%s)" -ge "$deadline" ] && break
    sleep 0.1 2>/dev/null || sleep 1
done
checks=$((checks + 1))
[ "$rc" = 1 ] || fail "duro start without a password exited $rc, expected 1"
contains "$tmp/nopw.err" "password"

echo "== PGPASSWORD"
export PGPASSWORD="$password"
run 0 start --db "$store" start Hello pw-1
run 0 list --db "$store" list
contains "$tmp/list.out" "pw-1"
run 0 metrics --db "$store" metrics
contains "$tmp/metrics.out" "duro_instances{"
unset PGPASSWORD

echo "== a password file (PGPASSFILE, as ~/.pgpass), and DURO_DB"
printf '*:*:*:%s:%s\n' "$role" "$password" >"$tmp/pgpass"
chmod 600 "$tmp/pgpass"
export PGPASSFILE="$tmp/pgpass"
run 0 status --db "$store" status pw-1
contains "$tmp/status.out" "pw-1"
export DURO_DB="$store"
run 0 env_list list --json
contains "$tmp/env_list.out" '"pw-1"'
unset PGPASSFILE DURO_DB

echo "== none of it shows the password"
checks=$((checks + 1))
if grep -l -- "$password" "$tmp"/*.out "$tmp"/*.err >/dev/null 2>&1; then
    fail "an output holds the password: $(grep -l -- "$password" "$tmp"/*.out "$tmp"/*.err)"
fi

echo "$checks checks, $failures failed"
[ "$failures" = 0 ]
