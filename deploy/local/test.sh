#!/usr/bin/env bash
# Builds the project and runs every test against a throwaway PostgreSQL.
#
#   deploy/local/test.sh [BUILD_DIR] [extra cmake options...]
#
# Installs missing Debian packages first when run as root (a fresh
# machine), starts its own cluster with deploy/local/pg.sh, exports the PG*
# variables for ctest, and always stops the cluster again.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
shift || true

"$root/deploy/local/install-deps.sh"

# Line tables only (-g1) instead of full debug information: backtraces and
# sanitizer reports still name file and line, and the test files, which
# instantiate Catch2's and nlohmann_json's templates, compile in about half
# the time (9.7 -> 4.7 s for test/pg/tx_test.cpp at -O2, measured on a
# 2-core VM like CI's). Options after the build directory come later and win.
cmake -S "$root" -B "$build" -DCOMPACTION_WERROR=ON \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" "$@" >/dev/null
cmake --build "$build" -j"$(nproc)"

pgdir=$(mktemp -d /tmp/cpg.XXXXXX)
trap 'bash "$root/deploy/local/pg.sh" stop "$pgdir"' EXIT
bash "$root/deploy/local/pg.sh" start "$pgdir"
# shellcheck disable=SC1091
. "$pgdir/env"

cd "$build"
# On failure, the failed tests' output again, last, where a log that keeps
# only its head and tail (CI summaries) still shows why.
if ! ctest --output-on-failure -j"$(nproc)" --timeout 600; then
  python3 "$root/deploy/local/failed_output.py" Testing/Temporary/LastTest.log
  exit 8
fi
