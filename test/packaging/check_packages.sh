#!/usr/bin/env bash
# Builds the Debian packages as the README says (deploy/debian/build.sh
# build-deb build-deb/packages, from the root of a copy of the tree) and
# checks them as a
# packager and an operator would:
#   - lintian: no error (warnings are printed, and listed in doc/operations.md);
#   - control data: compactiond depends on libcompaction0 and what
#     dpkg-shlibdeps found (libc6, libstdc++6, ...), adduser, and not on
#     libpq5 (only the library talks to PostgreSQL; libcompaction0 depends
#     on libpq5); its conffile is
#     /etc/compactiond/compactiond.conf; libcompaction0 has shlibs and an
#     ldconfig trigger;
#   - dpkg-deb -x of all three into a temporary root: the extracted
#     `compactiond --version` runs, a consumer builds against the extracted
#     -dev package (find_package and pkg-config) and runs against the test
#     database, `man -l` renders the man page without a warning;
#   - test/install/check_install.sh on the package build: the shared library's
#     SONAME, exported symbols, and the static library beside it.
# Leaves the .debs in BUILD_DIR/packages for check_image_root.sh.
#
#   check_packages.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
src=$2
out=$build/packages
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL $*"; exit 1; }
step() { printf '%-5s %s (%ss)\n' OK "$1" "$SECONDS"; }

# The README's command line as written, relative paths included, from the
# root of a scratch copy of the tree under test (so the test leaves no
# build-deb/ behind and never touches one the user has).
copy=$work/src
mkdir -p "$copy"
tar -C "$src" --exclude='./build*' --exclude=./.git -cf - . | tar -C "$copy" -xf -
(cd "$copy" && deploy/debian/build.sh build-deb build-deb/packages) >"$work/build.log" 2>&1 \
  || { tail -20 "$work/build.log"; fail "deploy/debian/build.sh build-deb build-deb/packages"; }
ls "$copy"/build-deb/packages/*.deb >/dev/null 2>&1 \
  || fail "no packages in ./build-deb/packages: $(cat "$work/build.log")"
rm -rf "$out" && mkdir -p "$out"
cp "$copy"/build-deb/packages/*.deb "$out"/
for p in libcompaction0 libcompaction-dev compactiond; do
  deb=$(ls "$out/${p}_"*.deb 2>/dev/null) || fail "no ${p}_*.deb in $out"
  declare "deb_${p//-/_}=$deb"
  printf '      %-40s %8s bytes, installed %6s KiB\n' "$(basename "$deb")" \
    "$(stat -c %s "$deb")" "$(dpkg-deb -f "$deb" Installed-Size)"
done
step "packages built"

# lintian prints E: and W: lines; errors fail, the rest is shown.
rc=0
lintian --allow-root --fail-on error --tag-display-limit 0 "$out"/*.deb >"$work/lintian" 2>&1 || rc=$?
sed 's/^/      lintian: /' "$work/lintian"
[[ $rc -eq 0 ]] || fail "lintian reported errors (exit $rc)"
step "lintian: $(grep -c '^E:' "$work/lintian" || true) errors, $(grep -c '^W:' "$work/lintian" || true) warnings"

# shellcheck disable=SC2154  # declared above
{
  depends=$(dpkg-deb -f "$deb_compactiond" Depends)
  for want in 'libcompaction0 (= ' 'libc6' 'libstdc++6' 'adduser'; do
    [[ $depends == *"$want"* ]] || fail "compactiond Depends lacks '$want': $depends"
  done
  [[ $depends != *libpq5* ]] || fail "compactiond links libpq itself: $depends"
  lib_depends=$(dpkg-deb -f "$deb_libcompaction0" Depends)
  [[ $lib_depends == *libpq5* ]] || fail "libcompaction0 Depends lacks libpq5: $lib_depends"
  dpkg-deb --ctrl-tarfile "$deb_compactiond" | tar -xO ./conffiles >"$work/conffiles"
  grep -qx /etc/compactiond/compactiond.conf "$work/conffiles" || fail "conffiles: $(cat "$work/conffiles")"
  dpkg-deb --ctrl-tarfile "$deb_libcompaction0" | tar -xO ./shlibs | grep -q '^libcompaction 0 libcompaction0' \
    || fail "libcompaction0 has no shlibs entry"
  dpkg-deb --ctrl-tarfile "$deb_libcompaction0" | tar -xO ./triggers | grep -q ldconfig \
    || fail "libcompaction0 has no ldconfig trigger"
  dev_depends=$(dpkg-deb -f "$deb_libcompaction_dev" Depends)
  [[ $dev_depends == *'libcompaction0 (= '* ]] || fail "libcompaction-dev Depends: $dev_depends"
}
step "control: compactiond Depends: $depends"

root=$work/root
for deb in "$out"/*.deb; do dpkg-deb -x "$deb" "$root"; done
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
libdir=$root/usr/lib/$multiarch
for f in usr/bin/compactiond "usr/lib/$multiarch/libcompaction.so.0" \
  "usr/lib/$multiarch/libcompaction.a" usr/include/compaction/compaction.hpp \
  "usr/lib/$multiarch/cmake/compaction/compactionConfig.cmake" \
  "usr/lib/$multiarch/pkgconfig/compaction.pc" etc/compactiond/compactiond.conf \
  lib/systemd/system/compactiond.service usr/share/man/man1/compactiond.1.gz \
  usr/share/doc/compactiond/examples/alerts.yml \
  usr/share/doc/compactiond/examples/compactiond.json; do
  [[ -e $root/$f ]] || fail "extracted packages lack /$f"
done
grep -q '^ExecStart=/usr/bin/compactiond run' "$root/lib/systemd/system/compactiond.service" \
  || fail "the packaged unit does not run /usr/bin/compactiond"
grep -q '^User=compactiond' "$root/lib/systemd/system/compactiond.service" \
  || fail "the packaged unit does not run as the compactiond user"
version=$(LD_LIBRARY_PATH=$libdir "$root/usr/bin/compactiond" --version)
[[ $version == "compactiond $(dpkg-deb -f "$deb_compactiond" Version | cut -d- -f1)" ]] \
  || fail "extracted compactiond --version says '$version'"
step "extracted: $version"

cmake -S "$src/test/install/consumer" -B "$work/consumer" \
  -DCMAKE_PREFIX_PATH="$root/usr" >/dev/null
cmake --build "$work/consumer" >/dev/null
LD_LIBRARY_PATH=$libdir "$work/consumer/consumer" >/dev/null
LD_LIBRARY_PATH=$libdir "$work/consumer/consumer" "pkg_check_$$"
psql -qAtc "DROP SCHEMA pkg_check_$$ CASCADE" >/dev/null 2>&1 || true
# shellcheck disable=SC2046
g++ -std=c++20 "$src/test/install/consumer/main.cpp" -o "$work/pc_consumer" \
  $(PKG_CONFIG_PATH=$libdir/pkgconfig pkg-config --cflags --libs compaction)
LD_LIBRARY_PATH=$libdir "$work/pc_consumer" >/dev/null
step "consumer built against the extracted libcompaction-dev (find_package, pkg-config)"

# MAN_DISABLE_SECCOMP: man-db's sandbox can be refused inside a container,
# which would test the container, not the page. The dash is normalized: groff
# renders "\-" as U+2212 unless Debian's man.local (a conffile) maps it.
man_err=$(MANWIDTH=80 LC_ALL=C.UTF-8 MAN_DISABLE_SECCOMP=1 \
  man --warnings -l "$root/usr/share/man/man1/compactiond.1.gz" 2>&1 >"$work/man.txt") || true
[[ -z $man_err ]] || fail "man -l: $man_err"
has_name() {
  sed 's/\xe2\x88\x92\|\xe2\x80\x90/-/g' "$1" | tr -s ' ' \
    | grep -q 'compactiond - janitor and metrics exporter'
}
if ! has_name "$work/man.txt"; then
  # man-db's pipeline depends on the host (its sandbox, col, locale); the
  # page itself is what this checks, so render it with groff alone then.
  echo "      man -l printed $(wc -c <"$work/man.txt") bytes; the first lines:"
  head -n 8 "$work/man.txt" | od -c | head -n 12 | sed 's/^/      /'
  groff_err=$(zcat "$root/usr/share/man/man1/compactiond.1.gz" \
    | groff -man -Tutf8 -ww 2>&1 >"$work/man.txt") || true
  [[ -z $groff_err ]] || fail "groff -man: $groff_err"
  has_name "$work/man.txt" || fail "man -l and groff -man rendered no NAME section"
  echo "      WARN  man -l printed no NAME section on this host; groff -man did"
fi
step "man -l compactiond.1.gz ($(wc -l <"$work/man.txt") lines)"

bash "$src/test/install/check_install.sh" "$copy/build-deb" "$src" | sed 's/^/      /'
step "shared library install checked"
