#!/bin/sh
# test_pg_pgbouncer.sh DURO PG_CLUSTER - duro behind PgBouncer, in front of
# the PostgreSQL test server. In transaction pooling a connection's
# statements run in whichever server session is free, so the schema's
# search_path, the prepared statements and LISTEN go astray: duro must
# refuse to open the store, saying why, and create nothing (before, it
# opened, and a `duro start` with schema=A could land in another
# application's schema). In statement pooling it must refuse too. In session
# pooling it works: start, list, status.
# The server's URL: DURO_TEST_PG_URL, else the first line of the file
# DURO_TEST_PG_URL_FILE names (the pg fixture's); it must name the server
# with host= and port= parameters (the fixture's does). Exit 77 (skipped,
# saying why) without a server, without such a URL, or without pgbouncer
# (Debian's package; .ci/install-deps --tests, which make test runs,
# installs it). pgbouncer refuses to run as root: as root it runs as the
# `postgres` user, like the cluster.
set -u

if [ $# -ne 2 ]; then
    echo "usage: $0 DURO PG_CLUSTER" >&2
    exit 2
fi
duro=$1 pg_cluster=$2
. "$(dirname "$0")/pg_test_lib.sh"
pg_test_base
pgbouncer=$(command -v pgbouncer || ls /usr/sbin/pgbouncer 2>/dev/null)
if [ -z "$pgbouncer" ]; then
    echo "pgbouncer is not installed (Debian: apt-get install pgbouncer);" \
         "skipped"
    exit 77
fi
param() { printf '%s' "$base" | sed -n "s/.*[?&]$1=\([^&]*\).*/\1/p"; }
pg_host=$(param host) pg_port=$(param port) pg_user=$(param user)
if [ -z "$pg_host" ] || [ -z "$pg_port" ]; then
    echo "the server's URL has no host= and port= parameters ($base" \
         "is not the test cluster's form); skipped"
    exit 77
fi
[ -n "$pg_user" ] || pg_user=$(id -un)

tmp=$(mktemp -d "${TMPDIR:-/tmp}/duro-pgbouncer.XXXXXX") || exit 1
chmod 755 "$tmp"
as_server() { "$@"; }
if [ "$(id -u)" = 0 ]; then
    chown postgres "$tmp"
    as_server() { runuser -u postgres -- "$@"; }
fi
schema="pgb_$$"
psql=""
bindir=$(sh "$pg_cluster" bindir 2>/dev/null) && [ -x "$bindir/psql" ] &&
    psql="$bindir/psql"
cleanup() {
    for pid in "$tmp"/*.pid; do
        [ -f "$pid" ] && kill "$(cat "$pid")" 2>/dev/null
    done
    [ -n "$psql" ] && "$psql" "$base" -qAt -c \
        "SET client_min_messages TO warning;
         DROP SCHEMA IF EXISTS \"$schema\" CASCADE" </dev/null >/dev/null 2>&1
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' HUP INT TERM

# bouncer MODE PORT: a pgbouncer in pool MODE on a unix socket in $tmp,
# PORT, in front of the server; waits until it accepts connections.
bouncer() {
    cat >"$tmp/$1.ini" <<EOF
[databases]
* = host=$pg_host port=$pg_port user=$pg_user
[pgbouncer]
listen_addr =
listen_port = $2
unix_socket_dir = $tmp
auth_type = any
pool_mode = $1
logfile = $tmp/$1.log
pidfile = $tmp/$1.pid
EOF
    [ "$(id -u)" = 0 ] && chown postgres "$tmp/$1.ini"
    if ! as_server "$pgbouncer" -d "$tmp/$1.ini"; then
        fail "pgbouncer ($1) did not start: $(tail -5 "$tmp/$1.log")"
        return 1
    fi
    i=0
    while [ ! -S "$tmp/.s.PGSQL.$2" ] && [ $i -lt 300 ]; do
        sleep 0.1
        i=$((i + 1))
    done
    [ -S "$tmp/.s.PGSQL.$2" ] || fail "pgbouncer ($1) has no socket"
}

# schema_exists: 1 when the test's schema exists on the server, 0 when not
# ("?" without psql).
schema_exists() {
    if [ -z "$psql" ]; then
        echo "?"
        return
    fi
    "$psql" "$base" -qAt -c "SELECT count(*) FROM pg_namespace WHERE
        nspname = '$schema'" </dev/null
}

url_at() {
    echo "postgresql:///postgres?host=$tmp&port=$1&user=$pg_user&schema=$schema"
}

# Transaction pooling: refused, nothing created.
bouncer transaction 6441
for verb in start list; do
    if [ $verb = start ]; then
        run 1 "tx-$verb" --db "$(url_at 6441)" start Anything tx-1
    else
        run 1 "tx-$verb" --db "$(url_at 6441)" list
    fi
    contains "$tmp/tx-$verb.err" "duro needs one server session per connection"
    contains "$tmp/tx-$verb.err" "pool_mode = transaction"
done
checks=$((checks + 1))
[ "$(schema_exists)" != 1 ] || fail "transaction pooling: the schema was created"
# and nothing was SET on the pooler's server sessions, which other clients
# get next: each still has the server's search_path
if [ -n "$psql" ]; then
    for k in 1 2 3; do
        checks=$((checks + 1))
        sp=$("$psql" "postgresql:///postgres?host=$tmp&port=6441&user=$pg_user" \
            -qAt -c "SHOW search_path" </dev/null 2>&1)
        case $sp in
        *public*) ;;
        *) fail "a pooled session was left with search_path '$sp'" ;;
        esac
    done
fi

# Statement pooling: refused too.
bouncer statement 6442
run 1 stmt-start --db "$(url_at 6442)" start Anything st-1
contains "$tmp/stmt-start.err" "duro needs one server session per connection"
checks=$((checks + 1))
[ "$(schema_exists)" != 1 ] || fail "statement pooling: the schema was created"

# Session pooling: works.
bouncer session 6443
run 0 sess-start --db "$(url_at 6443)" start Anything sess-1 --input '"in"'
run 0 sess-list --db "$(url_at 6443)" list --json
contains "$tmp/sess-list.out" '"sess-1"'
run 0 sess-status --db "$(url_at 6443)" status sess-1
contains "$tmp/sess-status.out" "pending"
checks=$((checks + 1))
[ "$(schema_exists)" != 0 ] || fail "session pooling: no schema was created"

if [ "$failures" -gt 0 ]; then
    echo "$failures of $checks checks failed" >&2
    exit 1
fi
echo "$checks checks passed"
