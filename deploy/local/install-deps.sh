#!/usr/bin/env bash
# Installs the Debian packages the build, tests and demo need, when missing.
set -euo pipefail
packages=(cmake g++ make pkg-config libpq-dev postgresql-15 libboost-dev
  libboost-program-options-dev prometheus-cpp-dev nlohmann-json3-dev catch2
  libsystemd-dev python3 python3-yaml prometheus curl groff-base
  # the pooler tests (test/pooler, deploy/local/pgbouncer.sh)
  pgbouncer
  # .ci/format_check.sh
  clang-format-14
  # packaging tests: CPack's DEB generator, lintian, the image root, man -l
  dpkg-dev file lintian mmdebstrap man-db)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0
if [[ $(id -u) -ne 0 ]]; then
  echo "missing packages: ${missing[*]} (run as root to install them)" >&2
  exit 1
fi
echo "installing: ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null
apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
