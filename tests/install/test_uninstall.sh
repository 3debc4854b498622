#!/bin/sh
# test_uninstall.sh SOURCE - `make uninstall` (the Makefile in SOURCE)
# removes what the last install wrote under that install's DESTDIR, and
# refuses a different DESTDIR, on a build directory of its own: a manifest
# and a DESTDIR record as `make install` leaves them, over a staged tree.
# Nothing outside a temporary directory is touched (the manifest's paths
# are under it, with or without the stage in front).
set -eu
[ $# -eq 1 ] || { echo "usage: $0 SOURCE" >&2; exit 2; }
source=$1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/duro-uninstall-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() {
    printf 'FAIL: %s\n' "$*" >&2
    exit 1
}

# An install into PREFIX=$tmp/usr staged under DESTDIR=$tmp/stage: the
# manifest lists paths without the stage, as CMake writes it.
mkdir -p "$tmp/build" "$tmp/stage$tmp/usr/include/duro" "$tmp/usr/include/duro" \
    "$tmp/stage$tmp/usr/share/doc/duro/docs/images" \
    "$tmp/usr/share/doc/duro/docs/images"
for f in "$tmp/usr/include/duro.h" "$tmp/usr/include/duro/common.h" \
    "$tmp/usr/share/doc/duro/docs/images/a.png"; do
    printf '%s\n' "$f" >> "$tmp/build/install_manifest.txt"
    : > "$tmp/stage$f"
    : > "$f" # the same path unstaged: must survive
done
printf '%s\n' "$tmp/stage" > "$tmp/build/install_destdir"

# A different DESTDIR is refused and removes nothing.
if make -s -C "$source" uninstall BUILD="$tmp/build" DESTDIR="$tmp/other" \
    > "$tmp/out" 2>&1; then
    fail "uninstall with another DESTDIR succeeded"
fi
grep -q "was into DESTDIR='$tmp/stage'" "$tmp/out" ||
    fail "no clear refusal: $(cat "$tmp/out")"
[ -f "$tmp/stage$tmp/usr/include/duro.h" ] || fail "refusal removed a file"

# Without DESTDIR: the stage's files go, the unstaged ones stay.
make -s -C "$source" uninstall BUILD="$tmp/build" > "$tmp/out" 2>&1 ||
    fail "uninstall failed: $(cat "$tmp/out")"
[ ! -e "$tmp/stage$tmp/usr/include/duro.h" ] || fail "staged duro.h left"
[ ! -e "$tmp/stage$tmp/usr/include/duro" ] || fail "staged duro/ left"
[ ! -e "$tmp/stage$tmp/usr/share/doc/duro" ] ||
    fail "staged share/doc/duro left: $(find "$tmp/stage$tmp/usr/share/doc/duro")"
[ -d "$tmp/stage$tmp/usr/share/doc" ] || fail "share/doc removed"
[ -f "$tmp/usr/include/duro.h" ] || fail "uninstall ignored the DESTDIR"
[ -f "$tmp/usr/include/duro/common.h" ] || fail "uninstall ignored DESTDIR"
echo "ok"
