set -e
systemctl is-active -q ingest
use=$(df --output=pcent /srv/logs | tail -1 | tr -dc 0-9)
echo "use ${use}%"
[ "$use" -lt 30 ]
[ -f /srv/logs/README ]
