#!/usr/bin/env bash
# Starts or stops a throwaway PostgreSQL 15 cluster for tests and demos.
#
#   deploy/local/pg.sh start DIR   init + start; writes DIR/env (PG* exports)
#   deploy/local/pg.sh stop DIR    stop the server and remove DIR
#
# DIR should be a short path (the Unix socket lives in DIR/s and must stay
# under 107 bytes) readable by the postgres user. As root, the server runs
# as `postgres` because initdb and pg_ctl refuse root. The port is random
# and free; fsync is off because the data is thrown away.
# track_activity_query_size: tests read the library's statements whole
# from pg_stat_activity, and their length grows with the schema name.
# PG_SERVER_OPTS adds server options after these, which they override:
# PG_SERVER_OPTS='-c fsync=on -c synchronous_commit=on -c full_page_writes=on'
# gives PostgreSQL's default durability (test/bench/run.sh passes it on).
set -euo pipefail

PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
cmd=${1:-}
dir=${2:-}
[[ -n "$cmd" && -n "$dir" ]] || { echo "usage: $0 start|stop DIR" >&2; exit 2; }

# shellcheck source=deploy/local/common.sh
. "$(dirname "$0")/common.sh"

start() {
  mkdir -p "$dir/s"
  dir=$(cd "$dir" && pwd)
  if [[ $(id -u) -eq 0 ]]; then chown -R postgres: "$dir"; fi
  chmod 700 "$dir"
  if [[ ! -f "$dir/data/PG_VERSION" ]]; then
    as_owner "$PG_BIN/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 \
      --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 \
      || { cat "$dir/initdb.log" >&2; exit 1; }
    # Trust for everyone, except members of two group roles the tests of
    # refused logins create (test/pg/auth_test.cpp, the daemon's
    # auth_refused): a password is required, or no connection is admitted.
    # First match wins, so these go first.
    local hba
    hba=$(cat "$dir/data/pg_hba.conf")
    # Rewritten in place: the file keeps its owner.
    printf '%s\n' \
      'local all +compaction_test_password scram-sha-256' \
      'host all +compaction_test_password all scram-sha-256' \
      'local all +compaction_test_rejected reject' \
      'host all +compaction_test_rejected all reject' \
      "$hba" >"$dir/data/pg_hba.conf"
  fi
  local port
  port=$(free_port)
  as_owner "$PG_BIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
    -o "-p $port -k $dir/s -c listen_addresses=127.0.0.1 -c fsync=off \
        -c synchronous_commit=off -c full_page_writes=off \
        -c max_connections=300 -c shared_buffers=256MB \
        -c max_locks_per_transaction=256 \
        -c track_activity_query_size=4096 ${PG_SERVER_OPTS:-}" start >/dev/null \
    || { cat "$dir/server.log" >&2; exit 1; }
  cat >"$dir/env" <<ENV
export PGHOST=$dir/s
export PGPORT=$port
export PGUSER=postgres
export PGDATABASE=postgres
export COMPACTION_PG_DIR=$dir
ENV
  chmod 644 "$dir/env"
  echo "PostgreSQL ready: PGHOST=$dir/s PGPORT=$port" >&2
}

stop() {
  if [[ -f "$dir/data/postmaster.pid" ]]; then
    as_owner "$PG_BIN/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
  fi
  rm -rf "$dir"
}

case "$cmd" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop DIR" >&2; exit 2 ;;
esac
