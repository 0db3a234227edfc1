#!/usr/bin/env bash
# A fresh Cargo project outside the tree (under /tmp) that depends on
# rust/brisk by path and sets brisk as its global allocator, as a user's
# would: it builds Vecs, Strings, HashMaps and BTreeMaps on 4 threads,
# checks them, and checks that brisk::stats() counts the bytes it
# allocated. Prints "outside project: ok ..." and exits 0 when all holds.
#
#   rust/outside-project.sh            cargo run of the new project (debug)
#   CARGO=/path/to/cargo rust/outside-project.sh
set -euo pipefail

RUST_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CARGO=${CARGO:-cargo}
WORK=$(mktemp -d /tmp/brisk-outside.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

"$CARGO" new --quiet --vcs none --bin --name brisk-user "$WORK/app"
cd "$WORK/app"
cat >>Cargo.toml <<EOF
brisk = { path = "$RUST_DIR/brisk" }
EOF
cat >src/main.rs <<'EOF'
use std::collections::{BTreeMap, HashMap};
use std::thread;

#[global_allocator]
static GLOBAL: brisk::Brisk = brisk::Brisk;

/// What one thread builds, and the bytes of it that are on the heap.
struct Built {
    numbers: Vec<u64>,
    text: String,
    index: HashMap<u64, String>,
    tree: BTreeMap<u64, Vec<u8>>,
}

impl Built {
    fn heap_bytes(&self) -> usize {
        self.numbers.capacity() * 8
            + self.text.capacity()
            + self.index.values().map(String::capacity).sum::<usize>()
            + self.tree.values().map(Vec::capacity).sum::<usize>()
    }
}

fn build(t: u64) -> Built {
    let numbers: Vec<u64> = (0..200_000).map(|i| i * t).collect();
    let mut text = String::new();
    for i in 0..20_000 {
        text.push_str(&format!("{}-{} ", t, i));
    }
    let index: HashMap<u64, String> = (0..20_000).map(|i| (i, format!("value {} of thread {}", i, t))).collect();
    let tree: BTreeMap<u64, Vec<u8>> = (0..5_000).map(|i| (i, vec![t as u8; 100 + (i % 50) as usize])).collect();
    Built { numbers, text, index, tree }
}

fn main() {
    let before = brisk::stats();
    let handles: Vec<_> = (1..=4u64).map(|t| thread::spawn(move || build(t))).collect();
    let built: Vec<Built> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    for (t, b) in (1..=4u64).zip(&built) {
        assert!(b.numbers.iter().enumerate().all(|(i, &x)| x == i as u64 * t));
        assert!(b.text.starts_with(&format!("{}-0 ", t)) && b.text.ends_with(&format!("{}-19999 ", t)));
        assert_eq!(b.index[&7], format!("value 7 of thread {}", t));
        assert!(b.tree.values().all(|v| v.iter().all(|&x| x == t as u8)));
        assert!(brisk::owns(b.numbers.as_ptr() as *const u8), "a Vec not from brisk");
        assert!(brisk::owns(b.text.as_ptr()) && brisk::owns(b.index[&7].as_ptr()));
    }
    let live: usize = built.iter().map(Built::heap_bytes).sum();
    let after = brisk::stats();
    let requested = after.requested() - before.requested();
    assert!(requested >= live as u64, "brisk counted {} bytes asked, the threads hold {}", requested, live);
    assert!(after.in_use() >= live, "brisk has {} bytes in use, the threads hold {}", after.in_use(), live);
    println!(
        "outside project: ok, 4 threads hold {} bytes; brisk {} counted {} bytes requested, {} in use, {} mapped",
        live,
        brisk::version(),
        requested,
        after.in_use(),
        after.mapped()
    );
}
EOF
"$CARGO" run --quiet
