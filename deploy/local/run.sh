#!/usr/bin/env bash
# The demo: builds what it needs, starts a throwaway PostgreSQL, runs the
# scenario programs, then compactiond on a demo topic that a writer keeps
# busy. See usage() (deploy/local/run.sh --help).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)

usage() {
  cat <<'EOF'
Usage: deploy/local/run.sh [--seconds N] [--port N] [--help]

Builds libcompaction, compactiond and the scenario programs in build-local/
(its own directory, apart from the README's build/; the first build takes
about 3 minutes on 2 cores, later runs reuse it), starts a throwaway
PostgreSQL 15 cluster, runs the scenario programs (test/scenarios), then runs
compactiond on a demo topic, demo.visits, that a writer keeps busy. The topic
keeps superseded messages 10 s (--retention 10s), so within the first
minute compaction_cleaner_deleted_messages_total shows the log cleaner
deleting them, while compaction_janitor_deleted_rows_total shows the
headless rows (10 s TTL) being swept. The cluster, the writer and the daemon
stop on exit.

Options:
  --seconds N   run the demo N seconds, then print the main metrics and exit
                (default: until Ctrl-C)
  --port N      serve the daemon's /metrics, /healthz and /readyz on
                127.0.0.1:N (default 9473)
  -h, --help    print this help and exit

Environment: BUILD_DIR overrides the build directory (default build-local).

Exit status: 0 after the demo; 1 when the build, a scenario or compactiond
fails (compactiond's own error is printed, e.g. the port is taken); 2 for a
bad argument.
EOF
}

bad_usage() {
  echo "run.sh: $1" >&2
  echo "Usage: deploy/local/run.sh [--seconds N] [--port N] [--help]" >&2
  exit 2
}

seconds=0
port=9473
while [[ $# -gt 0 ]]; do
  case $1 in
    -h | --help) usage; exit 0 ;;
    --seconds | --port)
      [[ $# -ge 2 && $2 =~ ^[0-9]+$ ]] || bad_usage "$1 needs a number"
      if [[ $1 == --seconds ]]; then seconds=$2; else port=$2; fi
      shift 2 ;;
    *) bad_usage "unknown argument '$1'" ;;
  esac
done
[[ $port -ge 1 && $port -le 65535 ]] || bad_usage "--port must be 1..65535"
if [[ -n ${COMPACTIOND_PORT_OVERRIDE:-} ]]; then
  bad_usage "COMPACTIOND_PORT_OVERRIDE is no longer read: use --port N"
fi

build=${BUILD_DIR:-$root/build-local}
"$root/deploy/local/install-deps.sh"
targets=(compactiond demo_writer)
for s in "$root"/test/scenarios/0*.cpp; do
  targets+=("scenario_$(basename "$s" .cpp)")
done
if [[ ! -f $build/CMakeCache.txt ]]; then
  echo "== configuring $build (first run: the build takes about 3 minutes on 2 cores) =="
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo
fi
echo "== building ${targets[*]} in $build =="
cmake --build "$build" -j"$(nproc)" --target "${targets[@]}"

pgdir=$(mktemp -d /tmp/cpg.XXXXXX)
logdir=$(mktemp -d /tmp/compaction-demo.XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  bash "$root/deploy/local/pg.sh" stop "$pgdir"
  rm -rf "$logdir"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
echo "== starting a throwaway PostgreSQL in $pgdir =="
bash "$root/deploy/local/pg.sh" start "$pgdir"
# shellcheck disable=SC1091
. "$pgdir/env"
# Autovacuum's first ANALYZE of the demo tables would come after a minute;
# until then the planner's estimate behind compaction_log_messages is 0.
psql -qXc "ALTER SYSTEM SET autovacuum_naptime = '5s'" -c "SELECT pg_reload_conf()" >/dev/null

echo "== scenarios (test/scenarios) =="
for s in "$build"/test/scenarios/scenario_*; do "$s"; done

echo "== compactiond on the demo topic demo.visits =="
daemon="$build/daemon/compactiond"
schema=demo
listen=127.0.0.1:$port
"$daemon" schema install --schema "$schema"
"$daemon" topic register demo.visits --headless-ttl 10s --retention 10s \
  --tombstone-retention 10s --schema "$schema"
"$build/test/scenarios/demo_writer" "$schema" demo.visits &
pids+=($!)
log=$logdir/compactiond.log
"$daemon" run --schema "$schema" --listen "$listen" --stats-interval 5s >"$log" 2>&1 &
daemon_pid=$!
pids+=("$daemon_pid")

# Fails the demo with compactiond's own words when it is not running.
daemon_died() {
  local rc=${1:-}
  if [[ -z $rc ]]; then rc=0; wait "$daemon_pid" || rc=$?; fi
  echo "run.sh: compactiond exited with status $rc; its log:" >&2
  sed 's/^/  /' "$log" >&2
  exit 1
}
for _ in $(seq 150); do
  grep -q 'component=http msg=listening' "$log" && break
  kill -0 "$daemon_pid" 2>/dev/null || daemon_died
  sleep 0.1
done
grep -q 'component=http msg=listening' "$log" || daemon_died
tail -n +1 -f "$log" &
pids+=($!)
echo "metrics:  http://$listen/metrics   (also /healthz, /readyz)"
echo "stats:    PGHOST=$PGHOST PGPORT=$PGPORT $daemon stats --schema $schema"

if [[ $seconds -eq 0 ]]; then
  echo "Ctrl-C stops the daemon, the writer and the cluster."
  rc=0
  wait "$daemon_pid" || rc=$?
  daemon_died "$rc"
fi
for _ in $(seq "$seconds"); do
  kill -0 "$daemon_pid" 2>/dev/null || daemon_died
  sleep 1
done
kill -0 "$daemon_pid" 2>/dev/null || daemon_died
metrics=$(curl -fsS "http://$listen/metrics") || {
  echo "run.sh: cannot read http://$listen/metrics" >&2
  exit 1
}
echo "== after $seconds s =="
grep -E '^compaction_(up|ready|headless_rows|janitor_deleted_rows_total|cleaner_deleted_messages_total|log_messages)[ {]' <<<"$metrics"
