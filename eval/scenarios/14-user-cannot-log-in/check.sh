set -e
[ "$(passwd -S alice | awk '{print $2}')" = P ]
[ "$(getent passwd alice | cut -d: -f7)" = /bin/bash ]
exp=$(getent shadow alice | cut -d: -f8)
[ -z "$exp" ] || [ "$exp" -gt "$(( $(date +%s) / 86400 ))" ]
[ "$(getent shadow alice | cut -d: -f2)" = "$(cat /root/eval/hash)" ]
