#!/usr/bin/env bash
# Builds the Debian package and checks it on this machine, as root (CI runs it
# after the test suite):
#   dpkg -i → sysward doctor passes, users/group/directories/modes, conffiles,
#   man pages and completions, `systemd-analyze verify` of the units, the
#   installed `sysward broker` serves a member of the sysward group who runs a
#   task with `sysward run`; dpkg -r keeps the (edited) configuration, a
#   reinstall does not overwrite it, dpkg -P removes it.
# The model is the scripted OpenAI-compatible server from the workspace,
# pointed at by an edit of /etc/sysward/init.conf (as an operator would), so
# doctor's model-endpoint row passes without a real model.
# Idempotent: a sysward package left by an earlier run is purged first; users
# this script created are removed at the end; nothing else is left behind.
#   sudo bash scripts/package-test.sh
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
if [ "$(id -u)" -ne 0 ]; then
  echo "package-test.sh: run as root (sudo bash scripts/package-test.sh): it installs and removes the package" >&2
  exit 1
fi
export PATH="$HOME/.cargo/bin:/usr/sbin:/sbin:$PATH"
target=${CARGO_TARGET_DIR:-$repo/target}
operator=sysward-pkgtest
work=$(mktemp -d /var/tmp/sysward-package-test.XXXXXX)
chmod 700 "$work"
broker_pid=
model_pid=
created_users=()
backups_before=$(ls /var/backups/sysward-audit-*.log 2>/dev/null || true)

step() { printf '\n== %s\n' "$*"; }
fail() { echo "package-test: FAIL: $*" >&2; exit 1; }
mode_of() { stat -c '%a %U %G' "$1"; }
expect_mode() {
  local got; got=$(mode_of "$1") || fail "$1 is missing"
  [ "$got" = "$2" ] || fail "$1 is $got, expected $2"
  echo "  $1: $got"
}

cleanup() {
  set +e
  [ -n "$broker_pid" ] && kill "$broker_pid" 2>/dev/null && wait "$broker_pid" 2>/dev/null
  [ -n "$model_pid" ] && kill "$model_pid" 2>/dev/null && wait "$model_pid" 2>/dev/null
  if dpkg-query -W -f='${Status}' sysward 2>/dev/null | grep -qv "not-installed"; then
    dpkg -P sysward >/dev/null 2>&1
  fi
  id "$operator" >/dev/null 2>&1 && userdel "$operator" 2>/dev/null
  for u in "${created_users[@]}"; do
    case "$u" in
      group:*) groupdel "${u#group:}" 2>/dev/null ;;
      *) userdel "$u" 2>/dev/null; getent group "$u" >/dev/null && groupdel "$u" 2>/dev/null ;;
    esac
  done
  # Put back what was there before the test (moved aside below).
  for d in etc/sysward var/lib/sysward var/lib/sysward-tools; do
    if [ -e "$work/saved/$d" ]; then
      rm -rf "/$d"
      mkdir -p "$(dirname "/$d")"
      mv "$work/saved/$d" "/$d"
    fi
  done
  for f in /var/backups/sysward-audit-*.log; do
    [ -e "$f" ] || continue
    printf '%s\n' "$backups_before" | grep -qxF "$f" || rm -f "$f"
  done
  rm -rf "$work"
}
trap cleanup EXIT

step "leftovers of an earlier run"
if dpkg-query -W -f='${Status}' sysward 2>/dev/null | grep -qv "not-installed"; then
  echo "  purging a sysward package left installed"
  dpkg -P sysward
fi
id "$operator" >/dev/null 2>&1 && userdel "$operator"
# A /etc/sysward, /var/lib/sysward or /var/lib/sysward-tools not owned by a
# package (the test suite
# or a hand install) is moved aside and put back at the end.
for d in etc/sysward var/lib/sysward var/lib/sysward-tools; do
  if [ -e "/$d" ]; then
    echo "  /$d exists without the package: moved aside until the end"
    mkdir -p "$work/saved/$(dirname "$d")"
    mv "/$d" "$work/saved/$d"
  fi
done
for u in sysward-agent sysward-model; do id "$u" >/dev/null 2>&1 || created_users+=("$u"); done
getent group sysward >/dev/null || created_users+=("group:sysward")

step "build the package"
deb=$(bash packaging/build-deb.sh | tail -n 1)
[ -f "$deb" ] || fail "packaging/build-deb.sh did not produce a .deb"
echo "  $deb"
dpkg-deb --info "$deb" | sed -n '1,40p' | grep -E "Package|Version|Depends|Architecture" | sed 's/^/  /'
dpkg-deb --contents "$deb" > "$work/contents"
step "lintian (no errors allowed; the warnings a maintainer would fix are fixed, the deliberate ones overridden)"
if command -v lintian >/dev/null 2>&1; then
  # lintian leaves a database file (mldbm-elf-*) in its TMPDIR per run: in
  # this run's directory, removed with it.
  mkdir -p "$work/lintian-tmp"
  lint() { TMPDIR="$work/lintian-tmp" lintian "$@"; }
  lint --tag-display-limit 0 --fail-on error "$deb" 2>&1 | grep -v "running with root privileges" | sed 's/^/  /' \
    || true
  lint --fail-on error "$deb" >/dev/null 2>&1 || fail "lintian reports errors"
  if lint "$deb" 2>/dev/null | grep -q '^W:'; then
    fail "lintian warnings: fix them or override them with a reason in packaging/lintian/sysward"
  fi
else
  fail "lintian is missing (scripts/test.sh installs it)"
fi
for p in ./usr/bin/sysward ./usr/libexec/sysward/sysward-broker ./usr/libexec/sysward/sysward-agent ./usr/libexec/sysward/sysward-exec ./usr/libexec/sysward/sysward-gateway ./usr/libexec/sysward/sysward-net ./usr/libexec/sysward/sysward-classify \
         ./usr/libexec/sysward/sysward-eval ./usr/share/sysward/eval/scenarios/10-service-bad-config/check.sh \
         ./usr/share/doc/sysward/examples/skills/disk_usage/skill.json ./usr/share/doc/sysward/examples/skills/cert_expiry/run \
         ./usr/lib/systemd/system/sysward.service ./usr/lib/systemd/system/sysward-run.service \
         ./usr/lib/systemd/system/sysward-run.timer ./usr/lib/sysusers.d/sysward.conf \
         ./usr/lib/tmpfiles.d/sysward.conf ./etc/sysward/init.conf ./etc/sysward/agent.md \
         ./usr/share/man/man8/sysward.8.gz ./usr/share/man/man8/sysward-run.8.gz \
         ./usr/share/man/man5/sysward-init.conf.5.gz ./usr/share/man/man5/sysward-agent.md.5.gz \
         ./usr/share/bash-completion/completions/sysward ./usr/share/zsh/vendor-completions/_sysward \
         ./usr/share/fish/vendor_completions.d/sysward.fish; do
  grep -q " $p\$" "$work/contents" || fail "the package lacks $p"
done
echo "  binaries, units, sysusers/tmpfiles, config, man pages, completions: present"

step "dpkg -i"
dpkg -i "$deb"

step "installed files, users, group, directories and modes"
expect_mode /usr/bin/sysward "755 root root"
for b in sysward-broker sysward-agent sysward-exec sysward-gateway sysward-net sysward-classify sysward-eval; do expect_mode "/usr/libexec/sysward/$b" "755 root root"; done
for b in sysward-broker sysward-agent sysward-exec sysward-gateway sysward-net sysward-classify sysward-eval; do
  [ ! -e "/usr/bin/$b" ] || fail "/usr/bin/$b: the internal helpers belong in /usr/libexec/sysward"
done
getent group sysward >/dev/null || fail "group sysward missing"
for u in sysward-agent sysward-model; do
  getent passwd "$u" >/dev/null || fail "user $u missing"
  shell=$(getent passwd "$u" | cut -d: -f7)
  case "$shell" in */nologin|/bin/false) ;; *) fail "user $u has the login shell $shell" ;; esac
done
echo "  users sysward-agent, sysward-model (no login shell) and group sysward exist"
expect_mode /etc/sysward "700 root root"
expect_mode /etc/sysward/secrets "700 root root"
expect_mode /etc/sysward/init.conf "600 root root"
expect_mode /etc/sysward/agent.md "600 root root"
expect_mode /var/lib/sysward "700 root root"
expect_mode /var/lib/sysward/.agent "700 root root"
expect_mode /var/lib/sysward-tools "755 root root"
expect_mode /run/sysward "750 root sysward"
conffiles=$(dpkg-query -W -f='${Conffiles}\n' sysward)
for c in /etc/sysward/init.conf /etc/sysward/agent.md; do
  printf '%s\n' "$conffiles" | grep -q " $c " || fail "$c is not a conffile"
done
echo "  conffiles: init.conf, agent.md"
man -w sysward >/dev/null 2>&1 || [ -f /usr/share/man/man8/sysward.8.gz ] || fail "man page missing"
sysward --version
# `sysward eval` finds its runner in /usr/libexec/sysward; the scenarios are
# shipped beside it in /usr/share/sysward/eval.
sysward eval --help | grep -q '^usage: sysward eval' || fail "sysward eval --help: no usage"
[ "$(ls /usr/share/sysward/eval/scenarios | wc -l)" -ge 40 ] || fail "the shipped scenarios are missing"
echo "  sysward eval runs /usr/libexec/sysward/sysward-eval; $(ls /usr/share/sysward/eval/scenarios | wc -l) scenarios shipped"

step "systemd-analyze verify"
if command -v systemd-analyze >/dev/null 2>&1; then
  systemd-analyze verify /usr/lib/systemd/system/sysward.service \
    /usr/lib/systemd/system/sysward-run.service /usr/lib/systemd/system/sysward-run.timer
  echo "  units verified"
else
  fail "systemd-analyze is missing (install systemd)"
fi

step "scripted model and an operator's configuration"
model="$target/release/sysward-scripted-model"
[ -x "$model" ] || cargo build --release --quiet -p sysward-scripted-model
cat > "$work/scenario.json" <<'JSON'
{"description": "package test: one read-only action, then DONE",
 "model": "scripted",
 "steps": [
  {"tool_calls": [{"name": "exec", "arguments": {"command": "uname", "args": ["-r"]}}]},
  {"expect": {"role_of_last": "tool"},
   "content": "EXECUTED: uname -r. VERIFIED: the kernel release was printed.\n\nTASK_STATUS: DONE"}
 ],
 "exhausted": {"content": "Nothing more to do.\n\nTASK_STATUS: DONE"}}
JSON
"$model" --scenario "$work/scenario.json" --port-file "$work/port" --exit-after-idle 600 >/dev/null &
model_pid=$!
for _ in $(seq 200); do [ -s "$work/port" ] && break; sleep 0.05; done
[ -s "$work/port" ] || fail "the scripted model did not start"
port=$(cat "$work/port")
# Edit the conffile as an operator would: dpkg -r must keep this.
sed -i "s#^API_URL=.*#API_URL=http://127.0.0.1:$port/v1#; s#^MODEL=.*#MODEL=scripted#" /etc/sysward/init.conf
echo "# package-test marker" >> /etc/sysward/init.conf
cat > /etc/sysward/01-package-test.md <<'TASK'
# Package test
Print the kernel release with `uname -r`, then report.
TASK
chmod 600 /etc/sysward/01-package-test.md
echo "  model on 127.0.0.1:$port; init.conf edited; task /etc/sysward/01-package-test.md"

step "sysward doctor"
sysward doctor || fail "sysward doctor reported a problem (above)"

step "the installed broker"
/usr/bin/sysward broker > "$work/broker.log" 2>&1 &
broker_pid=$!
for _ in $(seq 300); do [ -S /run/sysward/control.sock ] && break; sleep 0.05; done
[ -S /run/sysward/control.sock ] || { cat "$work/broker.log"; fail "the broker did not create /run/sysward/control.sock"; }
expect_mode /run/sysward/control.sock "660 root sysward"

step "a member of sysward runs the task"
useradd --system --no-create-home --home-dir / --shell /usr/sbin/nologin -G sysward "$operator"
set +e
setpriv --reuid="$operator" --regid="$operator" --init-groups -- \
  env -i PATH=/usr/bin:/bin HOME=/ /usr/bin/sysward run --json --rerun > "$work/run.jsonl" 2> "$work/run.err"
status=$?
set -e
cat "$work/run.jsonl" | sed 's/^/  /'
[ "$status" -eq 0 ] || { cat "$work/run.err" "$work/broker.log"; fail "sysward run exited $status"; }
session=$(python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).read().splitlines()[-1])["session"])' "$work/run.jsonl")
sysward audit show --json --session "$session" > "$work/audit.jsonl"
python3 - "$work/run.jsonl" "$work/audit.jsonl" <<'PY'
import json, sys
events = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
summary = events[-1]
assert summary["event"] == "summary", summary
assert summary["exit_code"] == 0, summary
tasks = {t["task"]: t["status"] for t in summary["tasks"]}
assert tasks.get("01-package-test.md") == "DONE", tasks
assert summary["actions"] >= 1, summary
# The summary matches the audit trail of the same session.
records = [json.loads(l)["event"] for l in open(sys.argv[2]) if l.strip()]
end = [r for r in records if r.get("event") == "session_end"]
assert len(end) == 1, records
end = end[0]
for k in ("actions", "denials", "exit_code"):
    assert end[k] == summary[k], (k, end[k], summary[k])
assert {t["task"]: t["status"] for t in end["tasks"]} == tasks, (end["tasks"], tasks)
tools = [r for r in records if r.get("event") == "tool"]
assert len([t for t in tools if t.get("status")]) >= summary["actions"], tools
print("  every line is JSON; summary", tasks, "actions", summary["actions"], "matches the audit of session", summary["session"])
PY
sysward audit verify
sysward audit show | tail -n 6 | sed 's/^/  /'
kill "$broker_pid"; wait "$broker_pid" 2>/dev/null || true
broker_pid=

step "dpkg -r keeps the configuration"
dpkg -r sysward
[ ! -e /usr/bin/sysward ] || fail "/usr/bin/sysward is still there after dpkg -r"
[ ! -e /usr/libexec/sysward ] || fail "/usr/libexec/sysward is still there after dpkg -r"
[ ! -e /usr/lib/systemd/system/sysward.service ] || fail "the unit is still there after dpkg -r"
grep -q "package-test marker" /etc/sysward/init.conf || fail "dpkg -r lost the edited init.conf"
[ -f /etc/sysward/agent.md ] || fail "dpkg -r removed agent.md"
[ -s /var/lib/sysward/audit.log ] || fail "dpkg -r removed the audit log"
getent passwd sysward-agent >/dev/null || fail "dpkg -r removed a user"
echo "  binaries and units gone; /etc/sysward (edited init.conf), /var/lib/sysward and users kept"

step "reinstall keeps the operator's init.conf"
dpkg -i "$deb" >/dev/null
grep -q "package-test marker" /etc/sysward/init.conf || fail "reinstalling overwrote the edited init.conf"
expect_mode /etc/sysward/init.conf "600 root root"

step "dpkg -P removes the configuration and state"
dpkg -P sysward
for p in /etc/sysward /var/lib/sysward /var/lib/sysward-tools /run/sysward /usr/bin/sysward; do
  [ ! -e "$p" ] || fail "$p is still there after dpkg -P"
done
ls /var/backups/sysward-audit-*.log >/dev/null 2>&1 || fail "purge did not keep a copy of the audit log"
getent passwd sysward-agent >/dev/null || fail "dpkg -P removed the users (they are kept by design)"
echo "  /etc/sysward, /var/lib/sysward, /var/lib/sysward-tools, /run/sysward gone; audit log copied to /var/backups; users kept"

step "package test passed"
