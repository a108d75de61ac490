#!/usr/bin/env bash
# Installs the built project into a temporary prefix, then builds a consumer
# project against it twice: with find_package(compaction) and with
# pkg-config. Runs the CMake-built consumer against the test database.
set -euo pipefail
build=$1
src=$2
flags=${3:-}  # e.g. -fsanitize=address,undefined for a sanitizer build
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
cmake -S "$src/test/install/consumer" -B "$work/consumer" \
  -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_CXX_FLAGS="$flags" >/dev/null
cmake --build "$work/consumer" >/dev/null
echo "find_package(compaction): consumer built"
"$work/consumer/consumer" "install_check_$$"
psql -qAtc "DROP SCHEMA install_check_$$ CASCADE" >/dev/null 2>&1 || true

export PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig"
# shellcheck disable=SC2046
# shellcheck disable=SC2086
g++ -std=c++20 $flags "$src/test/install/consumer/main.cpp" -o "$work/pc_consumer" \
  $(pkg-config --cflags --libs compaction)
"$work/pc_consumer"
echo "pkg-config compaction: consumer built"
