#!/usr/bin/env bash
# Increment and produce through a Citus coordinator (deploy/citus/cluster.sh:
# a coordinator and two workers) against the same workload on one
# PostgreSQL (deploy/local/pg.sh), in one run: pgbench -M prepared with the
# library's own SQL (test/bench/pgbench/{inc,produce}.sql), 1 client, the
# cells alternating per round so machine load hits both alike. Besides
# pgbench's tps it samples each server's CPU (utime+stime of the
# postmaster's children from /proc) around every cell: CPU per transaction
# per node, the input of the scale-out plan in doc/citus.md.
#
#   COMPACTIOND=/path/to/compactiond test/bench/citus_compare.sh [ROUNDS] [SECONDS]
#
# WORKLOADS (default "inc produce") may add "batch": produce_batch_<id> of
# 100 compacted messages over consecutive keys (on Citus: both workers, a
# two-phase commit), the function ProduceBatch calls; and "consume":
# CONSUME_MESSAGES (default 10000) messages produced (not measured), then
# consumed by test/bench/consume_once (Consumer::Poll, batch 500, one
# consumer over the 4 partitions); its figures are per message.
#
# Needs citus.so (exit 77 without it, like the `citus` tests) and a built
# compactiond (for `schema install` and `topic register`).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
rounds=${1:-3}
secs=${2:-15}
PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
daemon=${COMPACTIOND:-$root/build/daemon/compactiond}
consume_once=${CONSUME_ONCE:-$root/build/test/bench/consume_once}
consume_messages=${CONSUME_MESSAGES:-10000}
nkeys=10000
work=$(mktemp -d /tmp/ccmp.XXXXXX)
single=$(mktemp -d /tmp/cpg.XXXXXX)
cluster=$(mktemp -d /tmp/ccit.XXXXXX)
cleanup() {
  bash "$root/deploy/local/pg.sh" stop "$single" >/dev/null 2>&1 || true
  bash "$root/deploy/citus/cluster.sh" stop "$cluster" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
bash "$root/deploy/citus/cluster.sh" start "$cluster"
bash "$root/deploy/local/pg.sh" start "$single" >/dev/null

# Sets up schema and topic on the server of env file $1; writes the
# substituted scripts to $work/$2_{inc,produce}.sql.
prepare() {
  local envfile=$1 name=$2
  (
    # shellcheck disable=SC1090
    . "$envfile"
    "$daemon" schema install >/dev/null
    "$daemon" topic register bench --partitions 4 >/dev/null
    id=$("$PG_BIN/psql" -qAtX -c "SELECT id FROM compaction.topic WHERE name = 'bench'")
    cat >"$work/${name}_fill.sql" <<SQL
SELECT count(*) FROM compaction.produce_batch_$id(ARRAY(SELECT pg_catalog.gen_random_uuid()::text FROM pg_catalog.generate_series(1, $consume_messages) i), pg_catalog.array_fill(1, ARRAY[$consume_messages]), pg_catalog.array_fill(0::bigint, ARRAY[$consume_messages]), pg_catalog.array_fill('{"value": 1}'::jsonb, ARRAY[$consume_messages]), '{}'::text[]);
SQL
    cat >"$work/${name}_batch.sql" <<SQL
\\set k random(1, :nkeys)
SELECT count(*) FROM compaction.produce_batch_$id(ARRAY(SELECT (:k + i)::text FROM pg_catalog.generate_series(0, 99) i), pg_catalog.array_fill(1, ARRAY[100]), pg_catalog.array_fill(0::bigint, ARRAY[100]), pg_catalog.array_fill('{"value": 1}'::jsonb, ARRAY[100]), '{}'::text[]);
SQL
    for w in inc produce; do
      sed -e "s/{schema}/compaction/g" -e "s/{lock}/compaction.lock_$id/g" \
        -e "s/{produce}/compaction.produce_$id/g" \
        "$here/pgbench/$w.sql" >"$work/${name}_$w.sql"
    done
  )
}
prepare "$single/env" single
prepare "$cluster/env" citus

# CPU ticks of the server of data directory $1: the postmaster's own and
# its reaped children's (cutime, cstime: the backends that exited, such as
# pgbench's when it disconnects) plus every live child's.
ticks() {
  local pm
  pm=$(head -1 "$1/postmaster.pid")
  { cat /proc/[0-9]*/stat 2>/dev/null || true; } | awk -v pm="$pm" '
    $1 == pm { s += $14 + $15 + $16 + $17 }
    $4 == pm { s += $14 + $15 }
    END { print s + 0 }'
}
declare -A dirs=([single]="$single/data"
                 [coordinator]="$cluster/coordinator"
                 [worker1]="$cluster/worker1" [worker2]="$cluster/worker2")
hz=$(getconf CLK_TCK)

# The consume cell of target $1 (nodes $2...): fills, then consumes and
# measures; CPU per message.
consume_cell() {
  local target=$1 before=() after=() n out msgs start end
  shift
  local envfile
  envfile=$([[ $target == single ]] && echo "$single/env" || echo "$cluster/env")
  (
    # shellcheck disable=SC1090
    . "$envfile"
    "$PG_BIN/psql" -qAtX -f "$work/${target}_fill.sql" >/dev/null
  )
  for n in "$@"; do before+=("$(ticks "${dirs[$n]}")"); done
  start=$(date +%s.%N)
  out=$(
    # shellcheck disable=SC1090
    . "$envfile"
    "$consume_once" bench bench 4
  )
  end=$(date +%s.%N)
  for n in "$@"; do after+=("$(ticks "${dirs[$n]}")"); done
  msgs=$(sed -n 's/^messages=\([0-9]*\).*/\1/p' <<<"$out")
  [[ -n "$msgs" && "$msgs" -gt 0 ]] || { echo "consume failed: $out" >&2; exit 1; }
  local rate line
  rate=$(awk -v m="$msgs" -v a="$start" -v b="$end" 'BEGIN { printf "%.0f", m / (b - a) }')
  line="consume $target msgs_per_s=$rate msgs=$msgs ${out#messages=* }"
  local i=0
  for n in "$@"; do
    line+=" ${n}_us_per_msg=$(( (after[i] - before[i]) * 1000000 / hz / msgs ))"
    i=$((i + 1))
  done
  echo "$line"
}

# One cell: workload $1 on target $2 (single|citus); prints a result line.
cell() {
  local w=$1 target=$2 before=() after=() nodes n out tx tps
  if [[ $target == single ]]; then nodes=(single); else
    nodes=(coordinator worker1 worker2); fi
  if [[ $w == consume ]]; then
    consume_cell "$target" "${nodes[@]}"
    return
  fi
  for n in "${nodes[@]}"; do before+=("$(ticks "${dirs[$n]}")"); done
  out=$(
    # shellcheck disable=SC1090
    . "$([[ $target == single ]] && echo "$single/env" || echo "$cluster/env")"
    "$PG_BIN/pgbench" -n -M prepared -c 1 -j 1 -T "$secs" -f "$work/${target}_$w.sql" \
      -D topic=bench -D sv=1 -D rank=0 -D 'payload={"value": 1}' -D nkeys=$nkeys 2>&1
  )
  for n in "${nodes[@]}"; do after+=("$(ticks "${dirs[$n]}")"); done
  tx=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' <<<"$out")
  tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' <<<"$out")
  [[ -n "$tx" && "$tx" -gt 0 ]] || { echo "pgbench failed: $out" >&2; exit 1; }
  local line="$w $target tps=$tps tx=$tx"
  local i=0
  for n in "${nodes[@]}"; do
    line+=" ${n}_us_per_tx=$(( (after[i] - before[i]) * 1000000 / hz / tx ))"
    i=$((i + 1))
  done
  echo "$line"
}

echo "date: $(date -u +%Y-%m-%dT%H:%MZ) nproc: $(nproc) loadavg at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "rounds: $rounds, $secs s per cell, 1 client, -M prepared, $nkeys keys"
# A short warm-up of each cell (first heads, plan caches, Citus connections).
secs_saved=$secs
secs=3
workloads=${WORKLOADS:-inc produce}
for w in $workloads; do cell "$w" single >/dev/null; cell "$w" citus >/dev/null; done
secs=$secs_saved
for r in $(seq 1 "$rounds"); do
  for w in $workloads; do
    if (( r % 2 )); then order=(single citus); else order=(citus single); fi
    for t in "${order[@]}"; do echo "round $r: $(cell "$w" "$t")"; done
  done
done
echo "loadavg at end: $(cut -d' ' -f1-3 /proc/loadavg)"
