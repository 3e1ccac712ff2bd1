#!/usr/bin/env bash
# The Ansible controller the fleet tests drive: ansible-core and ansible-lint
# (pinned) from PyPI in a venv under $SYSWARD_CI_CACHE (default
# /var/cache/sysward-ci/ansible-venv), created when absent. Idempotent: a warm
# re-run only checks the versions (seconds). Prints the venv's bin directory
# on the last line.
#   sudo bash scripts/fleet/setup.sh
set -euo pipefail

CACHE="${SYSWARD_CI_CACHE:-/var/cache/sysward-ci}"
VENV="$CACHE/ansible-venv"
ANSIBLE_CORE_VERSION="2.19.14"
ANSIBLE_LINT_VERSION="26.10.1"
PYTHON="${SYSWARD_CI_PYTHON:-/usr/bin/python3}"

log() { printf '[fleet setup] %s\n' "$*" >&2; }
mkdir -p "$CACHE/pip" "$CACHE/logs"
exec 9>"$CACHE/.fleet-setup.lock"
flock 9

# The controller side: ssh (client), ssh-keygen; python3-venv for the venv.
need=()
for pkg in openssh-client python3-venv; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || need+=("$pkg")
done
if [ "${#need[@]}" -gt 0 ]; then
  log "apt-get install ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q --no-install-recommends "${need[@]}" >"$CACHE/logs/fleet-apt.log" 2>&1 || {
    apt-get update -q >>"$CACHE/logs/fleet-apt.log" 2>&1
    apt-get install -y -q --no-install-recommends "${need[@]}" >>"$CACHE/logs/fleet-apt.log" 2>&1 ||
      { tail -30 "$CACHE/logs/fleet-apt.log" >&2; exit 1; }
  }
fi

stamp="$VENV/.sysward-fleet-stamp"
want="ansible-core==$ANSIBLE_CORE_VERSION ansible-lint==$ANSIBLE_LINT_VERSION"
if [ -x "$VENV/bin/ansible-playbook" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  log "cached: $want in $VENV"
else
  t0=$(date +%s)
  log "creating $VENV with $want (a minute or two)"
  # Built where it stays (its scripts name their interpreter by path); the
  # stamp, written last, marks it complete.
  rm -rf "$VENV"
  "$PYTHON" -m venv "$VENV"
  if ! PIP_CACHE_DIR="$CACHE/pip" "$VENV/bin/pip" install -q --disable-pip-version-check \
      "ansible-core==$ANSIBLE_CORE_VERSION" "ansible-lint==$ANSIBLE_LINT_VERSION" \
      >"$CACHE/logs/fleet-pip.log" 2>&1; then
    tail -30 "$CACHE/logs/fleet-pip.log" >&2
    rm -rf "$VENV"
    exit 1
  fi
  echo "$want" >"$stamp"
  log "done in $(( $(date +%s) - t0 )) s"
fi
"$VENV/bin/ansible-playbook" --version | sed -n 1p >&2
echo "$VENV/bin"
