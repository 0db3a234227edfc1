#!/usr/bin/env bash
# brisk as users get it: `cmake --install` into a temporary prefix (then
# moved, since nothing in it may name where it was installed), and three
# projects outside the tree built against it and run:
#   find_package(brisk)  every brisk:: target, C and C++
#   pkg-config           brisk.pc (shared) and brisk-core.pc (archive)
#   add_subdirectory     brisk from source, with GoogleTest hidden: no test
#                        target is built, the brisk:: aliases resolve
# plus: the SONAME and file names, brisk-run --help/--version from the
# prefix, a missing GoogleTest only skips the tests, and `cpack -G DEB`.
# Usage: consumers.sh BUILD_DIR SOURCE_DIR C_COMPILER CXX_COMPILER
set -euo pipefail
[ $# -eq 4 ] || { echo "usage: $0 BUILD_DIR SOURCE_DIR CC CXX"; exit 2; }
BUILD=$(cd "$1" && pwd) SRC=$(cd "$2" && pwd) CC=$3 CXX=$4
HERE=$(cd "$(dirname "$0")" && pwd)
TMP=$(mktemp -d "${TMPDIR:-/tmp}/brisk-install.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
unset LD_PRELOAD BRISK_LIB
fail() { echo "FAIL: $*" >&2; exit 1; }
quiet() { local log=$TMP/log; "$@" > "$log" 2>&1 || { cat "$log" >&2; fail "$*"; }; }
version=$(sed -n 's/^#define BRISK_VERSION_STRING "\(.*\)"/\1/p' "$BUILD/include/brisk_version.h")
major=${version%%.*}
[ -n "$version" ] || fail "no BRISK_VERSION_STRING in $BUILD/include/brisk_version.h"

# ---- install, then move the tree
quiet cmake --install "$BUILD" --prefix "$TMP/staged"
mv "$TMP/staged" "$TMP/prefix"
P=$TMP/prefix
libdir=$(cd "$P" && dirname "$(find . -name libbrisk.so.$version)" | sed 's|^\./||')
for f in "$libdir/libbrisk.so.$version" "$libdir/libbrisk.so.$major" "$libdir/libbrisk.so" \
         "$libdir/libbrisk-checked.so.$version" "$libdir/libbrisk.a" "$libdir/libbrisk_core.a" \
         "$libdir/libbrisk_core_checked.a" "$libdir/libbrisk-secure.so.$version" "$libdir/libbrisk-secure.a" \
         "$libdir/libbrisk_core_secure.a" include/brisk.h include/brisk.hpp include/brisk-new-delete.hpp \
         include/brisk_version.h "$libdir/pkgconfig/brisk.pc" "$libdir/pkgconfig/brisk-core.pc" \
         "$libdir/cmake/brisk/briskConfig.cmake" "$libdir/cmake/brisk/briskConfigVersion.cmake" \
         bin/brisk-run share/man/man1/brisk-run.1 share/doc/brisk/LICENSE share/doc/brisk/CHANGELOG.md; do
  [ -e "$P/$f" ] || fail "not installed: $f"
done
soname=$(readelf -d "$P/$libdir/libbrisk.so.$version" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
[ "$soname" = "libbrisk.so.$major" ] || fail "SONAME is '$soname', expected libbrisk.so.$major"
[ "$(readlink "$P/$libdir/libbrisk.so.$major")" = "libbrisk.so.$version" ] || fail "libbrisk.so.$major link"
if grep -rq "$TMP/staged" "$P"; then fail "the installed tree names its install prefix: $(grep -rl "$TMP/staged" "$P")"; fi
echo "ok: installed $version into a prefix (SONAME $soname), relocatable"

out=$("$P/bin/brisk-run" --help) || fail "brisk-run --help: exit status $?"
grep -q -- "--children" <<<"$out" || fail "brisk-run --help: $out"
out=$("$P/bin/brisk-run" --version) || fail "brisk-run --version: exit status $?"
grep -qx "brisk-run $version" <<<"$out" || fail "brisk-run --version: $out"
out=$("$P/bin/brisk-run" -- sh -c 'grep -c libbrisk /proc/$$/maps') || fail "installed brisk-run"
[ "$out" -gt 0 ] || fail "installed brisk-run did not preload its library"
echo "ok: installed brisk-run finds its library"

# ---- find_package(brisk)
quiet cmake -S "$HERE/consumer" -B "$TMP/fp" -DCMAKE_PREFIX_PATH="$P" -DCMAKE_C_COMPILER="$CC" \
      -DCMAKE_CXX_COMPILER="$CXX" -DCMAKE_BUILD_TYPE=Release
quiet cmake --build "$TMP/fp" -j2
for t in brisk static checked secure secure_static core core_checked core_secure cpp; do
  "$TMP/fp/app_$t" || fail "find_package consumer app_$t"
done
out=$(ldd "$TMP/fp/app_brisk")
grep -q "libbrisk.so.$major => $P/" <<<"$out" || fail "app_brisk does not load the installed libbrisk.so.$major: $out"
echo "ok: find_package(brisk) consumers"
# A version the package does not promise is refused.
cat > "$TMP/CMakeLists.txt" <<EOT
cmake_minimum_required(VERSION 3.16)
project(v C)
find_package(brisk $((major + 1)).0 QUIET)
if(brisk_FOUND)
  message(FATAL_ERROR "brisk $version accepted for $((major + 1)).0")
endif()
EOT
quiet cmake -S "$TMP" -B "$TMP/fv" -DCMAKE_PREFIX_PATH="$P"
echo "ok: find_package refuses another major version"

# ---- pkg-config
export PKG_CONFIG_PATH="$P/$libdir/pkgconfig"
[ "$(pkg-config --modversion brisk)" = "$version" ] || fail "pkg-config --modversion brisk"
# shellcheck disable=SC2046
"$CC" -o "$TMP/pc_shared" "$HERE/consumer/app.c" -DEXPECT_OVERRIDE=1 $(pkg-config --cflags --libs brisk) ||
  fail "pkg-config brisk: compile"
LD_LIBRARY_PATH="$P/$libdir" "$TMP/pc_shared" || fail "pkg-config brisk consumer"
# shellcheck disable=SC2046
"$CC" -o "$TMP/pc_core" "$HERE/consumer/app.c" -DEXPECT_OVERRIDE=0 $(pkg-config --cflags --libs brisk-core) ||
  fail "pkg-config brisk-core: compile"
"$TMP/pc_core" || fail "pkg-config brisk-core consumer"
unset PKG_CONFIG_PATH
echo "ok: pkg-config consumers"

# ---- add_subdirectory, GoogleTest out of sight
quiet cmake -S "$HERE/subproject" -B "$TMP/sub" -DBRISK_SOURCE_DIR="$SRC" -DCMAKE_C_COMPILER="$CC" \
      -DCMAKE_CXX_COMPILER="$CXX" -DBRISK_GTEST_SOURCE_DIR="$TMP/no-gtest" -DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON
[ ! -e "$TMP/sub/brisk/tests" ] || fail "add_subdirectory configured brisk's tests"
quiet cmake --build "$TMP/sub" -j2 --target app
"$TMP/sub/app" || fail "add_subdirectory consumer"
echo "ok: add_subdirectory consumer, no tests configured"

# ---- top level without GoogleTest: a message, and the libraries still build
cmake -S "$SRC" -B "$TMP/nogtest" -DBRISK_GTEST_SOURCE_DIR="$TMP/no-gtest" -DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON \
      -DCMAKE_C_COMPILER="$CC" -DCMAKE_CXX_COMPILER="$CXX" > "$TMP/nogtest.log" 2>&1 ||
  { cat "$TMP/nogtest.log"; fail "configure without GoogleTest failed"; }
grep -q "GoogleTest not found" "$TMP/nogtest.log" || fail "no message about the missing GoogleTest"
echo "ok: without GoogleTest the tests are skipped with a message"

# ---- cpack -G DEB: the package holds the same tree under /usr
if command -v dpkg-deb > /dev/null; then
  (cd "$BUILD" && quiet cpack -G DEB -B "$TMP/deb")
  deb=$(ls "$TMP"/deb/brisk_"$version"_*.deb 2>/dev/null | head -1)
  [ -n "$deb" ] || fail "cpack made no .deb: $(ls "$TMP/deb")"
  info=$(dpkg-deb -I "$deb")
  grep -q "Version: $version" <<<"$info" || fail "the .deb's version: $info"
  # A real `dpkg -i`, into a root of its own (its own package database), so
  # the test never changes the machine: dpkg unpacks, registers and
  # configures the package there (libc6 is not in that empty database).
  mkdir -p "$TMP/debroot/var/lib/dpkg/updates" "$TMP/debroot/var/lib/dpkg/info"
  touch "$TMP/debroot/var/lib/dpkg/status"
  quiet dpkg --root="$TMP/debroot" --force-not-root --force-depends --force-script-chrootless \
    --log=/dev/null -i "$deb" || fail "dpkg -i of the .deb"
  dpkg --root="$TMP/debroot" -s brisk | grep -q "Status: install ok installed" ||
    fail "dpkg does not list brisk as installed"
  [ -e "$TMP/debroot/usr/$libdir/libbrisk.so.$version" ] || fail "the .deb lacks libbrisk.so.$version"
  export PKG_CONFIG_PATH="$TMP/debroot/usr/$libdir/pkgconfig"
  # shellcheck disable=SC2046
  "$CC" -o "$TMP/deb_app" "$HERE/consumer/app.c" -DEXPECT_OVERRIDE=1 $(pkg-config --cflags --libs brisk) ||
    fail "compile against the .deb's files"
  LD_LIBRARY_PATH="$TMP/debroot/usr/$libdir" "$TMP/deb_app" || fail "consumer of the .deb's files"
  echo "ok: cpack -G DEB: $(basename "$deb"), installed with dpkg -i and built against"
fi
echo "install and consumers: ok"
