#!/usr/bin/env bash
# bench/secure_peers.sh OUTDIR: builds two peers from source, each twice,
# plain and with its hardening, for `scripts/bench.sh --secure`: the cost of
# each allocator's hardening over its own plain build, beside brisk-secure's
# over brisk. Debian packages neither hardened build.
#   mimalloc 2.1.7: OUTDIR/libmimalloc-src.so and libmimalloc-src-secure.so
#     (MI_SECURE=4: guard pages, encoded free lists, double-free checks,
#     randomized allocation, padding); its unity file src/static.c, -O3.
#   snmalloc (as vendored by snmalloc-sys 0.3.8): OUTDIR/libsnmalloc-src.so
#     and libsnmalloc-src-checks.so (its own CMake targets snmallocshim and
#     snmallocshim-checks, SNMALLOC_CHECK_CLIENT), Release.
# The sources are the ones the libmimalloc-sys and snmalloc-sys crates
# vendor (crates.io), checked against their SHA-256. snmalloc needs cmake
# and a C++20 compiler; without them only mimalloc is built.
set -euo pipefail
OUT=${1:?usage: bench/secure_peers.sh OUTDIR}
mkdir -p "$OUT"

# fetch NAME VERSION SHA256: the crate's source, unpacked in OUT.
fetch() {
  local crate="$OUT/$1-$2.crate"
  [ -f "$crate" ] || curl -fsSL --retry 2 -o "$crate" "https://static.crates.io/crates/$1/$1-$2.crate"
  echo "$3  $crate" | sha256sum -c --quiet - || { rm -f "$crate"; echo "$1 $2: checksum mismatch" >&2; return 1; }
  tar -xzf "$crate" -C "$OUT"
}

if [ ! -f "$OUT/libmimalloc-src.so" ] || [ ! -f "$OUT/libmimalloc-src-secure.so" ]; then
  fetch libmimalloc-sys 0.1.39 23aa6811d3bd4deb8a84dde645f943476d13b248d818edcf8ce0b2f37f036b44
  src="$OUT/libmimalloc-sys-0.1.39/c_src/mimalloc"
  for variant in plain secure; do
    flags=(-O3 -DNDEBUG -DMI_MALLOC_OVERRIDE -fPIC -shared -I"$src/include")
    name=libmimalloc-src.so
    [ $variant = secure ] && { flags+=(-DMI_SECURE=4); name=libmimalloc-src-secure.so; }
    cc "${flags[@]}" "$src/src/static.c" -o "$OUT/$name.tmp" -lpthread -w
    mv "$OUT/$name.tmp" "$OUT/$name"
  done
fi

if [ ! -f "$OUT/libsnmalloc-src.so" ] || [ ! -f "$OUT/libsnmalloc-src-checks.so" ]; then
  command -v cmake > /dev/null && command -v c++ > /dev/null || { echo "snmalloc: no cmake or c++, left out" >&2; exit 0; }
  fetch snmalloc-sys 0.3.8 065fea53d32bb77bc36cca466cb191f2e5216ebfd0ed360b1d64889ee6e559ea
  src="$OUT/snmalloc-sys-0.3.8/snmalloc"
  cmake -S "$src" -B "$OUT/snmalloc-build" -DCMAKE_BUILD_TYPE=Release -DSNMALLOC_BUILD_TESTING=OFF > /dev/null
  cmake --build "$OUT/snmalloc-build" -j2 --target snmallocshim snmallocshim-checks > /dev/null
  cp "$OUT/snmalloc-build/libsnmallocshim.so" "$OUT/libsnmalloc-src.so"
  cp "$OUT/snmalloc-build/libsnmallocshim-checks.so" "$OUT/libsnmalloc-src-checks.so"
fi
