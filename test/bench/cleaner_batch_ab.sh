#!/usr/bin/env bash
# One batch of each log cleaner walk, the cleaner functions of an older
# commit and this build's side by side in one run (test/bench/RESULTS.md,
# "The tombstone walk takes the values it deleted"):
#
#   test/bench/cleaner_batch_ab.sh OLD_COMMIT [KEYS] [ROUNDS]   e.g. 033f2ab 20000 3
#
# Two schemas installed by this build's compactiond; in schema "old" the
# functions clean_tombstones and clean_messages are replaced by OLD_COMMIT's
# (sql/system_v1.sql). Each gets two topics with retention 0:
#   t: KEYS keys, a value each, walked by three cleaner passes while it is
#      the head, then a tombstone each (the tombstone walk's work);
#   m: KEYS messages on KEYS/2 keys, so half are superseded (the message
#      walk's work).
# Then, per batch size and round, old and new in turn: one call of each
# walk in a transaction that is rolled back, so every call sees the same
# rows. Prints the server's time per call (psql's \timing) and the rows the
# call deleted.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
old_commit=${1:?usage: cleaner_batch_ab.sh OLD_COMMIT [KEYS] [ROUNDS]}
keys=${2:-20000}
rounds=${3:-3}
build=${BUILD_DIR:-$root/build}
daemon=$build/daemon/compactiond

pgdir=$(mktemp -d /tmp/cpg.XXXXXX)
work=$(mktemp -d /tmp/cleanab.XXXXXX)
trap 'bash "$root/deploy/local/pg.sh" stop "$pgdir" >/dev/null; rm -rf "$work"' EXIT
bash "$root/deploy/local/pg.sh" start "$pgdir" >/dev/null
# shellcheck disable=SC1091
. "$pgdir/env"

# OLD_COMMIT's two functions, rendered for schema "old".
git -C "$root" show "$old_commit:sql/system_v1.sql" | python3 -c '
import sys
text = sys.stdin.read()
for name in ("clean_tombstones", "clean_messages"):
    start = text.index("CREATE OR REPLACE FUNCTION {schema}.%s(" % name)
    end = text.index("$%s$;" % name, start) + len("$%s$;" % name)
    body = text[start:end].replace("{schema_name}", "'"'old'"'")
    print(body.replace("{schema}", "old"))
' >"$work/old.sql"

q() { psql -XqAt -v ON_ERROR_STOP=1 "$@"; }
for s in new old; do
  "$daemon" schema install --schema "$s" >/dev/null
  # Topic ids start at the install's clock; this script names them 1 and 2.
  q -c "ALTER TABLE $s.topic ALTER COLUMN id RESTART WITH 1"
  "$daemon" topic register t m --schema "$s" --retention 0s \
    --tombstone-retention 0s >/dev/null
done
q -f "$work/old.sql"
for s in new old; do
  q -c "SELECT count($s.produce_1('k' || g, 1, 0, '{}'::jsonb))
        FROM generate_series(1, $keys) g" >/dev/null
  for _ in 1 2 3; do "$daemon" sweep --once --schema "$s" >/dev/null 2>&1; done
  q -c "SELECT count($s.produce_1('k' || g, 1, 0, NULL))
        FROM generate_series(1, $keys) g" >/dev/null
  q -c "SELECT count($s.produce_2('k' || (g % ($keys / 2)), 1, 0, '{}'::jsonb))
        FROM generate_series(1, $keys) g" >/dev/null
  for t in message_1 compaction_head_1 message_2 compaction_head_2; do
    q -c "VACUUM ANALYZE $s.$t"
  done
done

# One call in a rolled-back transaction: "<ms> <deleted>".
timed() {
  q -c "BEGIN" -c '\timing on' -c "$1" -c "ROLLBACK" |
    awk '/^Time:/ && !ms { ms = $2 } /^[0-9]+$/ { rows = $1 }
         END { print ms, rows }'
}

echo "| batch | round | walk | old ms | new ms | new / old | rows deleted old / new |"
echo "|---|---|---|---|---|---|---|"
for batch in 1000 10000; do
  for round in $(seq "$rounds"); do
    for walk in tombstones messages; do
      declare -A ms=() rows=()
      for s in old new; do
        if [[ $walk == tombstones ]]; then
          sql="SELECT deleted FROM $s.clean_tombstones(1, 0, $batch)"
        else
          sql="SELECT deleted FROM $s.clean_messages(2, 0, $batch)"
        fi
        read -r ms[$s] rows[$s] < <(timed "$sql")
      done
      ratio=$(python3 -c "print(f'{${ms[new]} / ${ms[old]}:.2f}')")
      echo "| $batch | $round | $walk | ${ms[old]} | ${ms[new]} | $ratio | ${rows[old]} / ${rows[new]} |"
    done
  done
done
