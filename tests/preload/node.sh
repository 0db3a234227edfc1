#!/usr/bin/env bash
# Node.js running a self-checking workload under brisk: 4 worker threads
# (most frees cross threads: V8's background threads free the workers'
# buffers), zlib, crypto, JSON. Same output as without brisk, and node
# bound malloc and free to brisk.
source "$(dirname "$0")/common.sh"
NODE=$(command -v node || command -v nodejs || true)
[ -n "$NODE" ] || skip "node is not installed"
SCRIPT="$HERE/workload.js"

expect_same_output workload.js "$NODE" "$SCRIPT"

pre_traced node "$NODE" -e 'console.log(JSON.stringify(Array.from({length: 20000}, (_, i) => [i, "v" + i])).length)' \
  >/dev/null || fail "traced node run failed"
served_by_brisk node "node"
echo "node: $expected"
