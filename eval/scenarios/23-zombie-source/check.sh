set -e
! pgrep -f spawner-daemon >/dev/null
sleep 1
[ -z "$(ps -eo stat= | grep '^Z')" ]
systemctl is-active -q sysward.service
