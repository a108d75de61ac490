#!/usr/bin/env bash
# The installed systemd unit runs the installed binary, wherever the prefix:
# `cmake --install BUILD --prefix P` of the daemon, twice with two prefixes
# from one build (the unit used to keep the configure-time path,
# /usr/local/bin/compactiond).
#
#   check_unit_prefix.sh BUILD_DIR
set -euo pipefail
build=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL $*"; exit 1; }

for p in "$work/one" "$work/two/opt"; do
  cmake --install "$build" --prefix "$p" --component daemon >/dev/null
  unit=$(find "$p" -name compactiond.service)
  [[ -n $unit ]] || fail "no compactiond.service under $p"
  conf=$(find "$p" -name compactiond.conf)
  [[ -n $conf ]] || fail "no compactiond.conf under $p"
  want="ExecStart=$p/bin/compactiond run --config $conf"
  grep -qxF "$want" "$unit" || fail "$unit: want '$want', have '$(grep ^ExecStart= "$unit")'"
  [[ -x $p/bin/compactiond ]] || fail "$p/bin/compactiond not installed"
  echo "OK    ${unit#"$work"/}: $want"
done
