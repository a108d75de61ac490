#!/usr/bin/env bash
# Assembles the runtime root of deploy/container/Containerfile without a
# container engine: Debian's mmdebstrap builds a bookworm minbase root (what
# debian:bookworm-slim is made of) and installs the built libcompaction0 and
# compactiond packages into it with apt, as the Containerfile's last stage
# does. Then, in that root, as UID/GID 65532 and with the root mounted
# read-only (as Kubernetes' readOnlyRootFilesystem would), against the test
# database over TCP:
#   compactiond --version; schema install; topic register;
#   compactiond sweep --once (exit 0, one line per topic);
#   compactiond run, whose /metrics answers with compaction_up 1, and which
#   exits 0 on SIGTERM.
# Packages come from the apt sources this machine is configured with (the
# Debian archive, reached through apt only).
#
#   check_image_root.sh PACKAGE_DIR   (PG* variables: the test database)
set -euo pipefail
out=$(cd "$1" && pwd)
work=$(mktemp -d /tmp/imgroot.XXXXXX)
root=$work/root
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for m in "$root/proc" "$root/dev" "$root"; do umount -l "$m" 2>/dev/null || true; done
  psql -qAtc "DROP SCHEMA IF EXISTS img_$$ CASCADE" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL $*"; exit 1; }
step() { printf '%-5s %s (%ss)\n' OK "$1" "$SECONDS"; }

command -v mmdebstrap >/dev/null || fail "mmdebstrap not installed"
lib=$(ls "$out"/libcompaction0_*.deb) && daemon=$(ls "$out"/compactiond_*.deb) \
  || fail "no packages in $out (check_packages.sh builds them)"

# The host's Debian sources; the mirror may serve Release files past their
# Valid-Until (a pinned snapshot), which the host's apt accepts as well.
sources=()
for f in /etc/apt/sources.list.d/debian.sources /etc/apt/sources.list; do
  [[ -s $f ]] && sources+=("$f")
done
[[ ${#sources[@]} -gt 0 ]] || sources=(http://deb.debian.org/debian)
mmdebstrap --quiet --mode=root --variant=minbase \
  --aptopt='Acquire::Check-Valid-Until "false"' --aptopt='Acquire::Check-Date "false"' \
  --include="$lib" --include="$daemon" \
  --hook-dir=/usr/share/mmdebstrap/hooks/file-mirror-automount --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
  bookworm "$root" "${sources[@]}" </dev/null >"$work/mmdebstrap.log" 2>&1 \
  || { tail -20 "$work/mmdebstrap.log"; fail "mmdebstrap"; }
step "mmdebstrap minbase + $(basename "$lib") $(basename "$daemon"): $(du -sm "$root" | cut -f1) MB"

# Read-only, as the image runs; /proc and /dev for libc and libpq.
mount --bind "$root" "$root"
mount -o remount,bind,ro "$root"
mount -t proc proc "$root/proc"
mount --rbind /dev "$root/dev"
touch "$root/probe" 2>/dev/null && fail "the root is writable"
# The image's environment: the Containerfile's ENV lines, as the image runs.
mapfile -t image_env < <(sed -n 's/^ENV //p' "$(dirname "$0")/../../deploy/container/Containerfile")
in_root() {
  chroot --userspec=65532:65532 "$root" /usr/bin/env -i HOME=/nonexistent "${image_env[@]}" "$@"
}

version=$(in_root /usr/bin/compactiond --version)
step "in the root as 65532: $version"
grep -q '^compactiond:' "$root/etc/passwd" || fail "postinst created no compactiond user"

# A config file mounted over the packaged one is read: the image names it.
config=$(in_root /usr/bin/compactiond --print-config)
grep -qx 'schema = compaction  # file' <<<"$config" \
  || fail "the image reads no config file: $(head -3 <<<"$config")"
grep -qx 'listen = 0.0.0.0:9473  # environment' <<<"$config" \
  || fail "the image's listen: $(grep '^listen' <<<"$config")"
step "the image reads /etc/compactiond/compactiond.conf, listens on 0.0.0.0:9473"

db="host=127.0.0.1 port=${PGPORT:?} user=${PGUSER:-postgres} dbname=${PGDATABASE:-postgres}"
schema=img_$$
in_root /usr/bin/compactiond schema install --db "$db" --schema "$schema" >/dev/null
in_root /usr/bin/compactiond topic register orders --headless-ttl 1s --db "$db" --schema "$schema" >/dev/null
sweep=$(in_root /usr/bin/compactiond sweep --once --db "$db" --schema "$schema" --log-level warn)
[[ $sweep == "topic=orders deleted="* ]] || fail "sweep --once printed: $sweep"
step "sweep --once over TCP: $sweep"

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# Not through in_root: $! must be compactiond itself (chroot and env exec it).
chroot --userspec=65532:65532 "$root" /usr/bin/env -i HOME=/nonexistent "${image_env[@]}" \
  /usr/bin/compactiond run --db "$db" --schema "$schema" --listen "127.0.0.1:$port" \
  --log-level warn &
pids+=($!)
for _ in $(seq 100); do
  if curl -fsS --max-time 2 "http://127.0.0.1:$port/metrics" >"$work/metrics" 2>/dev/null \
    && grep -q '^compaction_ready 1' "$work/metrics"; then break; fi
  sleep 0.1
done
grep -q '^compaction_up 1' "$work/metrics" || fail "/metrics: $(head -c 300 "$work/metrics")"
grep -q '^compaction_topic_headless_ttl_seconds{topic="orders"} 1' "$work/metrics" \
  || fail "/metrics has no series of topic orders"
kill -TERM "${pids[0]}"
rc=0
wait "${pids[0]}" || rc=$?
pids=()
[[ $rc -eq 0 ]] || fail "compactiond run exited $rc after SIGTERM"
step "run: /metrics answered ($(grep -c '^compaction_' "$work/metrics") series), exit 0 on SIGTERM"
