#!/usr/bin/env bash
# Installs sysward on a host without dpkg, doing what the Debian package does:
# the four binaries, systemd units, sysusers/tmpfiles, man pages and shell
# completions (generated from the installed binary), the accounts and the
# directories (packaging/setup-host.sh, the same script the package's postinst
# runs), and a default /etc/sysward that never overwrites an operator's file.
#
#   sudo bash packaging/install.sh [--prefix /usr] [--bin-dir target/release]
#   sudo bash packaging/install.sh --uninstall          # like dpkg -r: keeps /etc/sysward, /var/lib/sysward
#   sudo bash packaging/install.sh --uninstall --purge  # like dpkg -P: removes them too (audit log copied to /var/backups)
#
# Users and the group are kept on uninstall, as with the package.
set -euo pipefail
prefix=/usr
bin_dir=
uninstall=0
purge=0
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix=$2; shift 2 ;;
    --bin-dir) bin_dir=$2; shift 2 ;;
    --uninstall) uninstall=1; shift ;;
    --purge) purge=1; shift ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "install.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
[ -n "$bin_dir" ] || bin_dir="${CARGO_TARGET_DIR:-$repo/target}/release"
if [ "$(id -u)" -ne 0 ]; then
  echo "install.sh: run as root (sudo bash packaging/install.sh)" >&2; exit 1
fi
if command -v dpkg-query >/dev/null 2>&1 && dpkg-query -W -f='${Status}' sysward 2>/dev/null | grep -q "ok installed"; then
  echo "install.sh: the sysward Debian package is installed; use apt/dpkg instead of this script" >&2; exit 1
fi

unit_dir=/usr/lib/systemd/system
lib_dir=/usr/lib/sysward
units="sysward.service sysward-run.service sysward-run.timer"
man_dir=/usr/share/man/man8
systemd_running() { [ -d /run/systemd/system ]; }

if [ "$uninstall" = 1 ]; then
  if systemd_running; then
    systemctl disable --now sysward-run.timer sysward.service >/dev/null 2>&1 || true
  fi
  for b in sysward sysward-broker sysward-agent sysward-exec sysward-gateway sysward-net sysward-classify; do rm -f "$prefix/bin/$b"; done
  for u in $units; do rm -f "$unit_dir/$u"; done
  rm -f /usr/lib/sysusers.d/sysward.conf /usr/lib/tmpfiles.d/sysward.conf
  rm -f "$man_dir"/sysward*.8 "$man_dir"/sysward*.8.gz
  rm -f /usr/share/bash-completion/completions/sysward /usr/share/zsh/vendor-completions/_sysward \
        /usr/share/fish/vendor_completions.d/sysward.fish
  rm -rf "$lib_dir" /run/sysward
  if systemd_running; then systemctl daemon-reload; fi
  if [ "$purge" = 1 ]; then
    if [ -s /var/lib/sysward/audit.log ]; then
      install -d -m 0755 /var/backups
      keep="/var/backups/sysward-audit-$(date -u +%Y%m%dT%H%M%SZ).log"
      install -o root -g root -m 0600 /var/lib/sysward/audit.log "$keep"
      echo "the audit log was kept as $keep"
    fi
    rm -rf /etc/sysward /var/lib/sysward /var/lib/sysward-tools
    echo "sysward removed with its configuration and state (users and group kept)"
  else
    echo "sysward removed; /etc/sysward and /var/lib/sysward kept (--purge removes them)"
  fi
  exit 0
fi

for b in sysward sysward-broker sysward-agent sysward-exec sysward-gateway sysward-net sysward-classify; do
  [ -x "$bin_dir/$b" ] || { echo "install.sh: $bin_dir/$b is missing: build with cargo build --release --workspace --bins, or pass --bin-dir" >&2; exit 1; }
done

echo "binaries → $prefix/bin"
install -d -m 0755 "$prefix/bin"
for b in sysward sysward-broker sysward-agent sysward-exec sysward-gateway sysward-net sysward-classify; do
  install -o root -g root -m 0755 "$bin_dir/$b" "$prefix/bin/$b"
done

echo "units → $unit_dir"
install -d -m 0755 "$unit_dir" /usr/lib/sysusers.d /usr/lib/tmpfiles.d "$lib_dir"
for u in $units; do
  sed -e "s#/usr/libexec/sysward/sysward-broker#$prefix/bin/sysward-broker#" \
      -e "s#/usr/bin/sysward#$prefix/bin/sysward#" "$here/systemd/$u" > "$unit_dir/$u"
  chmod 0644 "$unit_dir/$u"
done
install -m 0644 "$here/sysusers.conf" /usr/lib/sysusers.d/sysward.conf
install -m 0644 "$here/tmpfiles.conf" /usr/lib/tmpfiles.d/sysward.conf
install -m 0644 "$here/sysusers.conf" "$here/tmpfiles.conf" "$lib_dir/"
install -m 0755 "$here/setup-host.sh" "$lib_dir/setup-host.sh"

echo "man pages and completions"
gen=$(mktemp -d)
trap 'rm -rf "$gen"' EXIT
"$prefix/bin/sysward" generate man "$gen/man"
"$prefix/bin/sysward" generate completions "$gen/completions"
install -d -m 0755 "$man_dir" /usr/share/bash-completion/completions \
  /usr/share/zsh/vendor-completions /usr/share/fish/vendor_completions.d
for m in "$gen"/man/*.8; do gzip -9n < "$m" > "$man_dir/$(basename "$m").gz"; chmod 0644 "$man_dir/$(basename "$m").gz"; done
install -m 0644 "$gen/completions/sysward.bash" /usr/share/bash-completion/completions/sysward
install -m 0644 "$gen/completions/_sysward" /usr/share/zsh/vendor-completions/_sysward
install -m 0644 "$gen/completions/sysward.fish" /usr/share/fish/vendor_completions.d/sysward.fish

echo "users, group and directories"
"$lib_dir/setup-host.sh" "$lib_dir"

echo "default configuration (an existing file is kept; the new default goes beside it as .dist)"
for f in init.conf agent.md; do
  if [ -e "/etc/sysward/$f" ]; then
    if ! cmp -s "$here/etc/$f" "/etc/sysward/$f"; then
      install -o root -g root -m 0600 "$here/etc/$f" "/etc/sysward/$f.dist"
      echo "  /etc/sysward/$f kept (yours); the packaged default is /etc/sysward/$f.dist"
    fi
  else
    install -o root -g root -m 0600 "$here/etc/$f" "/etc/sysward/$f"
  fi
done

if systemd_running; then
  systemctl daemon-reload
  systemctl try-restart sysward.service || true
  echo "start the broker with: systemctl enable --now sysward.service (unattended runs: sysward-run.timer)"
fi
echo "next: set API_URL and MODEL in /etc/sysward/init.conf, then run: sysward doctor"
