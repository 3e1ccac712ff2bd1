set -e
(cd /var/spool/app/queue && sha256sum -c --quiet /root/eval/queue.sum)
free=$(df --output=iavail /var/spool/app | tail -1 | tr -dc 0-9)
echo "free inodes: $free"
[ "$free" -ge 1000 ]
f=/var/spool/app/.eval-probe
: > $f
rm -f $f
