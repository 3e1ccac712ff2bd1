set -e
if pgrep -x spawner-daemon >/dev/null; then echo "check failed: pgrep -x spawner-daemon >/dev/null succeeded"; exit 1; fi
sleep 1
[ -z "$(ps -eo stat= | grep '^Z')" ]
systemctl is-active -q sysward.service
