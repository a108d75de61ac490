#!/usr/bin/env bash
# The consumer benchmarks of issue 25 (test/bench/RESULTS.md, "Consumers"),
# side by side in one run:
#
#   test/bench/consume_bench.sh [consume_bench options...]   e.g. --rounds 3
#
# Needs the Debian packages postgresql-15-pgq3 (the pgq extension; pgqd is
# not needed: the bench ticks with pgq.ticker()). Builds consume_bench
# (Release, in $BENCH_BUILD_DIR or /tmp/compaction-bench-build), starts its
# own throwaway PostgreSQL with deploy/local/pg.sh, writes the report to
# $BENCH_OUT (test/bench/results/consume) and always stops the cluster. The
# 10,000,000-message load of section "poll" takes minutes and about 2 GB.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${BENCH_BUILD_DIR:-/tmp/compaction-bench-build}
out=${BENCH_OUT:-$here/results/consume}

if [ ! -f /usr/share/postgresql/15/extension/pgq.control ]; then
  echo "the pgq extension is missing: apt-get install postgresql-15-pgq3" >&2
  exit 1
fi
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DCOMPACTION_BUILD_DAEMON=OFF >/dev/null
cmake --build "$build" -j2 --target consume_bench >/dev/null

pgdir=$(mktemp -d /tmp/cpg.XXXXXX)
trap 'bash "$root/deploy/local/pg.sh" stop "$pgdir"' EXIT
bash "$root/deploy/local/pg.sh" start "$pgdir"
# shellcheck disable=SC1091
. "$pgdir/env"

mkdir -p "$out"
{
  echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "command: test/bench/consume_bench.sh $*"
  echo "nproc: $(nproc)"
  echo "loadavg at start: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "git: $(git -C "$root" rev-parse --short HEAD 2>/dev/null)"
} >"$out/machine.txt"
status=0
"$build/test/bench/consume_bench" "$@" | tee "$out/report.md" || status=$?
echo "loadavg at end: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/machine.txt"
exit $status
