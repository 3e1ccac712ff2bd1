set -e
mkdir -p /srv/archive /srv/www /srv/tmp
head -c 60M /dev/zero > /srv/archive/backup-2024.tar
head -c 1M /dev/zero > /srv/www/index.html
sha256sum /srv/archive/backup-2024.tar > /root/eval/archive.sum
