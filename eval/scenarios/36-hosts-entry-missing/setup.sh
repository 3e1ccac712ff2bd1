set -e
mkdir -p /etc/billing
printf '# the database VM (db.internal) is at 10.20.0.15\ndb_host = db.internal\ndb_port = 5432\n' > /etc/billing/billing.conf
# The usual Debian /etc/hosts (the minimal base has none).
printf '127.0.0.1\tlocalhost\n127.0.1.1\tapp01.example.net app01\n\n::1\tlocalhost ip6-localhost ip6-loopback\nff02::1\tip6-allnodes\nff02::2\tip6-allrouters\n' > /etc/hosts
cp /etc/hosts /root/eval/hosts.orig
