#!/usr/bin/env bash
# A throwaway primary + streaming standby for failover tests and demos.
#
#   deploy/local/standby.sh start DIR            primary (synchronous
#       replication: synchronous_standby_names='*') and a standby made with
#       pg_basebackup -R, streaming; writes DIR/env
#   deploy/local/standby.sh stop-primary DIR fast|immediate
#   deploy/local/standby.sh promote DIR          pg_ctl promote, waits
#   deploy/local/standby.sh stop DIR             stops both, removes DIR
#
# DIR/env exports PG* for the primary (socket), FAILOVER_P1/FAILOVER_P2 (the
# TCP ports), FAILOVER_STANDBY_HOST (the standby's socket directory) and
# FAILOVER_CONNINFO, the multi-host conninfo an application would use:
#   host=127.0.0.1,127.0.0.1 port=P1,P2 target_session_attrs=read-write
# Unlike deploy/local/pg.sh, commits are synchronous (synchronous_commit
# on), so an acknowledged commit is on the standby before the client hears
# of it, even when the primary is stopped with -m immediate.
set -euo pipefail

PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
cmd=${1:-}
dir=${2:-}
[[ -n "$cmd" && -n "$dir" ]] || {
  echo "usage: $0 start|stop-primary|promote|stop DIR [fast|immediate]" >&2
  exit 2
}

# shellcheck source=deploy/local/common.sh
. "$(dirname "$0")/common.sh"

# Starts the cluster in $1 on port $2 with its socket in $3; extra server
# options in $4.
start_server() {
  as_owner "$PG_BIN/pg_ctl" -D "$1" -l "$1/../server.log" -w -t 60 \
    -o "-p $2 -k $3 -c listen_addresses=127.0.0.1 -c fsync=off \
        -c full_page_writes=off -c max_connections=200 \
        -c shared_buffers=128MB -c max_locks_per_transaction=256 \
        -c wal_level=replica -c max_wal_senders=5 \
        -c wal_receiver_status_interval=1s ${4:-}" \
    start >/dev/null || { cat "$1/../server.log" >&2; exit 1; }
}

start() {
  mkdir -p "$dir/p/s" "$dir/b/s"
  dir=$(cd "$dir" && pwd)
  if [[ $(id -u) -eq 0 ]]; then chown -R postgres: "$dir"; fi
  chmod 700 "$dir" "$dir/p" "$dir/b"
  as_owner "$PG_BIN/initdb" -D "$dir/p/data" -U postgres -A trust -E UTF8 \
    --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 \
    || { cat "$dir/initdb.log" >&2; exit 1; }
  local p1 p2
  p1=$(free_port)
  p2=$(free_port)
  start_server "$dir/p/data" "$p1" "$dir/p/s" "-c synchronous_standby_names=*"
  as_owner "$PG_BIN/pg_basebackup" -h 127.0.0.1 -p "$p1" -U postgres \
    -D "$dir/b/data" -R -X stream -c fast >"$dir/basebackup.log" 2>&1 \
    || { cat "$dir/basebackup.log" >&2; exit 1; }
  # Not synchronous once promoted: it has no standby of its own to wait for.
  start_server "$dir/b/data" "$p2" "$dir/b/s"
  # Until the standby streams as the synchronous one, commits would wait.
  local i
  for ((i = 0; i < 200; i++)); do
    if [[ $(as_owner psql -X -At -h "$dir/p/s" -p "$p1" -U postgres -d postgres \
          -c "SELECT count(*) FROM pg_stat_replication
              WHERE state = 'streaming' AND sync_state = 'sync'") == 1 ]]; then
      break
    fi
    sleep 0.05
  done
  ((i < 200)) || { echo "standby did not start streaming" >&2; exit 1; }
  cat >"$dir/env" <<ENV
export PGHOST=$dir/p/s
export PGPORT=$p1
export PGUSER=postgres
export PGDATABASE=postgres
export FAILOVER_DIR=$dir
export FAILOVER_P1=$p1
export FAILOVER_P2=$p2
export FAILOVER_STANDBY_HOST=$dir/b/s
export FAILOVER_CONNINFO='host=127.0.0.1,127.0.0.1 port=$p1,$p2 user=postgres dbname=postgres target_session_attrs=read-write'
ENV
  chmod 644 "$dir/env"
  echo "primary on $p1, synchronous standby on $p2" >&2
}

stop_primary() {
  local mode=${1:-fast}
  [[ "$mode" == fast || "$mode" == immediate ]] || {
    echo "stop-primary: mode is fast or immediate" >&2; exit 2; }
  as_owner "$PG_BIN/pg_ctl" -D "$dir/p/data" -m "$mode" -w stop >/dev/null
}

promote() {
  as_owner "$PG_BIN/pg_ctl" -D "$dir/b/data" -w -t 60 promote >/dev/null
}

stop() {
  local d
  for d in "$dir/p/data" "$dir/b/data"; do
    if [[ -f "$d/postmaster.pid" ]]; then
      as_owner "$PG_BIN/pg_ctl" -D "$d" -m immediate -w stop >/dev/null 2>&1 || true
    fi
  done
  rm -rf "$dir"
}

case "$cmd" in
  start) start ;;
  stop-primary) stop_primary "${3:-fast}" ;;
  promote) promote ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop-primary|promote|stop DIR" >&2; exit 2 ;;
esac
