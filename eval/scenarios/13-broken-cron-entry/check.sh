set -e
f=/etc/cron.d/backup
grep -Eq '^[[:space:]]*30[[:space:]]+(2|02)[[:space:]]+\*[[:space:]]+\*[[:space:]]+\*[[:space:]]+root[[:space:]]+/usr/local/bin/backup\.sh[[:space:]]*$' $f
# no other active job lines
[ "$(grep -Ev '^[[:space:]]*(#|$|[A-Z_]+=)' $f | wc -l)" -eq 1 ]
# cron.d files must not be group/other writable and must be named without dots
[ -z "$(find $f -perm /022)" ]
