#!/usr/bin/env bash
# redis-server under brisk (it links jemalloc; brisk's preloaded malloc wins):
# 20000 strings, a list, a hash and a set written through redis-cli, values
# read back and counted, keys deleted and rewritten with bigger values, then
# a clean shutdown. A Unix socket in $TMP: no port, no persistence.
source "$(dirname "$0")/common.sh"
need redis-server
need redis-cli

SOCK="$TMP/redis.sock"
cli() { redis-cli -s "$SOCK" "$@"; }

pre_traced rd redis-server --port 0 --unixsocket "$SOCK" --save '' --appendonly no \
  --dir "$TMP" --logfile "$TMP/redis.log" --daemonize no &
SERVER=$!
stop() { kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true; }
trap 'stop; rm -rf "$TMP"' EXIT
for _ in $(seq 100); do
  [ "$(cli PING 2>/dev/null)" = PONG ] && break
  kill -0 "$SERVER" 2>/dev/null || { cat "$TMP/redis.log" >&2; fail "redis-server exited at start"; }
  sleep 0.1
done
[ "$(cli PING)" = PONG ] || fail "redis-server does not answer"

# Strings of 1 .. 2000 bytes, a list, a hash and a set, in one pipe.
awk 'BEGIN {
  for (i = 0; i < 20000; i++) {
    v = sprintf("%0" (1 + (i * 37) % 2000) "d", i)
    printf "SET key:%d %s\r\n", i, v
    if (i % 4 == 0) printf "RPUSH list %d\r\n", i
    if (i % 3 == 0) printf "HSET hash f%d %d\r\n", i, i * 2
    if (i % 5 == 0) printf "SADD set m%d\r\n", i % 1000
  }
}' | cli --pipe > "$TMP/pipe.out" || fail "redis-cli --pipe failed"
grep -q "errors: 0, replies: " "$TMP/pipe.out" || { cat "$TMP/pipe.out" >&2; fail "pipe had errors"; }

[ "$(cli DBSIZE)" = 20003 ] || fail "expected 20003 keys, got $(cli DBSIZE)"
[ "$(cli LLEN list)" = 5000 ] || fail "list length $(cli LLEN list)"
[ "$(cli HLEN hash)" = 6667 ] || fail "hash length $(cli HLEN hash)"
[ "$(cli SCARD set)" = 200 ] || fail "set size $(cli SCARD set)"
[ "$(cli HGET hash f2997)" = 5994 ] || fail "HGET gave $(cli HGET hash f2997)"
v=$(cli GET key:12345)
[ "${#v}" = $((1 + (12345 * 37) % 2000)) ] && [ "$((10#$v))" = 12345 ] || fail "GET key:12345 gave a wrong value"
[ "$(cli STRLEN key:19999)" = $((1 + (19999 * 37) % 2000)) ] || fail "STRLEN key:19999"

# Free half the strings, grow the rest (realloc through APPEND), check again.
awk 'BEGIN { for (i = 0; i < 20000; i += 2) printf "DEL key:%d\r\n", i
             for (i = 1; i < 20000; i += 2) printf "APPEND key:%d %05000d\r\n", i, 7 }' |
  cli --pipe > "$TMP/pipe2.out" || fail "second pipe failed"
grep -q "errors: 0, replies: " "$TMP/pipe2.out" || { cat "$TMP/pipe2.out" >&2; fail "second pipe had errors"; }
[ "$(cli DBSIZE)" = 10003 ] || fail "expected 10003 keys after DEL, got $(cli DBSIZE)"
[ "$(cli STRLEN key:12345)" = $((1 + (12345 * 37) % 2000 + 5000)) ] || fail "APPEND lost bytes"
[ "$(cli EXISTS key:12344)" = 0 ] || fail "a deleted key is still there"
cli FLUSHALL > /dev/null
[ "$(cli DBSIZE)" = 0 ] || fail "FLUSHALL left keys"

cli SHUTDOWN NOSAVE > /dev/null 2>&1 || true
wait "$SERVER" || fail "redis-server exited with $? (log: $(tail -3 "$TMP/redis.log"))"
trap 'rm -rf "$TMP"' EXIT
served_by_brisk rd "redis-server"
echo "redis-server: ok"
