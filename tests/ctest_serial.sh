#!/usr/bin/env bash
# The RSS tests measure the process's memory and must run alone: checks that
# CTest really has RUN_SERIAL on each of them (a label list once shifted the
# name/value pairs given to gtest_discover_tests and dropped it silently).
#   tests/ctest_serial.sh BUILD_DIR
set -euo pipefail
cd "$1"
ctest --show-only=json-v1 2>/dev/null | python3 -c '
import json, sys
tests = json.load(sys.stdin)["tests"]
rss = [t for t in tests if t["name"].startswith("Rss.")]
if not rss:
    sys.exit("no Rss.* test registered")
bad = [t["name"] for t in rss
       if not any(p["name"] == "RUN_SERIAL" and p["value"] for p in t.get("properties", []))]
if bad:
    sys.exit("not RUN_SERIAL: " + ", ".join(bad))
print(f"{len(rss)} Rss tests, all RUN_SERIAL")
'
