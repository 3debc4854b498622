#!/bin/sh
# test_readme.sh SOURCE CC STATIC_LIB SHARED_LIB_DIR POSTGRES SANITIZE
#
# README's first program, as a newcomer copies it: takes the first C block
# under "## A first program" in SOURCE/README.md, compiles it with warnings
# as errors against the built library the README's two ways (libduro.a
# with its dependencies, -lpq when POSTGRES is ON; libduro.so with an
# rpath), and runs each build
# - with no argument in an empty directory and again there (its store,
#   hello.db, is made, then found): exit 0, "Completed: Hello, duro!";
# - on a fresh SQLite file given as its argument: the same;
# - on a directory (as its argument, and as hello.db with no argument):
#   a clean failure, exit status 1 to 125 (not a signal's 128 + N, not a
#   sanitizer's report) and a message on stderr naming the directory.
# SANITIZE is the build's DURO_SANITIZE, passed on to the program.
# DURO_TEST_KEEP=1 keeps the temporary directory.
set -eu

if [ $# -ne 6 ]; then
    echo "usage: $0 SOURCE CC STATIC_LIB SHARED_LIB_DIR POSTGRES SANITIZE" >&2
    exit 2
fi
source=$1 cc=$2 static_lib=$3 shared_dir=$4 postgres=$5 sanitize=$6

tmp=$(mktemp -d "${TMPDIR:-/tmp}/duro-readme-test.XXXXXX")
cleanup() {
    if [ -n "${DURO_TEST_KEEP:-}" ]; then
        echo "kept $tmp"
    else
        rm -rf "$tmp"
    fi
}
trap cleanup EXIT
trap 'exit 1' HUP INT TERM

failures=0
checks=0
fail() {
    printf 'FAIL: %s\n' "$*" >&2
    failures=$((failures + 1))
}

# The block: from the line after the first ```c that follows the heading
# to the next ```.
awk '/^## A first program/ { h = 1; next }
     h && /^## / { exit }
     h && !c && /^```c$/ { c = 1; next }
     c && /^```/ { exit }
     c { print }' "$source/README.md" >"$tmp/hello.c"
if ! grep -q 'int main' "$tmp/hello.c"; then
    echo "FAIL: no C program under '## A first program' in" \
         "$source/README.md" >&2
    exit 1
fi
echo "== README.md's first program: $(wc -l <"$tmp/hello.c") lines"

san=""
[ -n "$sanitize" ] && san="-fsanitize=$sanitize -fno-omit-frame-pointer"
pq=""
case $postgres in ON | on | 1 | TRUE | true) pq="-lpq" ;; esac
warn="-std=c11 -Wall -Wextra -Wpedantic -Werror"
# shellcheck disable=SC2086 # the flags are lists of words
if ! "$cc" $warn $san -I"$source/include" "$tmp/hello.c" "$static_lib" \
    -lsqlite3 $pq -lpthread -o "$tmp/hello_static" >"$tmp/cc.log" 2>&1 ||
    ! "$cc" $warn $san -I"$source/include" "$tmp/hello.c" -L"$shared_dir" \
        -lduro -Wl,-rpath,"$shared_dir" -o "$tmp/hello_shared" \
        >>"$tmp/cc.log" 2>&1; then
    cat "$tmp/cc.log" >&2
    echo "FAIL: README.md's first program does not compile" >&2
    exit 1
fi

# succeeds NAME DIR [URL]: the program, run in DIR, exits 0 and prints the
# greeting.
succeeds() {
    checks=$((checks + 1))
    name=$1 dir=$2
    shift 2
    rc=0
    (cd "$dir" && exec "$program" "$@") >"$tmp/out" 2>"$tmp/err" || rc=$?
    if [ "$rc" != 0 ]; then
        fail "$kind, $name: exited $rc, expected 0: $(cat "$tmp/err")"
    elif [ "$(cat "$tmp/out")" != "Completed: Hello, duro!" ]; then
        fail "$kind, $name: printed '$(cat "$tmp/out")'," \
             "expected 'Completed: Hello, duro!'"
    fi
}

# fails_cleanly NAME DIR TEXT [URL]: the program, run in DIR, exits 1 to
# 125 with TEXT in its message.
fails_cleanly() {
    checks=$((checks + 1))
    name=$1 dir=$2 text=$3
    shift 3
    rc=0
    (cd "$dir" && exec "$program" "$@") >"$tmp/out" 2>"$tmp/err" || rc=$?
    if [ "$rc" = 0 ]; then
        fail "$kind, $name: exited 0, expected a failure"
    elif [ "$rc" -gt 125 ]; then
        fail "$kind, $name: exited $rc (killed by signal $((rc - 128))?)," \
             "expected a clean failure: $(cat "$tmp/err")"
    elif grep -q 'Sanitizer' "$tmp/err"; then
        fail "$kind, $name: a sanitizer's report: $(cat "$tmp/err")"
    elif ! grep -qF -- "$text" "$tmp/err"; then
        fail "$kind, $name: exited $rc; its message lacks '$text':" \
             "'$(cat "$tmp/err")'"
    fi
}

for kind in static shared; do
    program="$tmp/hello_$kind"
    echo "== $kind: a new store, then the same again; a directory"
    mkdir "$tmp/$kind" "$tmp/$kind-dir" "$tmp/$kind-dir/hello.db"
    succeeds "no argument" "$tmp/$kind"
    succeeds "no argument, run again" "$tmp/$kind"
    [ -f "$tmp/$kind/hello.db" ] || fail "$kind: no hello.db made"
    succeeds "sqlite:FILE" "$tmp" "sqlite:$tmp/$kind.db"
    fails_cleanly "sqlite:DIRECTORY" "$tmp" "$tmp/$kind-dir" \
        "sqlite:$tmp/$kind-dir"
    fails_cleanly "hello.db a directory" "$tmp/$kind-dir" "hello.db"
done

echo "$checks checks, $failures failed"
[ "$failures" = 0 ]
