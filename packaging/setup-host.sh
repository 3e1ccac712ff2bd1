#!/bin/sh
# What the sysward package (postinst) and packaging/install.sh both do on a
# host: the accounts, the directories with their modes, and the default
# configuration's modes. Idempotent; never overwrites an operator's file.
# Installed as /usr/lib/sysward/setup-host.sh.
#   setup-host.sh [SHARE_DIR]   (SHARE_DIR holds sysusers.conf and tmpfiles.conf;
#                                default /usr/lib/sysward)
set -eu
share=${1:-/usr/lib/sysward}

say() { printf 'sysward: %s\n' "$*"; }

# --- the operator group and the two unprivileged service users
if command -v systemd-sysusers >/dev/null 2>&1 && [ -r "$share/sysusers.conf" ]; then
  systemd-sysusers "$share/sysusers.conf" || say "systemd-sysusers failed; creating the accounts with groupadd/useradd"
fi
# Whether or not systemd-sysusers ran (or understood every line), make sure
# each account exists with a locked password, no home and no login shell.
nologin=/usr/sbin/nologin
[ -x "$nologin" ] || nologin=/sbin/nologin
[ -x "$nologin" ] || nologin=/bin/false
if ! getent group sysward >/dev/null; then
  groupadd --system sysward
  say "created group sysward (add operators with: usermod -aG sysward NAME)"
fi
for u in sysward-agent sysward-model; do
  if ! getent passwd "$u" >/dev/null; then
    useradd --system --user-group --no-create-home --home-dir / \
      --shell "$nologin" --comment "sysward service user" "$u"
    say "created user $u"
  fi
done

# --- directories (DESIGN.md, "Layout on a host")
if command -v systemd-tmpfiles >/dev/null 2>&1 && [ -r "$share/tmpfiles.conf" ]; then
  systemd-tmpfiles --create "$share/tmpfiles.conf" || say "systemd-tmpfiles reported a problem; creating the directories with install -d"
fi
# Also without systemd-tmpfiles, and to correct modes it would leave alone.
install -d -o root -g root -m 0700 /etc/sysward /etc/sysward/secrets
install -d -o root -g root -m 0700 /var/lib/sysward /var/lib/sysward/.agent
install -d -o root -g root -m 0755 /var/lib/sysward-tools
install -d -o root -g sysward -m 0750 /run/sysward
install -d -o root -g root -m 0755 /etc/systemd/system/sysward.service.d \
  /etc/systemd/system/sysward-run.service.d /etc/systemd/system/sysward-run.timer.d

# --- the configuration stays root-only (init.conf holds API_KEY); the files
# are the operator's: only permissions that are too wide are narrowed.
for f in /etc/sysward/init.conf /etc/sysward/agent.md; do
  [ -f "$f" ] || continue
  chown root:root "$f"
  chmod go-rwx "$f"
done
