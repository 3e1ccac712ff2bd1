set -e
conf=$(systemd-analyze cat-config systemd/journald.conf)
val() { echo "$conf" | grep -E "^[[:space:]]*$1=" | tail -n 1 | cut -d= -f2 | tr -d ' '; }
echo "SystemMaxUse=$(val SystemMaxUse) SystemKeepFree=$(val SystemKeepFree)"
[ "$(val SystemMaxUse)" = 200M ]
[ "$(val SystemKeepFree)" = 1G ]
# Not by editing the packaged file (an upgrade would ask about or replace it).
if grep -Eq '^[[:space:]]*System(MaxUse|KeepFree)=' /etc/systemd/journald.conf; then echo "set in journald.conf itself"; exit 1; fi
# The running journald started after the newest drop-in was written.
newest=$(stat -c %Y /etc/systemd/journald.conf.d/*.conf | sort -n | tail -n 1)
started=$(systemctl show -p ActiveEnterTimestamp --value systemd-journald)
[ "$(date -d "$started" +%s)" -ge "$newest" ] || { echo "journald not restarted since"; exit 1; }
