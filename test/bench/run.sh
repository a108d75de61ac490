#!/usr/bin/env bash
# The benchmark of issue 5, end to end:
#
#   test/bench/run.sh [compaction_bench options...]     e.g. --duration 3 --rounds 2
#
# Builds compaction_bench (Release, in $BENCH_BUILD_DIR or
# /tmp/compaction-bench-build), starts its own throwaway PostgreSQL with
# deploy/local/pg.sh and pg_stat_statements preloaded (for the SQL identity
# check), runs every workload, writes test/bench/results/{report.md,
# throughput_*.dat,throughput.png} and always stops the cluster again.
# A full run takes about 10-15 minutes on 2 cores, plus the log-compaction
# section (issue 14) of about 17 minutes. Sections: --only with a list of
# inc,hot,new,read,produce,sqlcheck,batch,janitor,stats,log (log = log-storage,
# log-tput,log-delete,log-idle); --skip LIST leaves sections out. E.g. the
# run H-log of RESULTS.md:
#
#   BENCH_OUT=test/bench/results/log-H test/bench/run.sh --only log
#
# which also writes log_storage.dat and log_storage.svg (drawn by the driver,
# no gnuplot needed).
#
# The server runs with fsync, synchronous_commit and full_page_writes off,
# as the tests' does. For PostgreSQL's default durability, which every
# single-row commit pays for with a WAL flush (run B12 of RESULTS.md):
#
#   PG_SERVER_OPTS='-c fsync=on -c synchronous_commit=on -c full_page_writes=on' \
#     test/bench/run.sh --only batch
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${BENCH_BUILD_DIR:-/tmp/compaction-bench-build}
out=${BENCH_OUT:-$here/results}
PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}

cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DCOMPACTION_BUILD_DAEMON=OFF >/dev/null
cmake --build "$build" -j"$(nproc)" --target compaction_bench >/dev/null

pgdir=$(mktemp -d /tmp/cpg.XXXXXX)
trap 'bash "$root/deploy/local/pg.sh" stop "$pgdir"' EXIT
bash "$root/deploy/local/pg.sh" start "$pgdir"
# shellcheck disable=SC1091
. "$pgdir/env"
# shellcheck source=deploy/local/common.sh
. "$root/deploy/local/common.sh"
"$PG_BIN/psql" -qX -c "ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'"
as_owner "$PG_BIN/pg_ctl" -D "$pgdir/data" -l "$pgdir/server.log" -w restart >/dev/null

mkdir -p "$out"
{
  echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "command: test/bench/run.sh $*"
  echo "nproc: $(nproc)"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
  echo "memory: $(free -g | awk '/Mem:/ {print $2 " GiB"}')"
  echo "kernel: $(uname -r)"
  echo "loadavg at start: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "git: $(git -C "$root" rev-parse --short HEAD 2>/dev/null) $(git -C "$root" status --porcelain lib sql 2>/dev/null | wc -l) modified files under lib/ sql/"
} >"$out/machine.txt"
status=0
"$build/test/bench/compaction_bench" --out "$out" --pgbench "$PG_BIN/pgbench" \
  --scripts "$here/pgbench" "$@" || status=$?
echo "loadavg at end: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/machine.txt"
if ! ls "$out"/throughput_*.dat >/dev/null 2>&1; then
  :  # no throughput section ran (e.g. --only log): nothing for gnuplot
elif command -v gnuplot >/dev/null; then
  (cd "$out" && gnuplot plot.gp)
else
  echo "gnuplot not installed (apt-get install gnuplot-nox): $out/throughput.png not drawn" >&2
fi
echo "report: $out/report.md, plot: $out/throughput.png" >&2
exit $status
