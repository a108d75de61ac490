#!/usr/bin/env bash
# Builds the libFuzzer targets with clang and runs each for a bounded time,
# all at once.
#
#   test/fuzz/run.sh [SECONDS]     (default 60 per target)
#
# Configures its own build directory (FUZZ_BUILD_DIR, default build-fuzz)
# with clang-14 and -DCOMPACTION_FUZZ=ON, builds only the fuzz targets, and
# runs each on a copy of its seed corpus, so the repository is not modified.
# Installs clang-14 when missing and run as root. Exits nonzero when a
# target crashes; the reproducer is kept and its path printed.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
secs=${1:-60}
build=${FUZZ_BUILD_DIR:-$root/build-fuzz}
targets=(topic_event conninfo)

if ! command -v clang++-14 >/dev/null; then
  if [[ $(id -u) -ne 0 ]]; then
    echo "clang++-14 missing (apt-get install clang-14)" >&2
    exit 1
  fi
  echo "installing: clang-14" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >/dev/null
  apt-get install -y -q --no-install-recommends clang-14 >/dev/null
fi

CC=clang-14 CXX=clang++-14 cmake -S "$root" -B "$build" \
  -DCOMPACTION_FUZZ=ON -DCOMPACTION_WERROR=ON -DCOMPACTION_BUILD_TESTS=OFF \
  -DCOMPACTION_BUILD_DAEMON=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j"$(nproc)" --target "${targets[@]/#/fuzz_}"

work=$(mktemp -d /tmp/compaction-fuzz.XXXXXX)

# One target's run, its log in $work/$t/log. Run in the background, the
# subshell becomes the fuzzer (exec), so its job's pid is the fuzzer's.
fuzz_one() {
  local t=$1
  # -max_len above 8,000 so that long runs reach the payload size bound;
  # the seeds stay small so that a short run spends its time on structure
  # (the unit tests cover the 8,000-byte and nesting bounds exactly).
  exec "$build/test/fuzz/fuzz_$t" "$work/$t/corpus" \
    -dict="$root/test/fuzz/$t.dict" -max_len=9000 -timeout=10 \
    -rss_limit_mb=2048 -max_total_time="$secs" -print_final_stats=1 \
    -artifact_prefix="$work/$t/crashes/" >"$work/$t/log" 2>&1
}

for t in "${targets[@]}"; do
  mkdir -p "$work/$t/corpus" "$work/$t/crashes"
  cp "$root/test/fuzz/corpus/$t/"* "$work/$t/corpus/"
done
# The targets run side by side, one process each (libFuzzer uses one core
# per process): on CI's 2 cores the stage takes SECONDS once, not per target.
# A script stopped early (a signal, an error) stops its fuzzers too.
trap 'kill $(jobs -p) 2>/dev/null || true' EXIT
declare -A pids
for t in "${targets[@]}"; do
  echo "== fuzz_$t for ${secs}s =="
  fuzz_one "$t" &
  pids[$t]=$!
done
status=0
for t in "${targets[@]}"; do
  rc=0
  wait "${pids[$t]}" || rc=$?
  echo "-- fuzz_$t"
  grep -E '^#[0-9]+[[:space:]]+DONE|^stat::(number_of_executed_units|peak_rss_mb)' \
    "$work/$t/log" || true
  echo "corpus: $(ls "$work/$t/corpus" | wc -l) inputs; exit $rc"
  if [[ $rc -ne 0 ]]; then
    status=1
    tail -40 "$work/$t/log"
    echo "fuzz_$t FAILED; reproducer(s): $(ls -d "$work/$t/crashes/"* 2>/dev/null)"
  fi
done
if [[ $status -eq 0 ]]; then rm -rf "$work"; else echo "kept: $work"; fi
exit $status
