#!/usr/bin/env bash
# Builds the Debian packages libcompaction0, libcompaction-dev and compactiond
# with CPack from this tree:
#
#   deploy/debian/build.sh [BUILD_DIR] [OUT_DIR]
#
# A shared-library build (BUILD_SHARED_LIBS=ON, static library too) for /usr,
# with Debian's build flags (dpkg-buildflags, all hardening, no -g: the
# packages are stripped anyway). Needs cmake, g++, dpkg-dev and the build
# dependencies of deploy/local/install-deps.sh. Prints the .deb paths.
#
# Relative BUILD_DIR and OUT_DIR are taken from the current directory (the
# script changes directory before cpack writes OUT_DIR).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
absolute() { if [[ $1 == /* ]]; then echo "$1"; else echo "$PWD/$1"; fi; }
build=$(absolute "${1:-$root/build-deb}")
out=$(absolute "${2:-$build/packages}")
echo "building the Debian packages in $build (about 3 minutes on 2 cores)" >&2

export DEB_BUILD_MAINT_OPTIONS=hardening=+all DEB_CXXFLAGS_MAINT_STRIP=-g
cxxflags="$(dpkg-buildflags --get CXXFLAGS) $(dpkg-buildflags --get CPPFLAGS)"
ldflags=$(dpkg-buildflags --get LDFLAGS)
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=None -DCMAKE_INSTALL_PREFIX=/usr \
  -DBUILD_SHARED_LIBS=ON -DCOMPACTION_BUILD_TESTS=OFF \
  -DCMAKE_CXX_FLAGS="$cxxflags" -DCMAKE_EXE_LINKER_FLAGS="$ldflags" \
  -DCMAKE_SHARED_LINKER_FLAGS="$ldflags" >/dev/null
cmake --build "$build" -j"$(nproc)" >/dev/null
rm -rf "$out"
(cd "$build" && cpack -G DEB -B "$out" >/dev/null)
ls "$out"/*.deb
