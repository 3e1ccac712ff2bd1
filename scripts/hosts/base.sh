#!/usr/bin/env bash
# The base root file system of the throwaway Debian hosts the tests boot
# (hostbed/src/lib.rs): debootstrap --variant=minbase bookworm plus systemd
# and what the host tests use. Cached; a warm run only checks the stamp.
#
#   sudo bash scripts/hosts/base.sh          # idempotent; seconds when cached
#
# Lands in $SYSWARD_CI_CACHE/debian-base (default /var/cache/sysward-ci).
# Rebuilt when absent or when the package list or the configuration below
# changes (the stamp file holds both). Built in a temporary directory beside
# it and renamed into place, so an interrupted build never leaves a half base.
# Needs: debootstrap (apt-get install -y debootstrap systemd-container).
set -euo pipefail

CACHE="${SYSWARD_CI_CACHE:-/var/cache/sysward-ci}"
BASE="$CACHE/debian-base"
SUITE=bookworm
PACKAGES="systemd,systemd-sysv,dbus,iproute2,procps,python3,sudo,openssh-server,passwd,ca-certificates,lynis,nftables,kmod"
# Units that must not run in a booted test host: the hosts share this
# machine's network namespace (an sshd would listen on this machine's port
# 22), and apt's daily timers would take the dpkg lock a test needs.
MASKED="ssh.service ssh.socket apt-daily.timer apt-daily-upgrade.timer apt-daily.service apt-daily-upgrade.service"
# Bump when the configuration steps below change, so caches are rebuilt.
CONFIG_VERSION=1

log() { printf '[hosts base] %s\n' "$*"; }

if [ "$(id -u)" -ne 0 ]; then
  echo "base.sh: run as root (sudo bash scripts/hosts/base.sh): debootstrap needs it" >&2
  exit 1
fi
export PATH="/usr/sbin:/sbin:$PATH"

mirror=""
if [ -r /etc/apt/sources.list.d/debian.sources ]; then
  mirror=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources)
fi
if [ -z "$mirror" ] && [ -r /etc/apt/sources.list ]; then
  mirror=$(awk '$1=="deb"{print $2; exit}' /etc/apt/sources.list)
fi
mirror=${mirror:-http://deb.debian.org/debian}

stamp_text="suite=$SUITE
packages=$PACKAGES
masked=$MASKED
config=$CONFIG_VERSION"

mkdir -p "$CACHE"
# One build at a time per cache directory.
exec 9>"$CACHE/.debian-base.lock"
flock 9

if [ -f "$BASE/.sysward-base-stamp" ] && [ "$(cat "$BASE/.sysward-base-stamp")" = "$stamp_text" ]; then
  log "cached: $BASE ($(du -sh --exclude=proc "$BASE" 2>/dev/null | cut -f1 || echo '?'); packages: $PACKAGES)"
  exit 0
fi
if [ -e "$BASE" ]; then
  log "the cached base at $BASE was built from a different package list or configuration: rebuilding"
else
  log "no cached base at $BASE: building it (about 3-5 minutes)"
fi

if ! command -v debootstrap >/dev/null 2>&1; then
  echo "base.sh: debootstrap is missing: apt-get install -y debootstrap systemd-container" >&2
  exit 1
fi

# Leftovers of an interrupted build (this process holds the lock, so no other
# build is using them).
for d in "$CACHE"/.debian-base.new.* "$CACHE"/.debian-base.old.*; do
  [ -e "$d" ] || continue
  log "removing the leftover $d"
  rm -rf --one-file-system "$d"
done

tmp=$(mktemp -d "$CACHE/.debian-base.new.XXXXXX")
cleanup() {
  # debootstrap mounts proc/sys inside the target; never delete through them.
  for m in $(awk -v p="$tmp/" 'index($5, p) == 1 {print $5}' /proc/self/mountinfo | sort -r); do
    umount -l "$m" 2>/dev/null || true
  done
  rm -rf --one-file-system "$tmp"
}
trap cleanup EXIT

T0=$(date +%s)
log "debootstrap --variant=minbase $SUITE from $mirror"
log "  packages: $PACKAGES"
if ! debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$tmp" "$mirror" >"$CACHE/debian-base.log" 2>&1; then
  tail -n 30 "$CACHE/debian-base.log" >&2
  echo "base.sh: debootstrap failed (full log: $CACHE/debian-base.log)" >&2
  exit 1
fi
log "debootstrap done in $(( $(date +%s) - T0 )) s"

log "configuring: hostname, machine-id, apt sources, masked units: $MASKED"
echo sysward-host > "$tmp/etc/hostname"
# Empty: each booted container gets a fresh machine id from systemd.
: > "$tmp/etc/machine-id"
rm -f "$tmp/var/lib/dbus/machine-id"
cat > "$tmp/etc/apt/sources.list" <<EOF
deb $mirror $SUITE main
deb $mirror $SUITE-updates main
EOF
for unit in $MASKED; do
  ln -sfn /dev/null "$tmp/etc/systemd/system/$unit"
done
# Host keys made here would be shared by every container; none is needed.
rm -f "$tmp"/etc/ssh/ssh_host_*
# apt's cache and lists are refreshed by the tests that install packages.
rm -rf "$tmp"/var/cache/apt/archives/*.deb
printf '%s\n' "$stamp_text" > "$tmp/.sysward-base-stamp"

if [ -e "$BASE" ]; then
  old=$(mktemp -d "$CACHE/.debian-base.old.XXXXXX")
  rmdir "$old"
  mv "$BASE" "$old"
  mv "$tmp" "$BASE"
  rm -rf --one-file-system "$old"
else
  mv "$tmp" "$BASE"
fi
trap - EXIT
log "built $BASE in $(( $(date +%s) - T0 )) s ($(du -sh "$BASE" | cut -f1))"
