#!/usr/bin/env bash
# stat.sh SCRIPT CLIENTS: per committed tx: backend context switches, kill() calls (latch wakeups), CPU; over a 3 s window
. $(cat /tmp/perf-pgdir)/env
s=$1; cl=${2:-16}
psql -qX -c 'VACUUM "bench".compaction_head_2'
PGAPPNAME=hot-$s /usr/lib/postgresql/15/bin/pgbench -n -M prepared -c $cl -j $cl -T 6 -D topic=hot -D sv=1 -D rank=0 -D 'payload={"value": 1}' -D nkeys=1 -f /tmp/perf-hot/$s.sql > /tmp/perf-hot/$s.pgbench.txt 2>&1 &
sleep 1.5
pids=$(psql -qXAt -c "SELECT string_agg(pid::text, ',') FROM pg_stat_activity WHERE application_name = 'hot-$s'")
x0=$(psql -qXAt -c "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()")
perf stat -x, -e context-switches,task-clock,syscalls:sys_enter_kill,syscalls:sys_enter_epoll_wait -p $pids -- sleep 3 > /tmp/perf-hot/$s.stat.txt 2>&1
x1=$(psql -qXAt -c "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()")
wait
n=$((x1-x0-2))
awk -F, -v n=$n -v s=$s '/context-switches|task-clock|kill|epoll/ {printf "%s %s per tx: %.2f\n", s, $3, $1/n} END {print s, "tx in window:", n}' /tmp/perf-hot/$s.stat.txt
