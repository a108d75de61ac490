#!/usr/bin/env bash
# Starts or stops a PgBouncer in transaction mode in front of the cluster
# that the PG* variables name (deploy/local/pg.sh's env).
#
#   deploy/local/pgbouncer.sh start DIR   config + start; writes DIR/env
#   deploy/local/pgbouncer.sh stop DIR    stop it and remove DIR
#
# `. DIR/env` then points libpq clients at the pooler (PGHOST=127.0.0.1,
# PGPORT=<its port>), and COMPACTION_DIRECT_* keep the cluster's own
# address for what must bypass it. Every database name is forwarded (a `*`
# entry), as user postgres with trust auth: for tests and demos only. As
# root, pgbouncer runs as `postgres`. Knobs (environment):
#   PGBOUNCER_POOL_SIZE       server connections per database (default 10)
#   PGBOUNCER_IGNORE_STARTUP  ignore_startup_parameters (default "options":
#                             the startup `options` is then accepted and
#                             silently not applied, the case the library's
#                             per-transaction settings exist for; set it
#                             empty to have PgBouncer refuse it instead)
set -euo pipefail

cmd=${1:-}
dir=${2:-}
[[ -n "$cmd" && -n "$dir" ]] || { echo "usage: $0 start|stop DIR" >&2; exit 2; }

# shellcheck source=deploy/local/common.sh
. "$(dirname "$0")/common.sh"

wait_listening() {
  local port=$1
  for _ in $(seq 1 100); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then return 0; fi
    sleep 0.05
  done
  return 1
}

start() {
  : "${PGHOST:?PGHOST (the cluster to pool) is not set}"
  : "${PGPORT:?PGPORT (the cluster to pool) is not set}"
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  local port
  port=$(free_port)
  echo '"postgres" ""' >"$dir/userlist.txt"
  cat >"$dir/pgbouncer.ini" <<INI
[databases]
* = host=$PGHOST port=$PGPORT user=postgres

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
auth_type = trust
auth_file = $dir/userlist.txt
admin_users = postgres
pool_mode = transaction
default_pool_size = ${PGBOUNCER_POOL_SIZE:-10}
max_client_conn = 500
ignore_startup_parameters = ${PGBOUNCER_IGNORE_STARTUP-options}
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
INI
  if [[ $(id -u) -eq 0 ]]; then chown -R postgres: "$dir"; fi
  chmod 755 "$dir"
  as_owner pgbouncer -d -q "$dir/pgbouncer.ini" \
    || { cat "$dir/pgbouncer.log" >&2 2>/dev/null; exit 1; }
  wait_listening "$port" \
    || { echo "pgbouncer did not listen on $port" >&2; cat "$dir/pgbouncer.log" >&2; exit 1; }
  cat >"$dir/env" <<ENV
export COMPACTION_DIRECT_PGHOST=$PGHOST
export COMPACTION_DIRECT_PGPORT=$PGPORT
export PGHOST=127.0.0.1
export PGPORT=$port
export PGUSER=postgres
export PGDATABASE=${PGDATABASE:-postgres}
export COMPACTION_POOLER_DIR=$dir
ENV
  chmod 644 "$dir/env"
  echo "PgBouncer (transaction mode) ready: PGHOST=127.0.0.1 PGPORT=$port" >&2
}

stop() {
  if [[ -f "$dir/pgbouncer.pid" ]]; then
    local pid
    pid=$(cat "$dir/pgbouncer.pid")
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.05
    done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -rf "$dir"
}

case "$cmd" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop DIR" >&2; exit 2 ;;
esac
