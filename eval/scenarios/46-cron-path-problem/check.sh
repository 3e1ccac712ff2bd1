set -e
f=/etc/cron.d/dbdump
# The job line: schedule and user kept.
job=$(grep -Ev '^[[:space:]]*(#|$|[A-Za-z_]+=)' $f)
echo "job: $job"
[ "$(echo "$job" | grep -c .)" = 1 ]
set -f
set -- $job
[ "$1 $2 $3 $4 $5 $6" = "15 3 * * * root" ]
shift 6
cmd="$*"
set +f
# As cron runs it: an empty environment, PATH from the file or cron's default.
path=$(sed -n 's/^[[:space:]]*PATH[[:space:]]*=[[:space:]]*//p' $f | tail -n 1)
path=${path:-/usr/bin:/bin}
if [ -e /usr/bin/dbdump ] || [ -e /usr/sbin/dbdump ]; then echo "dbdump copied into a system directory"; exit 1; fi
rm -f /var/backups/db.dump
env -i SHELL=/bin/sh HOME=/root LOGNAME=root PATH="$path" /bin/sh -c "$cmd"
grep -q '^-- dump' /var/backups/db.dump
[ -z "$(find $f -perm /022)" ]
