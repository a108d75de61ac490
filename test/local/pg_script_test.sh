#!/usr/bin/env bash
# deploy/local/pg.sh works twice in a row and cleans up after itself: each
# run gets a ready server on its own random port, and stop removes the data
# directory and leaves no server process behind.
set -euo pipefail
root=$1
for run in 1 2; do
  dir=$(mktemp -d /tmp/cpgt.XXXXXX)
  bash "$root/deploy/local/pg.sh" start "$dir" 2>/dev/null
  # shellcheck disable=SC1091
  (. "$dir/env" && psql -qAtc "SELECT 1" >/dev/null)
  pid=$(head -1 "$dir/data/postmaster.pid")
  bash "$root/deploy/local/pg.sh" stop "$dir"
  if [[ -e "$dir" ]]; then echo "run $run: $dir was not removed"; exit 1; fi
  # The pid file goes a moment before the process itself: allow 5 s.
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then echo "run $run: server $pid still running"; exit 1; fi
  echo "run $run: started, answered, stopped, cleaned up"
done
