#!/usr/bin/env bash
# The dynamic-tls feature as it is meant to be used: a fresh cdylib outside
# the tree (under /tmp) with brisk as its global allocator, built with
# `features = ["dynamic-tls"]`, asks for no static TLS (readelf shows no
# STATIC_TLS flag, which initial-exec TLS sets) and works when python3
# loads it late with ctypes, as it loads an extension module: four Python
# threads call into it, each building, growing and dropping Vecs, Strings
# and an over-aligned block through brisk. Prints "cdylib dlopen: ok ..."
# and exits 0 when all holds; exits 77 when python3 or readelf is missing.
#
#   rust/cdylib-dlopen.sh
#   CARGO=/path/to/cargo rust/cdylib-dlopen.sh
set -euo pipefail

RUST_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CARGO=${CARGO:-cargo}
for tool in python3 readelf; do
  command -v "$tool" >/dev/null 2>&1 || { echo "cdylib dlopen: skipped, no $tool"; exit 77; }
done
WORK=$(mktemp -d /tmp/brisk-cdylib.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

"$CARGO" new --quiet --vcs none --edition 2021 --lib --name brisk_ext "$WORK/ext"
cd "$WORK/ext"
cat >>Cargo.toml <<TOML
brisk = { path = "$RUST_DIR/brisk", features = ["dynamic-tls"] }

[lib]
crate-type = ["cdylib"]
TOML
cat >src/lib.rs <<'RUST'
use std::alloc::{GlobalAlloc, Layout};

#[global_allocator]
static GLOBAL: brisk::Brisk = brisk::Brisk;

/// Builds and drops collections through brisk; returns a checksum, or 0
/// when anything was wrong (a panic would abort Python).
#[no_mangle]
pub extern "C" fn churn(seed: u64) -> u64 {
    let words: Vec<String> = (0..20_000).map(|i| format!("{}-{}", seed, i)).collect();
    if !brisk::owns(words.as_ptr() as *const u8) || !brisk::owns(words[7].as_ptr()) {
        return 0;
    }
    let mut numbers = Vec::new();
    for i in 0..100_000u64 {
        numbers.push(i ^ seed); // grown by realloc
    }
    // An over-aligned block, zeroed and grown through the aligned calls.
    let small = Layout::from_size_align(1000, 4096).unwrap();
    let big = Layout::from_size_align(100_000, 4096).unwrap();
    // SAFETY: valid layouts; the block is read within its sizes and freed
    // once with its last layout.
    let aligned_ok = unsafe {
        let p = brisk::Brisk.alloc_zeroed(small);
        let zero = !p.is_null() && *p.add(999) == 0;
        let q = brisk::Brisk.realloc(p, small, big.size());
        let ok = zero && !q.is_null() && q as usize % 4096 == 0;
        brisk::Brisk.dealloc(q, big);
        ok
    };
    if !aligned_ok {
        return 0;
    }
    words.iter().map(|w| w.len() as u64).sum::<u64>() + numbers.iter().sum::<u64>()
}

/// The TLS model of the C core, NUL-terminated.
#[no_mangle]
pub extern "C" fn tls_model() -> *const u8 {
    if brisk::sys::TLS_MODEL == "global-dynamic" {
        b"global-dynamic\0".as_ptr()
    } else {
        b"initial-exec\0".as_ptr()
    }
}
RUST
"$CARGO" build --quiet --release
LIB=$WORK/ext/target/release/libbrisk_ext.so
if readelf -dW "$LIB" | grep -q STATIC_TLS; then
  echo "cdylib dlopen: FAIL: $LIB asks for static TLS (initial-exec TLS in it)"
  exit 1
fi
python3 - "$LIB" <<'PYTHON'
import ctypes, sys, threading

lib = ctypes.CDLL(sys.argv[1])  # loaded late, as an extension module is
lib.churn.argtypes = [ctypes.c_uint64]
lib.churn.restype = ctypes.c_uint64
lib.tls_model.restype = ctypes.c_char_p
model = lib.tls_model().decode()
assert model == "global-dynamic", model
results = {}

def run(t):
    results[t] = [lib.churn(t) for _ in range(3)]

threads = [threading.Thread(target=run, args=(t,)) for t in range(1, 5)]
for t in threads:
    t.start()
for t in threads:
    t.join()
assert len(results) == 4 and all(r[0] != 0 and r[0] == r[1] == r[2] for r in results.values()), results
print("cdylib dlopen: ok, python3 loaded a cdylib using brisk (TLS model %s, no static TLS); 4 threads allocated" % model)
PYTHON
