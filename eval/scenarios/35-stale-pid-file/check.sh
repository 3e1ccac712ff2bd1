set -e
sleep 1
systemctl is-active -q queued
main=$(systemctl show -p MainPID --value queued)
[ "$main" -gt 0 ]
[ "$(cat /var/lib/queued/queued.pid)" = "$main" ]
