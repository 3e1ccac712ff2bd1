set -e
out=$(logrotate -d /etc/logrotate.conf 2>&1) || { echo "$out" | tail -20; exit 1; }
if echo "$out" | grep -i 'error' | grep -q webapp; then echo "$out" | grep -i error; exit 1; fi
grep -Eq '^[[:space:]]*rotate[[:space:]]+7' /etc/logrotate.d/webapp
grep -Eq '^[[:space:]]*compress' /etc/logrotate.d/webapp
grep -Eq '^[[:space:]]*daily' /etc/logrotate.d/webapp
ls /var/log/webapp/app.log.1* >/dev/null 2>&1
[ "$(stat -c %s /var/log/webapp/app.log 2>/dev/null || echo 0)" -lt 1000000 ]
