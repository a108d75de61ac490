#!/usr/bin/env bash
# Checks the deployment files under deploy/ (systemd, Kubernetes, Prometheus).
#
#   test/deploy/check_deploy.sh [REPO_ROOT]      (ctest: deploy.check)
#
# One line per check: OK, FAIL or SKIP.  A missing tool is a SKIP, not a
# failure, so the script runs anywhere; CI installs systemd, promtool,
# python3-yaml and shellcheck so that nothing is skipped there.  Runs every
# check, then exits 1 if any failed.
set -euo pipefail

root=${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
here=$root/test/deploy
deploy=$root/deploy
failures=0

ok() { echo "OK   $*"; }
skip() { echo "SKIP $*"; }
fail() {
  echo "FAIL $*"
  failures=$((failures + 1))
}
# Indents captured tool output under the FAIL line that it explains
# (multi-line, so sed rather than ${var//}).
# shellcheck disable=SC2001
show() { sed 's/^/     | /' <<<"$1"; }
have() { command -v "$1" >/dev/null 2>&1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# --- systemd --------------------------------------------------------------------
unit=$deploy/systemd/compactiond.service
if have systemd-analyze; then
  # verify refuses a unit whose ExecStart binary does not exist, and the daemon
  # is not installed on build machines: check a copy (same file name, so the
  # unit name is unchanged) that runs /bin/true instead.  Everything else,
  # including the sandbox directives, is verified as written.
  mkdir -p "$tmp/systemd"
  sed 's|^ExecStart=/usr/local/bin/compactiond |ExecStart=/bin/true |' "$unit" \
    >"$tmp/systemd/compactiond.service"
  # verify exits 0 on unknown keys and bad values (it only warns), so any
  # output at all is a failure.
  rc=0
  out=$(systemd-analyze verify --man=no "$tmp/systemd/compactiond.service" 2>&1) || rc=$?
  if [[ $rc -eq 0 && -z $out ]]; then
    ok "systemd-analyze verify compactiond.service"
  else
    fail "systemd-analyze verify compactiond.service (exit $rc)"
    show "$out"
  fi

  # Keep the sandbox from eroding: the README records the score, this holds it.
  rc=0
  out=$(systemd-analyze security --offline=true --no-pager \
    "$tmp/systemd/compactiond.service" 2>&1) || rc=$?
  score=$(sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p' <<<"$out")
  if [[ -n $score ]] && awk -v s="$score" 'BEGIN { exit !(s < 2.0) }'; then
    ok "systemd-analyze security score $score < 2.0"
  else
    fail "systemd-analyze security score '${score:-none}' (want < 2.0, exit $rc)"
    show "$(tail -n 5 <<<"$out")"
  fi
else
  skip "systemd-analyze verify: systemd-analyze not installed"
  skip "systemd-analyze security: systemd-analyze not installed"
fi

# The parts of the unit the daemon's contract relies on, which verify cannot
# know about.
missing=()
# shellcheck disable=SC2016  # $MAINPID is for systemd, not for this shell
for line in \
  'Type=notify' \
  'ExecStart=/usr/local/bin/compactiond run --config /etc/compactiond/compactiond.conf' \
  'ExecReload=/bin/kill -HUP $MAINPID' \
  'EnvironmentFile=-/etc/compactiond/credentials.env' \
  'LoadCredential=pgpass:/etc/compactiond/pgpass' \
  'Environment=PGPASSFILE=%d/pgpass' \
  'WatchdogSec=30s' \
  'Restart=on-failure'; do
  grep -qxF -- "$line" "$unit" || missing+=("$line")
done
if [[ ${#missing[@]} -eq 0 ]]; then
  ok "compactiond.service carries the daemon contract (notify, watchdog, reload, passfile credential)"
else
  fail "compactiond.service lacks: ${missing[*]}"
fi
# The password reaches libpq through the passfile credential: neither the unit
# nor the example environment file sets one (PGPASSWORD there is a commented
# fallback), and no conninfo embeds a password or an sslpassword.
secret_re='password\s*=|://[^/@:[:space:]]+:[^/@[:space:]]+@'
leaks=$(grep -HnEi "$secret_re" "$unit" "$deploy/systemd/credentials.env.example" \
  "$root/config/compactiond.conf" | grep -v ':[0-9]*:#' || true)
if [[ -z $leaks ]] && ! grep -q '^PGPASSWORD' "$deploy/systemd/credentials.env.example"; then
  ok "systemd files and config/compactiond.conf set no password (passfile by default)"
else
  fail "a password is set outside the passfile"
  show "$leaks"
fi
# The passfile example is one pgpass line with a placeholder password.
if grep -Eq '^[^#:]+:[0-9*]+:[^:]+:[^:]+:change-me$' "$deploy/systemd/pgpass.example"; then
  ok "pgpass.example: host:port:database:user:change-me"
else
  fail "pgpass.example: expected one pgpass line ending in :change-me"
fi

# --- Kubernetes and Prometheus YAML ----------------------------------------------
if have python3 && python3 -c 'import yaml' 2>/dev/null; then
  if python3 "$here/check_manifests.py" kubernetes "$deploy/kubernetes" >"$tmp/k8s" 2>&1; then
    cat "$tmp/k8s"
  else
    cat "$tmp/k8s"
    fail "Kubernetes manifests (see FAIL lines above)"
  fi
  if python3 "$here/check_manifests.py" prometheus "$deploy/prometheus" \
    "$here/testdata/metrics.prom" >"$tmp/prom" 2>&1; then
    cat "$tmp/prom"
  else
    cat "$tmp/prom"
    fail "Prometheus files (see FAIL lines above)"
  fi
else
  skip "Kubernetes manifests: python3-yaml not installed"
  skip "Prometheus files: python3-yaml not installed"
fi

# --- promtool ---------------------------------------------------------------------
if have promtool; then
  # `check config` also loads alerts.yml through rule_files, i.e. checks that
  # the relative path resolves.
  for cmd in "check config prometheus.yml" "check rules alerts.yml" "test rules alerts_test.yml"; do
    rc=0
    # shellcheck disable=SC2086  # $cmd is a fixed word list
    out=$(cd "$deploy/prometheus" && promtool $cmd 2>&1) || rc=$?
    if [[ $rc -eq 0 ]]; then
      ok "promtool $cmd"
    else
      fail "promtool $cmd (exit $rc)"
      show "$out"
    fi
  done
else
  for cmd in "check config" "check rules" "test rules"; do
    skip "promtool $cmd: promtool not installed"
  done
fi

# --- check_metrics_scrape.sh against the contract fixture --------------------------
# The scrape checker guards the real daemon (test/daemon); prove here that it
# passes a correct exposition and catches a broken one.
if have promtool; then
  rc=0
  out=$(bash "$here/check_metrics_scrape.sh" "file://$here/testdata/metrics.prom" 2>&1) || rc=$?
  if [[ $rc -eq 0 ]]; then
    ok "check_metrics_scrape.sh accepts testdata/metrics.prom"
  else
    fail "check_metrics_scrape.sh rejects testdata/metrics.prom (exit $rc)"
    show "$out"
  fi
  # A counter without HELP and without _total, as a regression would produce.
  printf '# TYPE compaction_janitor_sweeps counter\ncompaction_janitor_sweeps 1\n' \
    >"$tmp/bad.prom"
  if bash "$here/check_metrics_scrape.sh" "file://$tmp/bad.prom" >/dev/null 2>&1; then
    fail "check_metrics_scrape.sh accepted a lint failure"
  else
    ok "check_metrics_scrape.sh rejects an exposition that promtool flags"
  fi
else
  skip "check_metrics_scrape.sh self-test: promtool not installed"
fi

# --- shell scripts ------------------------------------------------------------------
if have shellcheck; then
  rc=0
  out=$(shellcheck "$here"/*.sh 2>&1) || rc=$?
  if [[ $rc -eq 0 ]]; then
    ok "shellcheck test/deploy/*.sh"
  else
    fail "shellcheck test/deploy/*.sh"
    show "$out"
  fi
else
  skip "shellcheck test/deploy/*.sh: shellcheck not installed"
fi

if [[ $failures -ne 0 ]]; then
  echo "FAILED: $failures check(s)"
  exit 1
fi
echo "PASSED: all deployment checks"
