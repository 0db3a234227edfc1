#!/usr/bin/env bash
# bench/mimalloc_secure.sh OUTDIR: builds mimalloc 2.1.7 twice from its
# source, plain and in its secure mode (MI_SECURE=4: guard pages, encoded
# free lists, double-free checks, randomized allocation, padding), as
# OUTDIR/libmimalloc-src.so and OUTDIR/libmimalloc-src-secure.so, for
# `scripts/bench.sh --secure`: the cost of mimalloc's secure mode over its
# own plain build, beside brisk-secure's over brisk. Debian packages no
# secure mimalloc. The source is the one the libmimalloc-sys crate vendors
# (crates.io), checked against its SHA-256; both builds use the same flags
# (its unity file src/static.c, -O3, overriding malloc).
set -euo pipefail
OUT=${1:?usage: bench/mimalloc_secure.sh OUTDIR}
VERSION=0.1.39 # libmimalloc-sys, vendoring mimalloc 2.1.7
SHA256=23aa6811d3bd4deb8a84dde645f943476d13b248d818edcf8ce0b2f37f036b44
URL=https://static.crates.io/crates/libmimalloc-sys/libmimalloc-sys-$VERSION.crate
mkdir -p "$OUT"
[ -f "$OUT/libmimalloc-src.so" ] && [ -f "$OUT/libmimalloc-src-secure.so" ] && exit 0
crate="$OUT/libmimalloc-sys-$VERSION.crate"
[ -f "$crate" ] || curl -fsSL --retry 2 -o "$crate" "$URL"
echo "$SHA256  $crate" | sha256sum -c --quiet - || { rm -f "$crate"; echo "mimalloc source: checksum mismatch" >&2; exit 1; }
tar -xzf "$crate" -C "$OUT"
src="$OUT/libmimalloc-sys-$VERSION/c_src/mimalloc"
for variant in plain secure; do
  flags=(-O3 -DNDEBUG -DMI_MALLOC_OVERRIDE -fPIC -shared -I"$src/include")
  name=libmimalloc-src.so
  [ $variant = secure ] && { flags+=(-DMI_SECURE=4); name=libmimalloc-src-secure.so; }
  cc "${flags[@]}" "$src/src/static.c" -o "$OUT/$name.tmp" -lpthread -w
  mv "$OUT/$name.tmp" "$OUT/$name"
done
