#!/usr/bin/env bash
. $(cat /tmp/perf-pgdir)/env
s=$1
psql -qX -c 'VACUUM "bench".compaction_head_2'
PGAPPNAME=hot-$s /usr/lib/postgresql/15/bin/pgbench -n -M prepared -c 16 -j 16 -T 5 -D topic=hot -D sv=1 -D rank=0 -D 'payload={"value": 1}' -D nkeys=1 -f /tmp/perf-hot/$s.sql > /dev/null 2>&1 &
sleep 1.5
for i in $(seq 1 60); do
psql -qXAt -F' ' -c "SELECT l.locktype, l.granted, l.mode, count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid WHERE a.application_name = 'hot-$s' AND l.locktype IN ('tuple','transactionid','advisory') AND (NOT l.granted OR l.locktype <> 'transactionid' OR l.mode <> 'ExclusiveLock') GROUP BY 1,2,3"
done > /tmp/perf-hot/$s.locks.txt
wait
awk -v s=$s '{k=$1" granted="$2" "$3; c[k]+=$4} END {for (k in c) printf "%s %s avg per sample %.2f\n", s, k, c[k]/60}' /tmp/perf-hot/$s.locks.txt | sort
