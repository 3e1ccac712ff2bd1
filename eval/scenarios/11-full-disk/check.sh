set -e
sha256sum -c --quiet /root/eval/db.sum
use=$(df --output=pcent /srv/data | tail -1 | tr -dc 0-9)
echo "use ${use}%"
[ "$use" -lt 60 ]
