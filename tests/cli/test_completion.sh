#!/bin/sh
# test_completion.sh TOOLDIR - duro's bash completion (TOOLDIR/duro.bash)
# in a real interactive bash on a pseudo-terminal (tests/cli/pty_run.py):
# lines are typed with TAB, and a shell function named duro prints the
# arguments bash then runs it with. After `--db sqlite:PATH` (bash splits
# the word at ':', which is in COMP_WORDBREAKS), `--db=...` and `@FILE`
# (':', '=' and '@' are) it must still complete verbs, options, statuses
# and files, inserting only the rest of the word. Exit 77 (skipped) when
# bash or python3 is missing. DURO_TEST_KEEP=1 keeps the temporary
# directory.
set -u

if [ $# -ne 1 ]; then
    echo "usage: $0 TOOLDIR" >&2
    exit 2
fi
tooldir=$1
here=$(cd "$(dirname "$0")" && pwd)
for tool in bash python3; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "test_completion: skipped: $tool is missing (the test types into an interactive bash on a pseudo-terminal made by python3)"
        exit 77
    fi
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/duro-completion-test.XXXXXX")
cleanup() {
    if [ -n "${DURO_TEST_KEEP:-}" ]; then echo "kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
trap 'exit 1' HUP INT TERM

: >"$tmp/completion-target.db"
cat >"$tmp/rc" <<EOF
PS1='duro-test\$ '
. '$tooldir/duro.bash'
duro() { printf '<%s>' "\$@"; printf '\\n'; }
EOF

failures=0
checks=0
# typed LINE...: types each LINE (with its TABs) at a fresh prompt of one
# interactive bash; the transcript in $tmp/tty
typed() {
    n=$#
    for line in "$@" 'exit\n'; do
        set -- "$@" --expect 'duro-test$ ' --send "$line"
    done
    shift "$n" # the steps made from the lines remain
    checks=$((checks + 1))
    env -i HOME="$tmp" PATH="$PATH" TERM=dumb INPUTRC=/dev/null \
        python3 "$here/pty_run.py" "$@" -- \
        bash --noprofile --rcfile "$tmp/rc" -i >"$tmp/tty" 2>"$tmp/tty.err"
    rc=$?
    [ "$rc" = 0 ] || {
        printf 'FAIL: bash exited %s: %s %s\n' "$rc" "$(cat -v "$tmp/tty")" "$(cat "$tmp/tty.err")" >&2
        failures=$((failures + 1))
    }
}
# ran ARGS: the transcript shows duro run with exactly these arguments
ran() {
    checks=$((checks + 1))
    grep -qF -- "$1" "$tmp/tty" || {
        printf 'FAIL: duro was not run as %s: %s\n' "$1" "$(cat -v "$tmp/tty")" >&2
        failures=$((failures + 1))
    }
}

typed 'duro --db sqlite:/tmp/x.db stat\t\n' \
    'duro --db sqlite:/tmp/x.db sta\t\tr\t\n' \
    "duro --db sqlite:$tmp/completion-t\\t list\\n" \
    'duro --db sqlite:/tmp/x.db cancel --st\tpe\t\n' \
    "duro --db=sqlite:$tmp/completion-t\\t te\\t\\n" \
    "duro --db sqlite:/tmp/x.db start Hello x-1 --input @$tmp/completion-t\\t\\n" \
    'duro --db sqlite:/tmp/x.db list --status running,su\t\n' \
    'duro --db sqlite:/tmp/x.db cancel --name N --wa\t\n' \
    'duro --db sqlite:/tmp/x.db sche\t des\t n1\n' \
    'duro --db sqlite:/tmp/x.db schedule create n2 --cr\t "@daily" --overl\t ter\t --dry\t\n'
ran '<--db><sqlite:/tmp/x.db><status>'
ran '<--db><sqlite:/tmp/x.db><start>'
ran "<--db><sqlite:$tmp/completion-target.db><list>"
ran '<--db><sqlite:/tmp/x.db><cancel><--status><pending>'
ran "<--db=sqlite:$tmp/completion-target.db><terminate>"
ran "<--db><sqlite:/tmp/x.db><start><Hello><x-1><--input><@$tmp/completion-target.db>"
ran '<--db><sqlite:/tmp/x.db><list><--status><running,suspended>'
ran '<--db><sqlite:/tmp/x.db><cancel><--name><N><--wait>'
ran '<--db><sqlite:/tmp/x.db><schedule><describe><n1>'
ran '<--db><sqlite:/tmp/x.db><schedule><create><n2><--cron><@daily><--overlap><terminate-other><--dry-run>'

echo "test_completion: $checks checks, $failures failed"
[ "$failures" = 0 ]
