# Shared by deploy/local/pg.sh, standby.sh, pgbouncer.sh and
# test/bench/run.sh (sourced, not run).

# Runs a command as `postgres` when we are root (initdb, pg_ctl and
# pgbouncer refuse root), as ourselves otherwise.
as_owner() {
  if [[ $(id -u) -eq 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi
}

# A TCP port on 127.0.0.1 that is free right now.
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
