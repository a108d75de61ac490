#!/usr/bin/env bash
# The main job on a throwaway PostgreSQL: builds the project, starts a
# local cluster, runs the scenario programs, then runs compactiond against
# a demo topic that a writer keeps busy, and prints the metrics URL.
#
#   deploy/local/run.sh [--seconds N]    (default: until Ctrl-C)
#
# Everything (cluster, writer, daemon) stops on exit.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD_DIR:-$root/build}
seconds=0
[[ ${1:-} == --seconds ]] && seconds=${2:?--seconds needs a number}

"$root/deploy/local/install-deps.sh"
cmake -S "$root" -B "$build" >/dev/null
cmake --build "$build" -j"$(nproc)" >/dev/null

pgdir=$(mktemp -d /tmp/cpg.XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  bash "$root/deploy/local/pg.sh" stop "$pgdir"
}
trap cleanup EXIT
bash "$root/deploy/local/pg.sh" start "$pgdir"
# shellcheck disable=SC1091
. "$pgdir/env"

echo "== scenarios =="
for s in "$build"/test/scenarios/scenario_*; do "$s"; done

daemon="$build/daemon/compactiond"
if [[ ! -x "$daemon" ]]; then
  echo "compactiond is not built; scenarios done."
  exit 0
fi

echo "== compactiond on a demo topic =="
schema=demo
listen=127.0.0.1:${COMPACTIOND_PORT_OVERRIDE:-9473}
"$daemon" schema install --schema "$schema"
"$daemon" topic register demo.visits --headless-ttl 10s --schema "$schema"
"$build/test/scenarios/demo_writer" "$schema" demo.visits &
pids+=($!)
"$daemon" run --schema "$schema" --listen "$listen" &
pids+=($!)
echo "metrics:  http://$listen/metrics   (also /healthz, /readyz)"
echo "stats:    $daemon stats --schema $schema   (PGHOST=$PGHOST PGPORT=$PGPORT)"
if [[ $seconds -gt 0 ]]; then
  sleep "$seconds"
  curl -fsS "http://$listen/metrics" | grep -E '^compaction_(up|headless_rows|janitor_deleted_rows_total)' || true
else
  echo "Ctrl-C stops the daemon, the writer and the cluster."
  wait "${pids[-1]}"
fi
