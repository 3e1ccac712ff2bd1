cat /etc/cron.d/backup
sed -i 's|^30 26 \* \* \* /usr/local/bin/backup.sh$|30 2 * * * root /usr/local/bin/backup.sh|' /etc/cron.d/backup
chmod 644 /etc/cron.d/backup
# answer: The entry had hour 26 and no user field; it is now "30 2 * * * root /usr/local/bin/backup.sh".
