#!/usr/bin/env bash
# sqlite3 under brisk: a table of 60000 rows, an index, aggregate and join
# queries; known counts and the same output as without brisk.
source "$(dirname "$0")/common.sh"
need sqlite3

SQL=$(cat <<'SQL'
CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, grp INTEGER, v REAL, blob BLOB);
WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 60000)
INSERT INTO t(id, name, grp, v, blob)
  SELECT i, printf('name-%d-%s', i, substr('abcdefghijklmnopqrstuvwxyz', 1 + i % 26)),
         i % 97, (i * 7919 % 10007) / 7.0, zeroblob(i % 700) FROM c;
CREATE INDEX t_grp ON t(grp, v);
CREATE TABLE g AS SELECT grp, count(*) AS n, sum(v) AS s FROM t GROUP BY grp;
SELECT count(*) FROM t;
SELECT count(*), sum(n) FROM g;
SELECT grp, n, printf('%.3f', s) FROM g ORDER BY s DESC LIMIT 5;
SELECT t.grp, count(*) FROM t JOIN g ON g.grp = t.grp WHERE t.v > g.s / g.n GROUP BY t.grp ORDER BY t.grp LIMIT 5;
SELECT name FROM t WHERE grp = 13 ORDER BY v DESC, id LIMIT 3;
UPDATE t SET name = name || '-updated' WHERE id % 3 = 0;
DELETE FROM t WHERE id % 5 = 0;
SELECT count(*), sum(length(name)), sum(length(blob)) FROM t;
VACUUM;
PRAGMA integrity_check;
SQL
)

expected=$(sqlite3 "$TMP/plain.db" <<<"$SQL") || fail "sqlite3 failed without brisk"
got=$(pre sqlite3 "$TMP/brisk.db" <<<"$SQL") || fail "sqlite3 failed under brisk"
if [ "$got" != "$expected" ]; then
  diff <(echo "$expected") <(echo "$got") >&2 || true
  fail "sqlite3 output differs under brisk"
fi
[ "$(echo "$got" | head -1)" = 60000 ] || fail "expected 60000 rows, got '$(echo "$got" | head -1)'"
[ "$(echo "$got" | tail -1)" = ok ] || fail "integrity_check failed"
pre_traced sq sqlite3 "$TMP/brisk.db" 'SELECT count(*) FROM t;' > /dev/null || fail "traced sqlite3 failed"
served_by_brisk sq "sqlite3"
echo "sqlite3: ok"
