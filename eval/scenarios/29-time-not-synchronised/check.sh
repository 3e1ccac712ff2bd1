set -e
state=$(systemctl is-enabled systemd-timesyncd 2>&1 || true)
echo "systemd-timesyncd: $state"
[ "$state" = enabled ]
# The configuration timesyncd would use: the last NTP= line across the
# main file and its drop-ins.
ntp=$(systemd-analyze cat-config systemd/timesyncd.conf | grep -E '^[[:space:]]*NTP=' | tail -n 1)
echo "effective: $ntp"
case "$ntp" in *0.debian.pool.ntp.org*) ;; *) exit 1 ;; esac
case "$ntp" in *1.debian.pool.ntp.org*) ;; *) exit 1 ;; esac
case "$ntp" in *corp.invalid*) exit 1 ;; esac
exit 0
