#!/usr/bin/env bash
# usage: run.sh CYCLES SECONDS CLIENTS script...
set -u
. $(cat /tmp/perf-pgdir)/env
PGB=/usr/lib/postgresql/15/bin/pgbench
pm=$(head -1 $COMPACTION_PG_DIR/data/postmaster.pid)
cyc=$1; sec=$2; cl=$3; shift 3
scripts=("$@")
srv() { awk '{print $16+$17}' /proc/$pm/stat; }
for ((c=0;c<cyc;c++)); do
  order=("${scripts[@]}")
  if ((c%2==1)); then order=($(printf '%s\n' "${scripts[@]}" | tac)); fi
  for s in "${order[@]}"; do
    psql -qX -c 'VACUUM "bench".compaction_head_2' >/dev/null
    s0=$(srv)
    out=$(PGAPPNAME=hot-$s $PGB -n -M prepared -c $cl -j $cl -T $sec -D topic=hot -D sv=1 -D rank=0 -D 'payload={"value": 1}' -D nkeys=1 -f /tmp/perf-hot/$s.sql 2>&1)
    sleep 0.3
    s1=$(srv)
    tps=$(echo "$out" | sed -n 's/.*tps = \([0-9.]*\) (without.*/\1/p')
    n=$(echo "$out" | sed -n 's/.*actually processed: \([0-9]*\).*/\1/p')
    lat=$(echo "$out" | sed -n 's/latency average = \([0-9.]*\).*/\1/p')
    echo "$c $s tps=$tps tx=$n srv_us_per_tx=$(echo "($s1-$s0)*10000/$n" | bc -l | cut -c1-6) lat_ms=$lat load=$(cut -d' ' -f1 /proc/loadavg)"
  done
done
