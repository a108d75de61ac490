#!/usr/bin/env bash
# Runs a command against a fresh 3-node Citus cluster of
# deploy/citus/cluster.sh (PG* variables for the coordinator exported), and
# always stops the cluster again. Exits 77 (ctest's SKIP_RETURN_CODE for
# the `citus` label) when citus.so is absent, so a machine without a hand
# build of Citus stays green.
#
#   test/citus/with_cluster.sh SOURCE_DIR COMMAND [ARGS...]
set -euo pipefail
root=$1
shift
dir=$(mktemp -d /tmp/ccit.XXXXXX)
trap 'bash "$root/deploy/citus/cluster.sh" stop "$dir"' EXIT
rc=0
bash "$root/deploy/citus/cluster.sh" start "$dir" || rc=$?
if [[ $rc -eq 77 ]]; then
  echo "SKIP: no Citus on this machine (citus.so absent); see doc/citus.md" >&2
  exit 77
fi
[[ $rc -eq 0 ]] || exit "$rc"
# shellcheck disable=SC1091
. "$dir/env"
# Citus explains every DROP SCHEMA .. CASCADE of the tests' clean-up at
# length; a test that reads notices asks for them on its own connection.
export PGOPTIONS="-c client_min_messages=warning"
"$@"
