set -e
mkdir -p /srv/data
mount -t tmpfs -o size=40M tmpfs /srv/data
mkdir -p /srv/data/db /srv/data/logs
head -c 4M /dev/urandom > /srv/data/db/records.dat
sha256sum /srv/data/db/records.dat > /root/eval/db.sum
head -c 34M /dev/zero > /srv/data/logs/debug.log.1
dd if=/dev/zero of=/srv/data/logs/debug.log bs=1M count=10 2>/dev/null || true
