#!/usr/bin/env bash
# Runs a command with a PgBouncer in transaction mode
# (deploy/local/pgbouncer.sh) in front of the cluster the PG* variables
# name, then stops it.
#
#   test/pooler/with_pooler.sh COMMAND [ARGS...]
#
# The PG* variables keep naming the cluster itself (for what must bypass
# the pooler: holding locks, watching pg_stat_activity); the pooler is
# COMPACTION_POOLER_CONNINFO ("host=127.0.0.1 port=P", over PGUSER and
# PGDATABASE), which the live-test fixtures, the scenarios and the daemon
# tests use with prepared statements off. COMPACTION_POOLER_DIR is its
# directory (pgbouncer.ini, pgbouncer.log). PGBOUNCER_* knobs pass through.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dir=$(mktemp -d /tmp/pgb.XXXXXX)
trap 'bash "$root/deploy/local/pgbouncer.sh" stop "$dir"' EXIT
bash "$root/deploy/local/pgbouncer.sh" start "$dir" 2>/dev/null
port=$(. "$dir/env" && echo "$PGPORT")
export COMPACTION_POOLER_CONNINFO="host=127.0.0.1 port=$port"
export COMPACTION_POOLER_DIR=$dir
"$@"
