set -e
mkdir -p /etc/billing
printf '# the database VM (db.internal) is at 10.20.0.15\ndb_host = db.internal\ndb_port = 5432\n' > /etc/billing/billing.conf
grep -v 'db\.internal' /etc/hosts > /root/eval/hosts.orig || true
cp /root/eval/hosts.orig /etc/hosts
