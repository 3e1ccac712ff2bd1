set -e
getent hosts localhost >/dev/null
[ "$(getent hosts intranet.example | awk '{print $1}')" = 10.20.30.40 ]
grep -Eq '^hosts:[[:space:]]+files([[:space:]].*)?dns' /etc/nsswitch.conf
