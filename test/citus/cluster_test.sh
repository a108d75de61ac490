#!/usr/bin/env bash
# deploy/citus/cluster.sh: the cluster it starts has a coordinator in the
# metadata and two active workers, a distributed table spreads over both;
# and without citus.so it exits 77 with a message that says so.
#
#   test/citus/cluster_test.sh SOURCE_DIR started|skip
set -euo pipefail
root=$1
case "$2" in
  skip)
    dir=$(mktemp -d /tmp/ccit.XXXXXX)
    rc=0
    out=$(CITUS_SO=/nonexistent/citus.so \
      bash "$root/deploy/citus/cluster.sh" start "$dir" 2>&1) || rc=$?
    rm -rf "$dir"
    [[ $rc -eq 77 ]] || { echo "FAIL: exit $rc, expected 77: $out"; exit 1; }
    [[ "$out" == *"citus.so is absent"* ]] \
      || { echo "FAIL: no clear message: $out"; exit 1; }
    echo "ok: $out"
    ;;
  started)
    workers=$(psql -X -At -v ON_ERROR_STOP=1 \
      -c 'SELECT count(*) FROM pg_catalog.citus_get_active_worker_nodes()')
    [[ "$workers" == 2 ]] || { echo "FAIL: $workers active workers"; exit 1; }
    nodes=$(psql -X -At -v ON_ERROR_STOP=1 -c \
      'CREATE TABLE spread (k int PRIMARY KEY)' -c \
      "SELECT create_distributed_table('spread', 'k')" -c \
      'INSERT INTO spread SELECT generate_series(1, 100)' -c \
      'SELECT count(DISTINCT nodeport) FROM pg_catalog.citus_shards')
    [[ "$(tail -1 <<<"$nodes")" == 2 ]] \
      || { echo "FAIL: shards not on two workers: $nodes"; exit 1; }
    echo "ok: 2 workers, shards on both"
    ;;
  *) echo "usage: $0 SOURCE_DIR started|skip" >&2; exit 2 ;;
esac
