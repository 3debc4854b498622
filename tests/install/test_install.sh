#!/bin/sh
# test_install.sh BUILD SOURCE CC PKG_CONFIG CMAKE GENERATOR VERSION [SANITIZE]
#
# Installs the built tree BUILD into a temporary prefix (cmake --install
# --prefix), checks what landed there (share/doc/duro too), then builds
# consumer/consumer.c
# against the installed files four ways and runs each build:
#   pkg-config, shared:   cc $(pkg-config --cflags --libs duro)
#   pkg-config, static:   the same with --static, -lduro as -l:libduro.a
#   find_package(duro):   duro::duro and duro::duro_static (consumer/)
# and compiles every installed example the README's way (pkg-config,
# shared).
# Each program checks duro_version() against DURO_VERSION_STRING and runs a
# one-activity orchestration on its own SQLite file.
#
# SANITIZE is the build's DURO_SANITIZE ("" or e.g. "address,undefined"). A
# sanitized libduro needs the sanitizer's runtime in the program, so the
# consumers are compiled and linked with the same -fsanitize flags.
#
# The build directory's install_manifest.txt (what `make uninstall`
# removes) is put back as it was. DURO_TEST_KEEP=1 keeps the temporary
# directory.
set -eu

if [ $# -lt 7 ]; then
    echo "usage: $0 BUILD SOURCE CC PKG_CONFIG CMAKE GENERATOR VERSION" \
         "[SANITIZE]" >&2
    exit 2
fi
build=$1 source=$2 cc=$3 pkgconfig=$4 cmake=$5 generator=$6 version=$7
sanitize=${8:-}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/duro-install-test.XXXXXX")
manifest="$build/install_manifest.txt"
had_manifest=0
if [ -f "$manifest" ]; then
    cp -p "$manifest" "$tmp/install_manifest.saved"
    had_manifest=1
fi
cleanup() {
    if [ "$had_manifest" = 1 ]; then
        cp -p "$tmp/install_manifest.saved" "$manifest"
    else
        rm -f "$manifest"
    fi
    if [ -n "${DURO_TEST_KEEP:-}" ]; then
        echo "kept $tmp"
    else
        rm -rf "$tmp"
    fi
}
trap cleanup EXIT
trap 'exit 1' HUP INT TERM

step() { printf '== %s\n' "$*"; }
fail() {
    printf 'FAIL: %s\n' "$*" >&2
    exit 1
}
# run LOG CMD...: runs CMD with its output in LOG, shown when it fails.
run() {
    log=$1
    shift
    if ! "$@" >"$log" 2>&1; then
        cat "$log" >&2
        fail "$*"
    fi
}

# ---- install ---------------------------------------------------------------
prefix="$tmp/prefix"
step "cmake --install $build --prefix $prefix"
run "$tmp/install.log" "$cmake" --install "$build" --prefix "$prefix"

pc=""
for f in "$prefix"/lib*/pkgconfig/duro.pc "$prefix"/lib/*/pkgconfig/duro.pc; do
    [ -f "$f" ] && pc=$f && break
done
[ -n "$pc" ] || fail "no lib*/pkgconfig/duro.pc under $prefix"
libdir=$(dirname "$(dirname "$pc")")

major=${version%%.*}
minor=${version#*.}
minor=${minor%%.*}
if [ "$major" = 0 ]; then soversion=0.$minor; else soversion=$major; fi
for f in "$prefix/include/duro.h" "$prefix/include/duro/common.h" \
    "$prefix/include/duro/provider.h" "$libdir/libduro.a" \
    "$libdir/libduro.so.$version" "$libdir/cmake/duro/duroConfig.cmake" \
    "$libdir/cmake/duro/duroConfigVersion.cmake"; do
    [ -f "$f" ] || fail "not installed: $f"
done
for link in libduro.so.$soversion libduro.so; do
    [ -L "$libdir/$link" ] || fail "not a symbolic link: $libdir/$link"
done
[ "$(readlink "$libdir/libduro.so.$soversion")" = "libduro.so.$version" ] ||
    fail "libduro.so.$soversion points at $(readlink "$libdir/libduro.so.$soversion")"
grep -q "^prefix=$prefix\$" "$pc" ||
    fail "$pc does not name the prefix it was installed to: $(grep '^prefix=' "$pc")"
if grep -qF "$source" "$pc" "$libdir"/cmake/duro/*.cmake; then
    fail "installed files name the source tree $source"
fi
# The duro command, its man page and bash completion; the installed
# command runs with the installed library, found without LD_LIBRARY_PATH
# (its run path is relative to it).
for f in "$prefix/bin/duro" "$prefix/share/man/man1/duro.1" \
    "$prefix/share/bash-completion/completions/duro"; do
    [ -f "$f" ] || fail "not installed: $f"
done
env -u LD_LIBRARY_PATH "$prefix/bin/duro" version >"$tmp/duro-version" 2>&1 ||
    fail "installed duro version: $(cat "$tmp/duro-version")"
grep -q "libduro $version" "$tmp/duro-version" ||
    fail "installed duro version says: $(cat "$tmp/duro-version")"
# The documents: the licence, the changelog, the README with docs/ and
# examples/ beside it, and every file duro(1) names in that directory.
docdir="$prefix/share/doc/duro"
for f in LICENSE CHANGELOG.md README.md examples/README.md; do
    [ -f "$docdir/$f" ] || fail "not installed: $docdir/$f"
done
for f in "$source"/docs/*.md "$source"/docs/images/*.png \
    "$source"/examples/*.c "$source"/examples/*.cpp; do
    rel=${f#"$source"/}
    cmp -s "$f" "$docdir/$rel" || fail "not installed: $docdir/$rel"
done
grep -q 'share/doc/duro' "$prefix/share/man/man1/duro.1" ||
    fail "duro.1 does not name share/doc/duro"
for f in $(grep -o -e 'README\.md' -e 'docs/[a-z-]*\.md' -e 'examples/' \
    "$prefix/share/man/man1/duro.1" | sort -u); do
    [ -e "$docdir/$f" ] || fail "duro.1 names $f, not installed in $docdir"
done
echo "installed: headers, libduro.a, libduro.so.$version" \
     "(soname libduro.so.$soversion), duro.pc, lib/cmake/duro," \
     "bin/duro, duro.1, bash completion, share/doc/duro"

san=""
[ -n "$sanitize" ] && san="-fsanitize=$sanitize -fno-omit-frame-pointer"
warn="-std=c11 -Wall -Wextra -Wpedantic -Werror"
# A copy, so that nothing next to the source can stand in for a header.
cp "$source/tests/install/consumer/consumer.c" "$tmp/consumer.c"

# check_uses_libduro PROGRAM shared|static [LD_LIBRARY_PATH]: the shared
# build loads libduro.so from the prefix (through LD_LIBRARY_PATH when given,
# else through its rpath), the static one does not load it at all.
check_uses_libduro() {
    if [ -n "${3:-}" ]; then
        deps=$(LD_LIBRARY_PATH="$3" ldd "$1") || fail "ldd $1"
    else
        deps=$(env -u LD_LIBRARY_PATH ldd "$1") || fail "ldd $1"
    fi
    case "$2:$deps" in
    shared:*"libduro.so.$soversion => $libdir/libduro.so.$soversion"*) ;;
    static:*libduro*) fail "$1 loads libduro: $deps" ;;
    static:*) ;;
    *) fail "$1 does not load $libdir/libduro.so.$soversion: $deps" ;;
    esac
}

# ---- pkg-config ------------------------------------------------------------
step "pkg-config (PKG_CONFIG_PATH=$libdir/pkgconfig)"
PKG_CONFIG_PATH="$libdir/pkgconfig"
export PKG_CONFIG_PATH
modversion=$("$pkgconfig" --modversion duro) || fail "pkg-config duro"
[ "$modversion" = "$version" ] ||
    fail "pkg-config --modversion duro says $modversion; expected $version"
cflags=$("$pkgconfig" --cflags duro)
libs=$("$pkgconfig" --libs duro)
static_libs=$("$pkgconfig" --static --libs duro)
echo "cflags: $cflags"
echo "libs: $libs"
echo "static libs: $static_libs"
for need in -lduro -lpthread -lsqlite3; do
    case " $static_libs " in
    *" $need "*) ;;
    *) fail "pkg-config --static --libs duro lacks $need" ;;
    esac
done
# Beside libduro.so, -lduro would pick the shared library: name the
# archive, as README.md says.
static_link=$(printf '%s\n' "$static_libs" |
    sed 's/\(^\| \)-lduro\( \|$\)/\1-l:libduro.a\2/')

# shellcheck disable=SC2086 # the flags are lists of words
run "$tmp/pc_shared.log" "$cc" $warn $san $cflags "$tmp/consumer.c" \
    -o "$tmp/pc_shared" $libs
# shellcheck disable=SC2086
run "$tmp/pc_static.log" "$cc" $warn $san $cflags "$tmp/consumer.c" \
    -o "$tmp/pc_static" $static_link
check_uses_libduro "$tmp/pc_shared" shared "$libdir"
check_uses_libduro "$tmp/pc_static" static
LD_LIBRARY_PATH="$libdir" "$tmp/pc_shared" "$tmp/pc_shared.db" ||
    fail "pkg-config shared build"
env -u LD_LIBRARY_PATH "$tmp/pc_static" "$tmp/pc_static.db" ||
    fail "pkg-config static build"

# Every installed example compiles alone with README's command line (no
# _GNU_SOURCE or other flag from examples/CMakeLists.txt), with warnings as
# errors.
step "share/doc/duro/examples/*.c with cc -std=c11" \
     "\$(pkg-config --cflags --libs duro)"
mkdir "$tmp/examples"
for f in "$docdir"/examples/*.c; do
    name=$(basename "$f" .c)
    cp "$f" "$tmp/examples/$name.c"
    # shellcheck disable=SC2086
    run "$tmp/examples/$name.log" "$cc" $warn $san $cflags \
        "$tmp/examples/$name.c" -o "$tmp/examples/$name" $libs
done
echo "examples: $(cd "$tmp/examples" && ls -- *.c | tr '\n' ' ')"

# ---- find_package(duro) ----------------------------------------------------
step "find_package(duro) (CMAKE_PREFIX_PATH=$prefix)"
unset PKG_CONFIG_PATH
run "$tmp/cmake-configure.log" "$cmake" -G "$generator" \
    -S "$source/tests/install/consumer" -B "$tmp/cmake-build" \
    -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_COMPILER="$cc" \
    -DCMAKE_C_FLAGS="$san" -DCMAKE_EXE_LINKER_FLAGS="$san" \
    -DDURO_EXPECTED_VERSION="$version"
grep -e 'find_package(duro' -e 'found duro' "$tmp/cmake-configure.log" |
    sed 's/^-- //'
run "$tmp/cmake-build.log" "$cmake" --build "$tmp/cmake-build"
check_uses_libduro "$tmp/cmake-build/consumer_shared" shared
check_uses_libduro "$tmp/cmake-build/consumer_static" static
# No LD_LIBRARY_PATH: CMake gave the shared build an rpath to the prefix.
env -u LD_LIBRARY_PATH "$tmp/cmake-build/consumer_shared" \
    "$tmp/cmake_shared.db" || fail "find_package shared build"
env -u LD_LIBRARY_PATH "$tmp/cmake-build/consumer_static" \
    "$tmp/cmake_static.db" || fail "find_package static build"

step "ok: installed duro $version builds and runs through pkg-config and" \
     "find_package, shared and static${sanitize:+, with -fsanitize=$sanitize}"
