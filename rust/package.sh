#!/usr/bin/env bash
# Makes the crates ready to publish, and publishes nothing: copies brisk's C
# sources (CMakeLists.txt, cmake/brisk_version.h.in, include/, src/,
# LICENSE) into rust/brisk-sys/csrc/, since a crate on crates.io cannot
# reach ../../src, then runs `cargo package --workspace`: each crate is
# packed into rust/target/package/ and built from what it packed. csrc/ is
# removed again at the end (inside the repository the crates build from
# ../../src).
#
#   rust/package.sh              package and verify both crates
#   rust/package.sh --list       only list the files each would hold
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")"
CSRC=brisk-sys/csrc
trap 'rm -rf "$CSRC"' EXIT
rm -rf "$CSRC"
mkdir -p "$CSRC/cmake"
cp ../CMakeLists.txt ../LICENSE "$CSRC/"
cp ../cmake/brisk_version.h.in "$CSRC/cmake/"
cp -r ../include ../src "$CSRC/"
cargo package --workspace --allow-dirty "$@"
