#!/usr/bin/env bash
# The README's "from source with a custom prefix", as written:
#   cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
#   cmake --build build -j"$(nproc)"
#   cmake --install build --prefix P
# run from the root of a scratch copy of the tree under test (so no build/
# of the user's is touched), with one addition: -DCOMPACTION_BUILD_TESTS=OFF,
# the README's library-and-daemon-only build. The tests would add about four
# minutes of both cores and nothing the install step uses. Then the installed
# compactiond runs, and its unit names it.
#
#   check_from_source.sh SOURCE_DIR
set -euo pipefail
src=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL $*"; exit 1; }
step() { printf '%-5s %s (%ss)\n' OK "$1" "$SECONDS"; }

copy=$work/src
mkdir -p "$copy"
tar -C "$src" --exclude='./build*' --exclude=./.git -cf - . | tar -C "$copy" -xf -
prefix=$work/prefix
(
  cd "$copy"
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCOMPACTION_BUILD_TESTS=OFF
  cmake --build build -j"$(nproc)"
  cmake --install build --prefix "$prefix"
) >"$work/log" 2>&1 || { tail -30 "$work/log"; fail "the README's commands"; }
grep -q 'warning:' "$work/log" && { grep 'warning:' "$work/log" | head; fail "warnings in the Release build"; }
step "built and installed to a custom prefix"

version=$("$prefix/bin/compactiond" --version)
[[ $version == compactiond\ * ]] || fail "installed compactiond --version: $version"
unit=$(find "$prefix" -name compactiond.service)
grep -qx "ExecStart=$prefix/bin/compactiond run --config $prefix/etc/compactiond/compactiond.conf" "$unit" \
  || fail "unit: $(grep ^ExecStart= "$unit")"
[[ -f $prefix/include/compaction/compaction.hpp ]] || fail "no headers installed"
step "$version; unit runs $prefix/bin/compactiond"
