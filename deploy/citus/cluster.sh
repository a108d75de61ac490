#!/usr/bin/env bash
# Starts or stops a throwaway 3-node Citus cluster (a coordinator and two
# workers, PostgreSQL 15) for tests and demos, on one machine.
#
#   deploy/citus/cluster.sh start DIR [PORT]  init + start; writes DIR/env
#                                             (PG* exports for the
#                                             coordinator)
#   deploy/citus/cluster.sh stop DIR          stop the servers, remove DIR
#
# Citus is not a Debian package: build it by hand (doc/citus.md says how).
# Without citus.so this exits 77, the skip code of the `citus` tests, and
# says so. The coordinator listens on PORT (default: a free one), the
# workers on PORT+1 and PORT+2, all on 127.0.0.1; the Unix sockets live in
# DIR/s (keep DIR short). As root the servers run as `postgres`. fsync is
# off because the data is thrown away.
set -euo pipefail

PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
cmd=${1:-}
dir=${2:-}
usage() { echo "usage: $0 start DIR [PORT] | stop DIR" >&2; exit 2; }
[[ -n "$cmd" && -n "$dir" ]] || usage

# shellcheck source=deploy/local/common.sh
. "$(dirname "$0")/../local/common.sh"

kSkip=77

# CITUS_SO overrides where citus.so is looked for (the skip path's test).
citus_lib() {
  if [[ -n "${CITUS_SO:-}" ]]; then echo "$CITUS_SO"; return; fi
  echo "$("$PG_BIN/pg_config" --pkglibdir 2>/dev/null \
    || echo /usr/lib/postgresql/15/lib)/citus.so"
}

# A port P with P, P+1 and P+2 free on 127.0.0.1 right now.
free_port_triple() {
  python3 - <<'PY'
import socket
for _ in range(50):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]
    s.close()
    if p + 2 > 65535:
        continue
    try:
        held = []
        for q in (p, p + 1, p + 2):
            t = socket.socket(); t.bind(("127.0.0.1", q)); held.append(t)
        for t in held: t.close()
        print(p); break
    except OSError:
        for t in held: t.close()
else:
    raise SystemExit("no three consecutive free ports")
PY
}

# Runs SQL on the node at port $1 (as postgres, through its socket).
node_sql() {
  local port=$1
  shift
  as_owner "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$dir/s" -p "$port" \
    -U postgres -d postgres "$@"
}

start_node() {
  local name=$1 port=$2
  local data="$dir/$name"
  if [[ ! -f "$data/PG_VERSION" ]]; then
    as_owner "$PG_BIN/initdb" -D "$data" -U postgres -A trust -E UTF8 \
      --locale=C.UTF-8 >"$dir/initdb-$name.log" 2>&1 \
      || { cat "$dir/initdb-$name.log" >&2; exit 1; }
  fi
  # 2PC across nodes needs prepared transactions; the shared buffers are
  # small because three servers share the machine.
  as_owner "$PG_BIN/pg_ctl" -D "$data" -l "$dir/$name.log" -w -t 60 \
    -o "-p $port -k $dir/s -c listen_addresses=127.0.0.1 -c fsync=off \
        -c synchronous_commit=off -c full_page_writes=off \
        -c shared_preload_libraries=citus -c max_prepared_transactions=100 \
        -c wal_level=logical -c max_connections=300 -c shared_buffers=128MB \
        -c max_locks_per_transaction=256" start >/dev/null \
    || { cat "$dir/$name.log" >&2; exit 1; }
}

start() {
  if [[ ! -f "$(citus_lib)" ]]; then
    echo "SKIP: $(citus_lib) is absent: Citus is built by hand (doc/citus.md)" >&2
    exit "$kSkip"
  fi
  mkdir -p "$dir/s"
  dir=$(cd "$dir" && pwd)
  if [[ $(id -u) -eq 0 ]]; then chown -R postgres: "$dir"; fi
  chmod 700 "$dir"
  local port=${3:-}
  [[ -n "$port" ]] || port=$(free_port_triple)
  local w1=$((port + 1)) w2=$((port + 2))
  start_node coordinator "$port"
  start_node worker1 "$w1"
  start_node worker2 "$w2"
  local p
  for p in "$port" "$w1" "$w2"; do
    node_sql "$p" -c 'CREATE EXTENSION IF NOT EXISTS citus'
  done
  node_sql "$port" <<SQL >/dev/null
SELECT pg_catalog.citus_set_coordinator_host('127.0.0.1', $port);
SELECT pg_catalog.citus_add_node('127.0.0.1', $w1);
SELECT pg_catalog.citus_add_node('127.0.0.1', $w2);
SQL
  cat >"$dir/env" <<ENV
export PGHOST=$dir/s
export PGPORT=$port
export PGUSER=postgres
export PGDATABASE=postgres
export COMPACTION_PG_DIR=$dir
export COMPACTION_CITUS_WORKER_PORTS="$w1 $w2"
ENV
  chmod 644 "$dir/env"
  echo "Citus ready: coordinator PGHOST=$dir/s PGPORT=$port, workers $w1 $w2" >&2
}

stop() {
  local name
  for name in coordinator worker1 worker2; do
    if [[ -f "$dir/$name/postmaster.pid" ]]; then
      as_owner "$PG_BIN/pg_ctl" -D "$dir/$name" -m immediate -w stop \
        >/dev/null 2>&1 || true
    fi
  done
  rm -rf "$dir"
}

case "$cmd" in
  start) start "$@" ;;
  stop) stop ;;
  *) usage ;;
esac
