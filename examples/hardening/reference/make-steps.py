#!/usr/bin/env python3
"""Writes steps.json: the pack's reference steps, what a careful model does
for each task on a Debian 12 host, replayed by the scripted model in
measure.sh and tests/tests/hardening_lynis.rs. Edit here, then run
`python3 examples/hardening/reference/make-steps.py`.

Placeholders the replay fills from the host (what a model reads first):
{{SSH_PORT}}, {{TCP_PORTS}} / {{UDP_PORTS}} (listening, not loopback-only,
comma-separated, may be empty), and a step holding {{HOME}} or {{CRON}} is
repeated for each home directory / cron path that exists."""
import json, os

def tool(name, **args):
    return {"tool_calls": [{"name": name, "arguments": args}]}

def sh(script, timeout=None):
    a = {"command": script.strip() + "\n"}
    if timeout:
        a["timeout_seconds"] = timeout
    return tool("shell", **a)

def exe(cmd, *args, timeout=None):
    a = {"command": cmd, "args": list(args)}
    if timeout:
        a["timeout_seconds"] = timeout
    return tool("exec", **a)

def wf(path, content, mode="0644", validate=None):
    a = {"path": path, "content": content, "mode": mode}
    if validate:
        a["validate"] = validate
    return tool("write_file", **a)

def guard(script):
    """A validate command: a POSIX sh script, $1 = the candidate file."""
    return {"command": "sh", "args": ["-c", script.strip() + "\n", "sh", "{file}"]}

# Which accounts can still log in with a key once passwords are off.
ADMINS = r'''
admins() {
  getent passwd | awk -F: '$3 >= 1000 && $3 < 60000 && $7 !~ /nologin$/ && $7 !~ /false$/ && $7 != "" {print $1, $6}' | while read -r u home; do
    id -nG "$u" | grep -qw sudo || continue
    f="$home/.ssh/authorized_keys"
    [ -s "$f" ] && ssh-keygen -l -f "$f" >/dev/null 2>&1 && echo "$u"
  done
}
'''

# Verification helpers: one MEASURE line per measure, one RESULT line.
VERIFY = r'''
echo "CHECK __TASK__"
fail=0; blocked=0
m() { echo "MEASURE $1 $2 $3"; case "$2" in FAILED) fail=1 ;; BLOCKED) blocked=1 ;; esac; }
result() {
  if [ "$fail" = 1 ]; then r=FAILED; elif [ "$blocked" = 1 ]; then r=BLOCKED; else r=DONE; fi
  echo "RESULT: $r"
}
'''

SSH_HARDENING = """# Managed by sysward (examples/hardening/10-ssh.md).
# Read before the main file: the first value sshd obtains for a keyword wins.
# Undo: remove this file, sshd -t, systemctl reload ssh.
AllowTcpForwarding no
AllowAgentForwarding no
Compression no
LogLevel VERBOSE
MaxAuthTries 3
MaxSessions 4
TCPKeepAlive no
ClientAliveInterval 300
ClientAliveCountMax 2
X11Forwarding no
PermitEmptyPasswords no
PermitUserEnvironment no
"""

SSH_KEYS_ONLY = """# Managed by sysward (examples/hardening/10-ssh.md): keys only, no root.
# Written only while an administrator (uid >= 1000, group sudo, a login
# shell) holds a valid key. Undo: remove this file, sshd -t, systemctl reload ssh.
PermitRootLogin no
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
"""

SSH_EXPECT = ["allowtcpforwarding no", "allowagentforwarding no", "compression no",
              "loglevel VERBOSE", "maxauthtries 3", "maxsessions 4", "tcpkeepalive no",
              "clientaliveinterval 300", "clientalivecountmax 2", "x11forwarding no",
              "permitemptypasswords no", "permituserenvironment no"]
KEYS_EXPECT = ["permitrootlogin no", "passwordauthentication no",
               "kbdinteractiveauthentication no", "pubkeyauthentication yes"]

ssh_verify = VERIFY + ADMINS + r'''
v=$(sshd -T 2>&1) || { m ssh:config FAILED "sshd -T: $v"; result; exit 0; }
for kv in ''' + " ".join(f'"{k}"' for k in SSH_EXPECT) + r'''; do
  if printf '%s\n' "$v" | grep -qix "$kv"; then m "ssh:${kv%% *}" DONE "$kv"; else m "ssh:${kv%% *}" FAILED "wanted $kv, effective: $(printf '%s\n' "$v" | grep -i "^${kv%% *} ")"; fi
done
a=$(echo $(admins))
if [ -f /etc/ssh/sshd_config.d/01-sysward-keys-only.conf ]; then
  for kv in ''' + " ".join(f'"{k}"' for k in KEYS_EXPECT) + r'''; do
    if printf '%s\n' "$v" | grep -qix "$kv"; then m "ssh:${kv%% *}" DONE "$kv (key holders: $a)"; else m "ssh:${kv%% *}" FAILED "wanted $kv"; fi
  done
elif [ -z "$a" ]; then
  m ssh:keys-only BLOCKED "no administrator holds a valid SSH key: password login stays on ($(printf '%s\n' "$v" | grep -i '^passwordauthentication '))"
else
  m ssh:keys-only FAILED "key holders exist ($a) but the keys-only drop-in is missing"
fi
for k in /etc/ssh/ssh_host_*_key; do
  [ -e "$k" ] || continue
  p=$(stat -c %a "$k"); if [ "$p" = 600 ]; then m "ssh:hostkey:${k##*/}" DONE "mode 600"; else m "ssh:hostkey:${k##*/}" FAILED "mode $p"; fi
done
p=$(stat -c %a /etc/ssh/sshd_config); [ "$p" = 600 ] && m ssh:sshd_config-mode DONE "mode 600" || m ssh:sshd_config-mode FAILED "mode $p"
if systemctl is-active --quiet ssh; then m ssh:service DONE "active, listening: $(echo $(ss -Htln | awk '{print $4}'))"; else m ssh:service NOT-APPLICABLE "ssh.service is not running: the settings apply when it starts"; fi
echo "UNDO: rm /etc/ssh/sshd_config.d/00-sysward-hardening.conf /etc/ssh/sshd_config.d/01-sysward-keys-only.conf && sshd -t && systemctl reload ssh; chmod 644 /etc/ssh/sshd_config"
result
'''

tasks = []

tasks.append({
    "task": "01-audit-report.md",
    "steps": [
        sh(r'''
sshd -T 2>/dev/null | grep -Ei '^(port|permitrootlogin|passwordauthentication|kbdinteractiveauthentication|pubkeyauthentication) '
awk -F: '$3 == 0 {print "uid 0: " $1}' /etc/passwd
awk -F: '$2 == "" {print "empty password: " $1}' /etc/shadow
dpkg-query -W -f='${Package} ${Status}\n' unattended-upgrades nftables auditd libpam-pwquality 2>&1
ss -Htuln
nft list ruleset 2>&1 | head -n 40
find /etc -xdev -perm -0002 -type f 2>/dev/null | head -n 20
echo "RESULT: DONE (read-only report)"
'''),
    ],
    "done": "REPORT: the findings are in the tool result above (SSH effective values, uid-0 accounts, empty passwords, packages, listening sockets, firewall, world-writable files). Every call was read-only; the later tasks fix what they own.\n\nTASK_STATUS: DONE",
})

tasks.append({
    "task": "10-ssh.md",
    "steps": [
        sh(r'''
sshd -T >/dev/null && echo "sshd -T: ok"
sshd -T | grep -Ei '^(port|permitrootlogin|passwordauthentication|x11forwarding|allowtcpforwarding|maxauthtries) '
grep -Eq '^[[:space:]]*Include[[:space:]]+/etc/ssh/sshd_config\.d/\*\.conf' /etc/ssh/sshd_config && echo "drop-ins: included"
systemctl is-active ssh || true
'''),
        wf("/etc/ssh/sshd_config.d/00-sysward-hardening.conf", SSH_HARDENING,
           validate={"command": "sshd", "args": ["-t", "-f", "{file}"]}),
        wf("/etc/ssh/sshd_config.d/01-sysward-keys-only.conf", SSH_KEYS_ONLY,
           validate=guard(ADMINS + r'''
sshd -t -f "$1" || exit 1
a=$(echo $(admins))
if [ -z "$a" ]; then
  echo "BLOCKED: no account other than root (uid >= 1000, in group sudo, a login shell) has a valid key in ~/.ssh/authorized_keys, so password login stays on. Add a key for an administrator, check that it logs in, and run this task again."
  exit 1
fi
echo "key-holding administrators: $a"
''')),
        tool("chmod", path="/etc/ssh/sshd_config", mode="0600"),
        tool("chmod", path="{{HOSTKEY}}", mode="0600"),
        sh(r'''
if sshd -t; then
  echo "sshd -t: ok"
  if systemctl is-active --quiet ssh; then systemctl reload ssh && echo "ssh reloaded"; else echo "ssh is not running: the settings apply when it starts"; fi
else
  echo "sshd -t FAILED: the configuration is invalid, ssh was NOT reloaded"; exit 1
fi
'''),
        sh(ssh_verify),
    ],
    "done": "VERIFIED: sshd -T shows every wanted value, the keys-only settings are on for the key-holding administrators, the host keys are 0600, sshd -t passed before the reload (quoted above).\n\nTASK_STATUS: DONE",
    "blocked": "The SSH hardening settings are applied, but password login stays on: no administrator holds a valid SSH key (the check refused the keys-only drop-in, nothing else was changed). The operator must add a key for an administrator account (uid >= 1000, group sudo, a login shell) in ~/.ssh/authorized_keys, check that it logs in, and run this task again.\n\nTASK_STATUS: BLOCKED",
})

LOGIN_SED = ["-i", "-E",
             "-e", r"s/^UMASK[[:space:]].*/UMASK\t\t027/",
             "-e", r"s/^PASS_MAX_DAYS[[:space:]].*/PASS_MAX_DAYS\t180/",
             "-e", r"s/^PASS_MIN_DAYS[[:space:]].*/PASS_MIN_DAYS\t1/",
             "-e", r"s/^PASS_WARN_AGE[[:space:]].*/PASS_WARN_AGE\t14/",
             "-e", r"s/^#?SHA_CRYPT_MIN_ROUNDS[[:space:]].*/SHA_CRYPT_MIN_ROUNDS\t65536/",
             "-e", r"s/^#?SHA_CRYPT_MAX_ROUNDS[[:space:]].*/SHA_CRYPT_MAX_ROUNDS\t65536/",
             "/etc/login.defs"]

PWQUALITY = """# Managed by sysward (examples/hardening/15-accounts.md)
minlen = 12
minclass = 3
maxrepeat = 3
dictcheck = 1
"""
FAILLOCK = """Name: Lock an account for 15 minutes after 5 failed logins (pam_faillock; managed by sysward, examples/hardening/15-accounts.md)
Default: yes
Priority: 1024
Auth-Type: Primary
Auth-Initial:
	requisite	pam_faillock.so preauth
Auth:
	requisite	pam_faillock.so preauth
Account-Type: Primary
Account:
	required	pam_faillock.so
Account-Initial:
	required	pam_faillock.so
"""
FAILLOCK_AFTER = """Name: Count failed logins (pam_faillock authfail, sysward)
Default: yes
Priority: 0
Auth-Type: Primary
Auth-Initial:
	[default=die]	pam_faillock.so authfail
Auth:
	[default=die]	pam_faillock.so authfail
"""
FAILLOCK_CONF = """# Managed by sysward (examples/hardening/15-accounts.md)
deny = 5
fail_interval = 900
unlock_time = 900
"""
PROFILE = """# Managed by sysward (examples/hardening/15-accounts.md)
# Idle interactive shells end after 15 minutes; new files are not world-readable.
# Undo: remove this file.
TMOUT=900
readonly TMOUT
export TMOUT
umask 027
"""
BANNER = "Authorized access only. This system is private property and subject to monitoring: activity is logged and recorded, and unauthorized use is prohibited and may lead to criminal and legal action.\n"

acct_verify = VERIFY + r'''
for kv in "UMASK 027" "PASS_MAX_DAYS 180" "PASS_MIN_DAYS 1" "PASS_WARN_AGE 14" "SHA_CRYPT_MIN_ROUNDS 65536" "SHA_CRYPT_MAX_ROUNDS 65536"; do
  k=${kv%% *}; got=$(awk -v k="$k" '$1 == k {print $1 " " $2}' /etc/login.defs)
  if [ "$got" = "$kv" ]; then m "login.defs:$k" DONE "$got"; else m "login.defs:$k" FAILED "wanted $kv, found ${got:-nothing}"; fi
done
grep -q pam_pwquality.so /etc/pam.d/common-password && m pam:pwquality DONE "pam_pwquality in common-password (minlen 12, 3 classes)" || m pam:pwquality FAILED "pam_pwquality is not in common-password"
if grep -q 'pam_faillock.so preauth' /etc/pam.d/common-auth && grep -q 'pam_faillock.so authfail' /etc/pam.d/common-auth && grep -q pam_faillock.so /etc/pam.d/common-account; then m pam:faillock DONE "5 failures lock for 15 minutes"; else m pam:faillock FAILED "pam_faillock is not in common-auth/common-account"; fi
grep -q pam_tmpdir.so /etc/pam.d/common-session && m pam:tmpdir DONE "per-user TMPDIR" || m pam:tmpdir FAILED "pam_tmpdir is not in common-session"
grep -q '^TMOUT=900' /etc/profile.d/90-sysward-hardening.sh && m shell:tmout DONE "TMOUT=900, umask 027" || m shell:tmout FAILED "profile.d file missing"
for f in /etc/issue /etc/issue.net; do grep -q 'Authorized access only' "$f" && m "banner:$f" DONE "legal banner" || m "banner:$f" FAILED "no banner"; done
echo "UNDO: cp /etc/login.defs.sysward-orig /etc/login.defs; pam-auth-update --package --remove sysward-faillock sysward-faillock-authfail; rm /usr/share/pam-configs/sysward-faillock*; apt-get purge libpam-pwquality libpam-tmpdir; rm /etc/security/pwquality.conf.d/90-sysward.conf /etc/profile.d/90-sysward-hardening.sh; restore /etc/issue and /etc/issue.net from the broker's backups"
result
'''

tasks.append({
    "task": "15-accounts.md",
    "steps": [
        sh(r'''
grep -E '^(UMASK|PASS_MAX_DAYS|PASS_MIN_DAYS|PASS_WARN_AGE|ENCRYPT_METHOD|#?SHA_CRYPT_M(IN|AX)_ROUNDS)[[:space:]]' /etc/login.defs
dpkg-query -W -f='${Package} ${Status}\n' libpam-pwquality libpam-tmpdir 2>&1
grep -v '^#' /etc/pam.d/common-auth /etc/pam.d/common-password | grep -v ':$'
'''),
        exe("cp", "-n", "/etc/login.defs", "/etc/login.defs.sysward-orig"),
        exe("sed", *LOGIN_SED),
        exe("apt-get", "update", "-q", timeout=600),
        exe("env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y", "-q", "--no-install-recommends", "libpam-pwquality", "libpam-tmpdir", timeout=900),
        tool("mkdir", path="/etc/security/pwquality.conf.d", mode="0755"),
        wf("/etc/security/pwquality.conf.d/90-sysward.conf", PWQUALITY),
        wf("/etc/security/faillock.conf", FAILLOCK_CONF),
        wf("/usr/share/pam-configs/sysward-faillock", FAILLOCK),
        wf("/usr/share/pam-configs/sysward-faillock-authfail", FAILLOCK_AFTER),
        exe("env", "DEBIAN_FRONTEND=noninteractive", "pam-auth-update", "--package", "--enable", "sysward-faillock", "sysward-faillock-authfail"),
        wf("/etc/profile.d/90-sysward-hardening.sh", PROFILE),
        wf("/etc/issue", BANNER),
        wf("/etc/issue.net", BANNER),
        sh(acct_verify),
    ],
    "done": "VERIFIED: login.defs has the hashing rounds, ageing and umask; pam_pwquality, pam_faillock and pam_tmpdir are in the PAM stack; the idle timeout and the legal banners are in place (quoted above).\n\nTASK_STATUS: DONE",
})

SYSCTL = [
    ("net.ipv4.conf.all.rp_filter", "1"), ("net.ipv4.conf.default.rp_filter", "1"),
    ("net.ipv4.conf.all.accept_redirects", "0"), ("net.ipv4.conf.default.accept_redirects", "0"),
    ("net.ipv4.conf.all.secure_redirects", "0"), ("net.ipv4.conf.default.secure_redirects", "0"),
    ("net.ipv4.conf.all.send_redirects", "0"), ("net.ipv4.conf.default.send_redirects", "0"),
    ("net.ipv4.conf.all.accept_source_route", "0"), ("net.ipv4.conf.default.accept_source_route", "0"),
    ("net.ipv4.conf.all.log_martians", "1"), ("net.ipv4.conf.default.log_martians", "1"),
    ("net.ipv4.icmp_echo_ignore_broadcasts", "1"), ("net.ipv4.icmp_ignore_bogus_error_responses", "1"),
    ("net.ipv4.tcp_syncookies", "1"), ("net.ipv4.tcp_timestamps", "0"),
    ("net.ipv6.conf.all.accept_redirects", "0"), ("net.ipv6.conf.default.accept_redirects", "0"),
    ("net.ipv6.conf.all.accept_source_route", "0"), ("net.ipv6.conf.default.accept_source_route", "0"),
    ("kernel.kptr_restrict", "2"), ("kernel.dmesg_restrict", "1"), ("kernel.yama.ptrace_scope", "1"),
    ("kernel.unprivileged_bpf_disabled", "1"), ("net.core.bpf_jit_harden", "2"),
    ("kernel.randomize_va_space", "2"), ("kernel.sysrq", "0"), ("kernel.perf_event_paranoid", "3"),
    ("dev.tty.ldisc_autoload", "0"),
    ("fs.protected_hardlinks", "1"), ("fs.protected_symlinks", "1"),
    ("fs.protected_fifos", "2"), ("fs.protected_regular", "2"), ("fs.suid_dumpable", "0"),
]
SYSCTL_FILE = "# Managed by sysward (examples/hardening/20-sysctl.md). Undo: remove this file; reboot or set the old values with sysctl -w.\n" + "".join(f"{k} = {v}\n" for k, v in SYSCTL)
sysctl_verify = VERIFY + r'''
while read -r k _ want; do
  case "$k" in ""|\#*) continue ;; esac
  p=/proc/sys/$(printf '%s' "$k" | sed 's#[.]#/#g')
  if [ ! -e "$p" ]; then m "sysctl:$k" NOT-APPLICABLE "this kernel has no $k"; continue; fi
  got=$(sysctl -n "$k" 2>/dev/null)
  if [ "$got" = "$want" ]; then m "sysctl:$k" DONE "$got"
  elif [ ! -w "$p" ]; then m "sysctl:$k" NOT-APPLICABLE "kernel-wide, read-only here (a container): $got now, $want on a real host at boot"
  else m "sysctl:$k" FAILED "$got, wanted $want"; fi
done < /etc/sysctl.d/90-sysward-hardening.conf
echo "UNDO: rm /etc/sysctl.d/90-sysward-hardening.conf, then reboot (or sysctl -w each key back to its value in the tool result of the first step)"
result
'''
tasks.append({
    "task": "20-sysctl.md",
    "steps": [
        sh("for k in net.ipv4.ip_forward " + " ".join(k for k, _ in SYSCTL) + "; do printf '%s = %s\\n' \"$k\" \"$(sysctl -n \"$k\" 2>&1)\"; done\nsystemd-detect-virt -c || true"),
        wf("/etc/sysctl.d/90-sysward-hardening.conf", SYSCTL_FILE, validate=guard(r'''
if [ "$(sysctl -n net.ipv4.ip_forward)" = 1 ] && grep -Eq '^net\.ipv4\.conf\.[a-z]+\.(rp_filter|send_redirects)' "$1"; then
  echo "REFUSED: this host forwards packets (net.ipv4.ip_forward = 1): leave rp_filter and send_redirects out"; exit 1
fi
''')),
        sh("sysctl -p /etc/sysctl.d/90-sysward-hardening.conf 2>&1 || echo \"sysctl -p: some keys were refused (see the verification)\""),
        sh(sysctl_verify),
    ],
    "done": "VERIFIED: every key has its value or is reported NOT-APPLICABLE (a kernel-wide key that this container cannot set; it applies on a real host at boot), as quoted above.\n\nTASK_STATUS: DONE",
})

MODPROBE_ITEMS = ["dccp", "sctp", "rds", "tipc", "cramfs", "freevxfs", "jffs2", "hfs", "hfsplus", "udf", "usb-storage", "firewire-core", "firewire-ohci", "firewire-sbp2"]
MODPROBE = ("# Managed by sysward (examples/hardening/22-modules.md): uncommon network\n"
            "# protocols, file systems and removable-storage drivers are never loaded.\n"
            "# Undo: remove this file (and update-initramfs -u on a real host).\n"
            + "".join(f"install {x} /bin/true\n" for x in MODPROBE_ITEMS)
            + "".join(f"blacklist {x}\n" for x in MODPROBE_ITEMS))
mod_verify = VERIFY + r'''
for x in ''' + " ".join(MODPROBE_ITEMS) + r'''; do
  if grep -qx "install $x /bin/true" /etc/modprobe.d/90-sysward-hardening.conf; then
    if [ -r /proc/modules ] && grep -q "^$(printf '%s' "$x" | sed 's/-/_/g') " /proc/modules; then m "module:$x" FAILED "configured off but loaded now (unload it or reboot)"; else m "module:$x" DONE "never loaded"; fi
  else m "module:$x" FAILED "not in the file"; fi
done
echo "UNDO: rm /etc/modprobe.d/90-sysward-hardening.conf"
result
'''
tasks.append({
    "task": "22-modules.md",
    "steps": [
        sh("grep -rHE '^(install|blacklist) ' /etc/modprobe.d/ 2>/dev/null || echo 'no module rules'\nlsmod 2>/dev/null | grep -E '^(dccp|sctp|rds|tipc|usb_storage|firewire)' || echo 'none of them loaded'"),
        wf("/etc/modprobe.d/90-sysward-hardening.conf", MODPROBE),
        sh(mod_verify),
    ],
    "done": "VERIFIED: every listed module is configured never to load and none is loaded (quoted above).\n\nTASK_STATUS: DONE",
})

LIMITS = "# Managed by sysward (examples/hardening/25-core-dumps.md): no core dumps. Undo: remove this file.\n*\thard\tcore\t0\n*\tsoft\tcore\t0\n"
COREDUMP = "# Managed by sysward (examples/hardening/25-core-dumps.md). Undo: remove this file.\n[Coredump]\nStorage=none\nProcessSizeMax=0\n"
core_verify = VERIFY + r'''
grep -Eq '^\*[[:space:]]+hard[[:space:]]+core[[:space:]]+0' /etc/security/limits.d/90-sysward-no-core.conf && m core:limits DONE "* hard core 0" || m core:limits FAILED "limits.d file missing"
grep -q '^Storage=none' /etc/systemd/coredump.conf.d/90-sysward.conf && m core:systemd-coredump DONE "Storage=none, ProcessSizeMax=0" || m core:systemd-coredump FAILED "coredump.conf.d file missing"
d=$(sysctl -n fs.suid_dumpable)
if [ "$d" = 0 ]; then m core:fs.suid_dumpable DONE 0; elif [ ! -w /proc/sys/fs/suid_dumpable ]; then m core:fs.suid_dumpable NOT-APPLICABLE "kernel-wide, read-only in this container ($d now; 20-sysctl sets 0 at boot on a real host)"; else m core:fs.suid_dumpable FAILED "$d"; fi
echo "UNDO: rm /etc/security/limits.d/90-sysward-no-core.conf /etc/systemd/coredump.conf.d/90-sysward.conf"
result
'''
tasks.append({
    "task": "25-core-dumps.md",
    "steps": [
        sh("grep -rHE '^[^#]*core' /etc/security/limits.conf /etc/security/limits.d/ 2>/dev/null || echo 'no core limit'\nsysctl -n fs.suid_dumpable"),
        tool("mkdir", path="/etc/systemd/coredump.conf.d", mode="0755"),
        wf("/etc/security/limits.d/90-sysward-no-core.conf", LIMITS),
        wf("/etc/systemd/coredump.conf.d/90-sysward.conf", COREDUMP),
        sh(core_verify),
    ],
    "done": "VERIFIED: core dumps are off for new sessions and in systemd-coredump; fs.suid_dumpable as quoted above (NOT-APPLICABLE in a container).\n\nTASK_STATUS: DONE",
})

perm_verify = VERIFY + r'''
for p in /etc/crontab /etc/cron.d /etc/cron.daily /etc/cron.hourly /etc/cron.weekly /etc/cron.monthly /etc/cron.yearly; do
  [ -e "$p" ] || { m "perm:$p" NOT-APPLICABLE "absent"; continue; }
  got=$(stat -c %a "$p"); if [ -d "$p" ]; then want=700; else want=600; fi
  [ "$got" = "$want" ] && m "perm:$p" DONE "$got" || m "perm:$p" FAILED "$got, wanted $want"
done
for h in /home/*; do
  [ -d "$h" ] || continue
  got=$(stat -c %a "$h"); case "$got" in 700|750|710) m "perm:$h" DONE "$got" ;; *) m "perm:$h" FAILED "$got, wanted 750 or stricter" ;; esac
done
echo "UNDO: chmod 755 the cron directories and home directories, chmod 644 /etc/crontab (the old modes are in the first step's output)"
result
'''

SECURITY_SOURCES = """# Managed by sysward (examples/hardening/30-security-updates.md). Undo: remove this file.
# One-line format: Lynis (PKGS-7388) does not read deb822 .sources files.
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian-security bookworm-security main
"""
AUTO = """// Managed by sysward (examples/hardening/30-security-updates.md)
APT::Periodic::Update-Package-Lists "1";
APT::Periodic::Unattended-Upgrade "1";
APT::Periodic::AutocleanInterval "7";
"""
NOREBOOT = """// Managed by sysward: security pocket only, never reboot.
Unattended-Upgrade::Automatic-Reboot "false";
"""
upd_verify = VERIFY + r'''
grep -rqsE 'debian-security|security\.debian\.org' /etc/apt/sources.list /etc/apt/sources.list.d/ && m apt:security-source DONE "the security pocket is a source" || m apt:security-source FAILED "no security source"
for p in unattended-upgrades needrestart debsums apt-show-versions; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' && m "pkg:$p" DONE installed || m "pkg:$p" FAILED "not installed"
done
c=$(apt-config dump)
printf '%s\n' "$c" | grep -q 'APT::Periodic::Unattended-Upgrade "1"' && m apt:periodic DONE "daily unattended-upgrade" || m apt:periodic FAILED "APT::Periodic::Unattended-Upgrade is not 1"
printf '%s\n' "$c" | grep -q 'Unattended-Upgrade::Automatic-Reboot "false"' && m apt:no-reboot DONE "never reboots" || m apt:no-reboot FAILED "Automatic-Reboot is not false"
systemctl is-enabled apt-daily-upgrade.timer >/dev/null 2>&1 && m apt:timer DONE enabled || m apt:timer NOT-APPLICABLE "apt-daily-upgrade.timer is $(systemctl is-enabled apt-daily-upgrade.timer 2>&1) (masked by this test bed)"
echo "UNDO: rm /etc/apt/apt.conf.d/20auto-upgrades /etc/apt/apt.conf.d/52sysward-unattended-upgrades /etc/apt/sources.list.d/sysward-debian-security.list; apt-get purge unattended-upgrades needrestart debsums apt-show-versions"
result
'''
tasks.append({
    "task": "30-security-updates.md",
    "steps": [
        sh("grep -rhsE '^[^#]*(deb|URIs|Suites)' /etc/apt/sources.list /etc/apt/sources.list.d/ || true\ndpkg-query -W -f='${Package} ${Status}\\n' unattended-upgrades needrestart debsums apt-show-versions 2>&1"),
        wf("/etc/apt/sources.list.d/sysward-debian-security.list", SECURITY_SOURCES, validate=guard(r'''
if grep -rlsE 'debian-security|security\.debian\.org' /etc/apt/sources.list /etc/apt/sources.list.d/ | grep -v 'sysward-debian-security'; then
  echo "REFUSED: a security source is configured already (above): not adding a second one"; exit 1
fi
grep -q '^VERSION_CODENAME=bookworm$' /etc/os-release || { echo "REFUSED: not Debian 12 (bookworm): name this release's security suite instead"; exit 1; }
''')),
        exe("apt-get", "update", "-q", timeout=600),
        exe("env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y", "-q", "--no-install-recommends", "unattended-upgrades", "needrestart", "debsums", "apt-show-versions", timeout=900),
        wf("/etc/apt/apt.conf.d/20auto-upgrades", AUTO),
        wf("/etc/apt/apt.conf.d/52sysward-unattended-upgrades", NOREBOOT),
        sh(upd_verify),
    ],
    "done": "VERIFIED: the security pocket is a source, unattended-upgrades runs daily and never reboots, the update tools are installed (quoted above).\n\nTASK_STATUS: DONE",
})

NFT = r"""#!/usr/sbin/nft -f
# Managed by sysward (examples/hardening/40-nftables.md).
# Undo: cp /etc/nftables.conf.sysward-orig /etc/nftables.conf; nft flush ruleset; systemctl disable nftables.
flush ruleset

table inet filter {
  chain input {
    type filter hook input priority filter; policy drop;
    ct state established,related accept comment "keeps the current sessions"
    ct state invalid drop
    iif "lo" accept
    ip protocol icmp icmp type { echo-request, destination-unreachable, time-exceeded, parameter-problem } accept
    ip6 nexthdr icmpv6 icmpv6 type { echo-request, destination-unreachable, packet-too-big, time-exceeded, parameter-problem, nd-router-advert, nd-neighbor-solicit, nd-neighbor-advert } accept
    tcp dport {{SSH_PORT}} ct state new accept comment "ssh"
{{TCP_RULE}}{{UDP_RULE}}  }
  chain forward {
    type filter hook forward priority filter; policy accept;
  }
  chain output {
    type filter hook output priority filter; policy accept;
  }
}
"""
NFT_CHECK = r'''
check() {
  port=$(sshd -T 2>/dev/null | awk '$1 == "port" {print $2; exit}')
  [ -n "$port" ] || { echo "REFUSED: sshd -T gives no port: a default-deny firewall could lock everyone out"; return 1; }
  others=$(nft list tables 2>/dev/null | grep -vx 'table inet filter' || true)
  [ -z "$others" ] || { echo "REFUSED: other nftables tables exist ($others: Docker, libvirt, firewalld?): replacing the ruleset would break them"; return 1; }
  if command -v iptables-save >/dev/null 2>&1 && iptables-save 2>/dev/null | grep -q '^-A'; then echo "REFUSED: iptables rules exist"; return 1; fi
  missing=""
  for p in $port $(ss -Htln | awk '{print $4}' | grep -Ev '^(127\.|\[::1\]|\[::ffff:127\.)' | sed 's/.*://'); do
    grep -Eq "tcp dport (\{[^}]*[ ,{]$p[ ,}][^}]*\}|$p) " "$1" || missing="$missing tcp/$p"
  done
  for p in $(ss -Huln | awk '{print $4}' | grep -Ev '^(127\.|\[::1\]|\[::ffff:127\.)' | sed 's/.*://'); do
    grep -Eq "udp dport (\{[^}]*[ ,{]$p[ ,}][^}]*\}|$p) " "$1" || missing="$missing udp/$p"
  done
  [ -z "$missing" ] || { echo "REFUSED: listening services would be cut off:$missing"; ss -Htuln; return 1; }
  echo "every listening service stays reachable (ssh on $port)"
}
'''
NFT_GUARD = NFT_CHECK + 'check "$1"\n'

nft_verify = VERIFY + r'''
# nft needs CAP_NET_ADMIN even to list: the load and the verification are one
# step, which runs with the admin profile the load needs.
if [ -f /etc/nftables.conf.sysward-new ] && check /etc/nftables.conf.sysward-new && nft -c -f /etc/nftables.conf.sysward-new; then
  cp -n /etc/nftables.conf /etc/nftables.conf.sysward-orig
  cp /etc/nftables.conf.sysward-new /etc/nftables.conf
  if nft -f /etc/nftables.conf; then echo "loaded /etc/nftables.conf"; else m firewall:load FAILED "nft -f failed"; fi
  systemctl enable nftables
elif ! grep -q '^# Managed by sysward (examples/hardening/40-nftables.md)' /etc/nftables.conf; then
  m firewall:default-deny BLOCKED "the new ruleset is missing or failed its checks (the reason is above or in the write's result): nothing was loaded"
  result; exit 0
else
  m firewall:default-deny BLOCKED "the new ruleset failed its checks (above): the ruleset loaded before stays"
fi
r=$(nft list chain inet filter input 2>&1)
printf '%s\n' "$r" | grep -q 'policy drop' && m firewall:default-deny DONE "input policy drop" || m firewall:default-deny FAILED "$r"
port=$(sshd -T 2>/dev/null | awk '$1 == "port" {print $2; exit}')
printf '%s\n' "$r" | grep -Eq "tcp dport $port " && m firewall:ssh DONE "tcp/$port accepted" || m firewall:ssh FAILED "no rule for tcp/$port"
for p in $(ss -Htln | awk '{print $4}' | grep -Ev '^(127\.|\[::1\]|\[::ffff:127\.)' | sed 's/.*://' | sort -u); do
  printf '%s\n' "$r" | grep -Eq "tcp dport (\{[^}]*[ ,{]$p[ ,}][^}]*\}|$p) " && m "firewall:tcp/$p" DONE "listening and accepted" || m "firewall:tcp/$p" FAILED "listening but dropped"
done
for p in $(ss -Huln | awk '{print $4}' | grep -Ev '^(127\.|\[::1\]|\[::ffff:127\.)' | sed 's/.*://' | sort -u); do
  printf '%s\n' "$r" | grep -Eq "udp dport (\{[^}]*[ ,{]$p[ ,}][^}]*\}|$p) " && m "firewall:udp/$p" DONE "listening and accepted" || m "firewall:udp/$p" FAILED "listening but dropped"
done
[ "$(systemctl is-enabled nftables 2>&1)" = enabled ] && m firewall:at-boot DONE "nftables.service enabled" || m firewall:at-boot FAILED "nftables.service is $(systemctl is-enabled nftables 2>&1)"
echo "UNDO: cp /etc/nftables.conf.sysward-orig /etc/nftables.conf; nft flush ruleset; systemctl disable nftables"
result
'''
tasks.append({
    "task": "40-nftables.md",
    "steps": [
        sh("sshd -T 2>/dev/null | grep '^port '\nss -Htulnp\nnft list ruleset\ncommand -v iptables-save >/dev/null && iptables-save || echo 'no iptables'"),
        wf("/etc/nftables.conf.sysward-new", NFT, mode="0755", validate=guard(NFT_GUARD)),
        sh(NFT_CHECK + nft_verify, timeout=120),
    ],
    "done": "VERIFIED: the input chain drops by default and accepts SSH and every listening service; nftables is enabled at boot (quoted above).\n\nTASK_STATUS: DONE",
    "blocked": "BLOCKED: the firewall check refused the ruleset (the reason is quoted above); nothing was loaded.\n\nTASK_STATUS: BLOCKED",
})

tasks.append({
    "task": "45-permissions.md",
    "steps": [
        sh("stat -c '%a %U %n' /etc/crontab /etc/cron.* /home/* 2>/dev/null || true"),
        tool("chmod", path="{{CRON}}", mode="{{CRON_MODE}}"),
        tool("chmod", path="{{HOME}}", mode="0750"),
        sh(perm_verify),
    ],
    "done": "VERIFIED: cron files are 0600/0700 and home directories 0750 or stricter (quoted above).\n\nTASK_STATUS: DONE",
})

audit_check = VERIFY + r'''
v=$(systemd-detect-virt -c 2>/dev/null || true)
if [ -n "$v" ] && [ "$v" != none ]; then
  m auditd NOT-APPLICABLE "in a container ($v) the kernel audit subsystem belongs to the host: run this task on the host itself"
  echo "RESULT: BLOCKED"; exit 0
fi
if systemctl is-active --quiet auditd && [ "$(auditctl -l | grep -c -- '-k ')" -ge 14 ]; then m auditd DONE "active, $(auditctl -l | wc -l) rules"; else m auditd FAILED "not active or rules missing"; fi
result
'''
tasks.append({
    "task": "50-auditd.md",
    "steps": [sh(audit_check)],
    "done": "VERIFIED: auditd is active with the rules (quoted above).\n\nTASK_STATUS: DONE",
    "blocked": "BLOCKED: not applicable on this host: it is a container, whose kernel audit subsystem belongs to the machine that runs it (quoted above). Nothing was changed; run this task on the host itself.\n\nTASK_STATUS: BLOCKED",
})

for t in tasks:
    for st in t["steps"]:
        a = st["tool_calls"][0]["arguments"]
        if "command" in a and isinstance(a["command"], str):
            a["command"] = a["command"].replace("__TASK__", t["task"])

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "steps.json")
with open(out, "w") as f:
    json.dump({"description": "reference steps of the hardening pack (generated by make-steps.py)", "tasks": tasks}, f, indent=1)
    f.write("\n")
print(f"wrote {out}: {sum(len(t['steps']) for t in tasks)} steps in {len(tasks)} tasks")
