set -e
mkdir -p /etc/cron.d
printf '#!/bin/sh\ntar czf /var/backups/etc.tgz /etc\n' > /usr/local/bin/backup.sh
chmod 755 /usr/local/bin/backup.sh
printf 'SHELL=/bin/sh\n# nightly backup\n30 26 * * * /usr/local/bin/backup.sh\n' > /etc/cron.d/backup
