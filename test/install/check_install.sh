#!/usr/bin/env bash
# Installs the built project into a temporary root (DESTDIR, so a build for
# /usr stages there too), then builds a consumer project against it with
# find_package(compaction) and with pkg-config, and runs the CMake-built
# consumer against the test database.
#
# A shared build (libcompaction.so present) is also checked for what a shared
# library promises: the consumer needs libcompaction.so.0 (the SONAME); the
# library exports only namespace compaction, every symbol at version
# COMPACTION_0, nothing of its internals (pg, sweep, anonymous namespaces);
# and compaction_USE_STATIC_LIBS=ON picks the static library from the same
# install, which then runs without the .so.
set -euo pipefail
build=$1
src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix_conf=$(sed -n 's/^CMAKE_INSTALL_PREFIX:PATH=//p' "$build/CMakeCache.txt")
DESTDIR="$work/root" cmake --install "$build" >/dev/null
prefix="$work/root$prefix_conf"
pcdir=$(dirname "$(find "$prefix" -name compaction.pc | head -1)")
libdir=$(dirname "$pcdir")

consumer() {  # consumer BUILD_DIR [cmake args...]
  local dir=$1
  shift
  cmake -S "$src/test/install/consumer" -B "$dir" -DCMAKE_PREFIX_PATH="$prefix" \
    "$@" >/dev/null
  cmake --build "$dir" >/dev/null
}
needs_so() { readelf -d "$1" | grep -q 'NEEDED.*\[libcompaction\.so\.0\]'; }

consumer "$work/consumer"
echo "find_package(compaction): consumer built"
"$work/consumer/consumer" "install_check_$$"
psql -qAtc "DROP SCHEMA install_check_$$ CASCADE" >/dev/null 2>&1 || true

export PKG_CONFIG_PATH="$pcdir"
# shellcheck disable=SC2046
g++ -std=c++20 "$src/test/install/consumer/main.cpp" -o "$work/pc_consumer" \
  $(pkg-config --cflags --libs compaction)
LD_LIBRARY_PATH="$libdir" "$work/pc_consumer"
echo "pkg-config compaction: consumer built"

if [[ ! -e $libdir/libcompaction.so ]]; then
  if needs_so "$work/consumer/consumer"; then
    echo "FAIL static install, yet the consumer needs libcompaction.so.0"
    exit 1
  fi
  echo "static library: consumer links it in"
  exit 0
fi

soname=$(readelf -d "$libdir/libcompaction.so" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
[[ $soname == libcompaction.so.0 ]] || { echo "FAIL SONAME is '$soname'"; exit 1; }
needs_so "$work/consumer/consumer" || { echo "FAIL consumer does not need libcompaction.so.0"; exit 1; }
needs_so "$work/pc_consumer" || { echo "FAIL pkg-config consumer does not need libcompaction.so.0"; exit 1; }
echo "shared library: SONAME $soname, consumers need it"

# Exported symbols: name@version, demangled.
nm -D --defined-only --with-symbol-versions "$libdir/libcompaction.so.0" \
  | awk '{print $3}' | grep -vx 'COMPACTION_0' | c++filt >"$work/symbols"
total=$(wc -l <"$work/symbols")
bad=$(grep -v '@@COMPACTION_0$' "$work/symbols" || true)
inner=$(grep -E 'compaction::(pg|sweep|sql)::|anonymous namespace|compaction::detail::(ClientCore|TxState|TxGate)::' \
  "$work/symbols" || true)
foreign=$(grep -v -E '^((typeinfo|typeinfo name|vtable|VTT) for )?compaction::' "$work/symbols" || true)
if [[ -n $bad || -n $inner || -n $foreign ]]; then
  echo "FAIL exported symbols:"
  printf '%s\n' "unversioned:" "$bad" "internal:" "$inner" \
    "outside namespace compaction:" "$foreign" | head -40
  exit 1
fi
echo "shared library: $total exported symbols, all compaction:: at COMPACTION_0"

consumer "$work/consumer_static" -Dcompaction_USE_STATIC_LIBS=ON
if needs_so "$work/consumer_static/consumer"; then
  echo "FAIL compaction_USE_STATIC_LIBS=ON still links libcompaction.so.0"
  exit 1
fi
"$work/consumer_static/consumer" "install_check_s$$"
psql -qAtc "DROP SCHEMA install_check_s$$ CASCADE" >/dev/null 2>&1 || true
echo "find_package(compaction) with compaction_USE_STATIC_LIBS=ON: static consumer ran"
