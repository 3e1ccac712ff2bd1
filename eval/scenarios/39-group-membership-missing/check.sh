set -e
id -nG dave | tr ' ' '\n' | grep -qx analysts
runuser -u dave -- cat /srv/reports/q3.txt >/dev/null
runuser -u erin -- cat /srv/reports/q3.txt >/dev/null
if runuser -u mallory -- cat /srv/reports/q3.txt >/dev/null 2>&1; then echo "mallory can read it"; exit 1; fi
[ "$(stat -c '%a %U %G' /srv/reports)" = "2750 root analysts" ]
[ "$(stat -c '%a %U %G' /srv/reports/q3.txt)" = "640 root analysts" ]
