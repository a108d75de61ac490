#!/usr/bin/env bash
# What the privilege enforcement of issue 23 costs on the hot path, old and
# new SQL side by side in one run (test/bench/RESULTS.md, "Privilege"):
#
#   test/bench/privilege_ab.sh [ROUNDS] [SECONDS] [CLIENTS...]   e.g. 5 10 1 4
#
# Two topics of one schema, installed by this build's compactiond: "old"
# gets the pre-issue-23 statements (the produce's INSERT ... ON CONFLICT
# with CTEs, the headless insert naming its times) on tables without the
# updated_at trigger; "new" gets the library's current statements (one call
# of produce_<id>; the trigger in place). pgbench alternates old and new in
# every round; ratios are new/old of one round, the median over rounds is
# what RESULTS.md quotes. Workloads: produce (compacted, autocommit, 10,000
# keys) and inc (lock + read + produce + commit, 10,000 keys).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
rounds=${1:-5}
seconds=${2:-10}
shift 2 || true
clients=("${@:-1 4}")
# shellcheck disable=SC2206
clients=(${clients[*]})
build=${BUILD_DIR:-$root/build}
PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
daemon=$build/daemon/compactiond

pgdir=$(mktemp -d /tmp/cpg.XXXXXX)
work=$(mktemp -d /tmp/privab.XXXXXX)
trap 'bash "$root/deploy/local/pg.sh" stop "$pgdir" >/dev/null; rm -rf "$work"' EXIT
bash "$root/deploy/local/pg.sh" start "$pgdir" >/dev/null
# shellcheck disable=SC1091
. "$pgdir/env"
psql() { "$PG_BIN/psql" -qXAt -v ON_ERROR_STOP=1 "$@"; }

"$daemon" schema install --schema ab --db '' >/dev/null
# Topic ids start at the install's clock; this script names them 1 and 2.
psql -c "ALTER TABLE ab.topic ALTER COLUMN id RESTART WITH 1"
"$daemon" topic register old new --schema ab --db '' >/dev/null
psql -c "DROP TRIGGER updated_at_server_time ON ab.compaction_head_1"

old_produce="WITH xid_first AS MATERIALIZED (SELECT pg_catalog.pg_current_xact_id()), m AS (INSERT INTO ab.message_1 (message_key, schema_version, compaction_rank, payload) SELECT :k::text, 1::integer, :rank::bigint, '{\"value\": 1}'::jsonb FROM xid_first RETURNING id, created_at), h AS (INSERT INTO ab.compaction_head_1 AS h (message_key, head_id, schema_version, compaction_rank, created_at, updated_at, idle_since) SELECT :k, m.id, 1, :rank, pg_catalog.statement_timestamp(), pg_catalog.statement_timestamp(), NULL FROM m ON CONFLICT ON CONSTRAINT compaction_head_1_pkey DO UPDATE SET head_id = excluded.head_id, schema_version = excluded.schema_version, compaction_rank = excluded.compaction_rank, updated_at = excluded.updated_at, idle_since = NULL WHERE h.head_id IS NULL OR (excluded.schema_version, excluded.compaction_rank, excluded.head_id) > (h.schema_version, h.compaction_rank, h.head_id) RETURNING h.head_id) SELECT m.id, (extract(epoch FROM m.created_at) * 1000000)::bigint, EXISTS (SELECT 1 FROM h) FROM m;"
new_produce="SELECT p.message_id, (extract(epoch FROM p.message_created_at) * 1000000)::bigint, p.advanced FROM ab.produce_2(:k::text, 1::integer, :rank::bigint, '{\"value\": 1}'::jsonb) p;"

for v in old new; do
  id=$([ $v = old ] && echo 1 || echo 2)
  produce=$([ $v = old ] && echo "$old_produce" || echo "$new_produce")
  printf '%s\n' '\set k random(1, 10000)' '\set rank random(1, 1000000000)' \
    "$produce" >"$work/produce_$v.sql"
  printf '%s\n' '\set k random(1, 10000)' '\set rank random(1, 1000000000)' \
    'BEGIN;' \
    "SELECT h.head_id FROM ab.compaction_head_$id h WHERE h.message_key = :k::text FOR UPDATE OF h;" \
    "SELECT m.id, m.payload::text FROM ab.compaction_head_$id h JOIN ab.message_$id m ON m.id = h.head_id WHERE h.message_key = :k::text;" \
    "$produce" 'END;' >"$work/inc_$v.sql"
done
# Every key has its head row first (an increment of a new key inserts a
# headless row; the steady state is head advances).
for v in old new; do
  "$PG_BIN/pgbench" -n -M prepared -t 20000 -f "$work/produce_$v.sql" >/dev/null
done
psql -c "VACUUM ANALYZE"

printf 'workload clients round old_tps new_tps new/old\n'
for w in produce inc; do
  for c in "${clients[@]}"; do
    for r in $(seq 1 "$rounds"); do
      declare -A tps=()
      for v in old new; do
        tps[$v]=$("$PG_BIN/pgbench" -n -M prepared -c "$c" -j "$c" -T "$seconds" \
          -f "$work/${w}_$v.sql" 2>/dev/null |
          sed -n 's/^tps = \([0-9.]*\).*/\1/p')
      done
      awk -v w="$w" -v c="$c" -v r="$r" -v o="${tps[old]}" -v n="${tps[new]}" \
        'BEGIN { printf "%s %s %s %.0f %.0f %.3f\n", w, c, r, o, n, n / o }'
    done
  done
done
# Server-side cost per produce, without client or scheduling round trips:
# one backend runs blocks of 2,000 produces, old statement and new call
# alternated, 10 blocks each; the minimum per block is the least disturbed
# by the other processes on the machine.
old_stmt=${old_produce//:k/(1 + (i % 10000))::text}
old_stmt=${old_stmt//:rank/(i + 1000000000)::bigint}
new_stmt=${new_produce//:k/(1 + (i % 10000))::text}
new_stmt=${new_stmt//:rank/(i + 1000000000)::bigint}
psql -c "CREATE TABLE ab_cost (variant text, us_per_produce float8)"
for b in $(seq 1 10); do
  for v in old new; do
    stmt=$([ $v = old ] && echo "$old_stmt" || echo "$new_stmt")
    stmt=${stmt%;}
    psql -c "DO \$\$ DECLARE t0 timestamptz := clock_timestamp();
      v1 bigint; v2 bigint; v3 boolean; BEGIN
      FOR i IN $((b * 2000))..$((b * 2000 + 1999)) LOOP
        $stmt INTO v1, v2, v3;
      END LOOP;
      INSERT INTO ab_cost VALUES ('$v', extract(epoch FROM clock_timestamp() - t0) * 1e6 / 2000);
    END \$\$"
  done
done
psql -c "SELECT variant || ' min_us=' || round(min(us_per_produce)::numeric, 1) || ' median_us=' || round((percentile_cont(0.5) WITHIN GROUP (ORDER BY us_per_produce))::numeric, 1) FROM ab_cost GROUP BY variant ORDER BY variant"
# The same blocks measured in CPU time of the backend (utime + stime from
# /proc, in clock ticks), which other processes' load does not inflate:
# 5 blocks of 10,000 produces per variant, alternated.
tick=$(getconf CLK_TCK)
for b in $(seq 1 5); do
  for v in old new; do
    stmt=$([ $v = old ] && echo "$old_stmt" || echo "$new_stmt")
    stmt=${stmt%;}
    lo=$((100000 + b * 10000))
    cpu=$(psql <<SQL
SELECT pg_backend_pid() \g $work/pid
\! awk '{print \$14 + \$15}' /proc/\$(cat $work/pid)/stat > $work/cpu0
DO \$\$ DECLARE v1 bigint; v2 bigint; v3 boolean; BEGIN
  FOR i IN $lo..$((lo + 9999)) LOOP $stmt INTO v1, v2, v3; END LOOP; END \$\$;
\! awk '{print \$14 + \$15}' /proc/\$(cat $work/pid)/stat > $work/cpu1
SQL
    echo $(( $(cat "$work/cpu1") - $(cat "$work/cpu0") )))
    awk -v v="$v" -v t="$cpu" -v hz="$tick" \
      'BEGIN { printf "cpu %s %.1f us/produce\n", v, t * 1e6 / hz / 10000 }'
  done
done
# HOT: head advances on materialized rows stay heap-only on both tables.
psql -c "SELECT relname || ' n_tup_upd=' || n_tup_upd || ' n_tup_hot_upd=' || n_tup_hot_upd FROM pg_stat_user_tables WHERE schemaname = 'ab' AND relname LIKE 'compaction_head_%' ORDER BY relname"
