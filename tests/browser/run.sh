#!/bin/sh
# run.sh - duro ui's browser tests (CTest test ui_browser): seeds a SQLite
# store with cli_fixture and runs `node --test` over tests/browser/ with
# Debian's Chromium (/usr/bin/chromium) driven by playwright-core. Nothing
# is downloaded here: `npm ci --prefix tests/browser` is a setup step
# (.ci/run does it). Exits 77 (CTest: skipped) when chromium, node or
# tests/browser/node_modules is missing, and says so.
#   run.sh DURO CLI_FIXTURE OUTDIR
set -u
duro=${1:?usage: run.sh DURO CLI_FIXTURE OUTDIR}
fixture=${2:?usage}
out=${3:?usage}
here=$(cd "$(dirname "$0")" && pwd)

skip() {
    echo "ui_browser: SKIPPED the browser tests: $*"
    exit 77
}
[ -x /usr/bin/chromium ] ||
    skip "no /usr/bin/chromium (apt-get install -y chromium)"
command -v node >/dev/null 2>&1 || skip "no node"
[ -d "$here/node_modules/playwright-core" ] ||
    skip "no tests/browser/node_modules (npm ci --prefix tests/browser)"

dir=$(mktemp -d /tmp/duro-browser-XXXXXX) || exit 1
trap 'rm -rf "$dir"' EXIT
db="sqlite:$dir/seed.db"
for mode in populate control hostile views; do
    "$fixture" "$mode" "$db" || {
        echo "ui_browser: cli_fixture $mode failed" >&2
        exit 1
    }
done
mkdir -p "$out"
DURO_BIN=$duro DURO_FIXTURE=$fixture DURO_SEED_DB="$dir/seed.db" \
    DURO_SCREENSHOTS=$out \
    node --test --test-concurrency=1 "$here/"
