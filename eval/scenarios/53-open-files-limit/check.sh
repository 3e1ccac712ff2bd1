set -e
sha256sum -c --quiet /root/eval/unit.sum
systemctl is-active -q gatewayd
[ "$(systemctl show -p LimitNOFILE --value gatewayd)" -ge 16384 ]
pid=$(systemctl show -p MainPID --value gatewayd)
soft=$(awk '/^Max open files/ {print $4}' /proc/$pid/limits)
echo "running process: soft limit $soft"
[ "$soft" -ge 16384 ]
