#!/usr/bin/env bash
# Installs sysward on a host without dpkg, doing what the Debian package does:
# binaries, units, sysusers/tmpfiles, users and directories, and a default
# /etc/sysward that never overwrites an operator's edited configuration.
#   sudo bash packaging/install.sh [--prefix /usr] [--bin-dir target/release]
set -euo pipefail
prefix=/usr
bin_dir=
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix=$2; shift 2 ;;
    --bin-dir) bin_dir=$2; shift 2 ;;
    *) echo "install.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
[ -n "$bin_dir" ] || bin_dir="$repo/target/release"
if [ "$(id -u)" -ne 0 ]; then
  echo "install.sh: run as root" >&2; exit 1
fi
for b in sysward sysward-agent sysward-exec sysward-gateway; do
  [ -x "$bin_dir/$b" ] || { echo "install.sh: $bin_dir/$b is missing: cargo build --release --workspace --bins" >&2; exit 1; }
done

echo "binaries → $prefix/bin"
for b in sysward sysward-agent sysward-exec sysward-gateway; do
  install -o root -g root -m 0755 "$bin_dir/$b" "$prefix/bin/$b"
done

unit_dir=/usr/lib/systemd/system
echo "units → $unit_dir"
install -d -m 0755 "$unit_dir" /usr/lib/sysusers.d /usr/lib/tmpfiles.d
for u in sysward.service sysward-run.service sysward-run.timer; do
  sed "s#/usr/bin/sysward#$prefix/bin/sysward#" "$here/systemd/$u" > "$unit_dir/$u"
  chmod 0644 "$unit_dir/$u"
done
install -m 0644 "$here/sysusers.conf" /usr/lib/sysusers.d/sysward.conf
install -m 0644 "$here/tmpfiles.conf" /usr/lib/tmpfiles.d/sysward.conf

echo "users and group"
if command -v systemd-sysusers >/dev/null 2>&1; then
  systemd-sysusers /usr/lib/sysusers.d/sysward.conf
else
  getent group sysward >/dev/null || groupadd --system sysward
  for u in sysward-agent sysward-model; do
    id "$u" >/dev/null 2>&1 || useradd --system --no-create-home --home-dir / --shell /usr/sbin/nologin "$u"
  done
fi

echo "directories"
if command -v systemd-tmpfiles >/dev/null 2>&1; then
  systemd-tmpfiles --create /usr/lib/tmpfiles.d/sysward.conf
else
  install -d -o root -g sysward -m 0750 /run/sysward
  install -d -o root -g root -m 0700 /var/lib/sysward /var/lib/sysward/.agent /etc/sysward /etc/sysward/secrets
fi

echo "default configuration (existing files are kept)"
for f in init.conf agent.md; do
  if [ -e "/etc/sysward/$f" ]; then
    echo "  /etc/sysward/$f exists: kept (new default in /etc/sysward/$f.dist)"
    install -o root -g root -m 0600 "$here/etc/$f" "/etc/sysward/$f.dist"
  else
    install -o root -g root -m 0600 "$here/etc/$f" "/etc/sysward/$f"
  fi
done

if [ -d /run/systemd/system ]; then
  systemctl daemon-reload
  echo "enable with: systemctl enable --now sysward.service sysward-run.timer"
fi
echo "check with: sysward doctor"
