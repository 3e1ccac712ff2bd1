df -h /srv/logs
du -sh /srv/logs
find /proc/[0-9]*/fd -lname '/srv/logs/*(deleted)' -printf '%p -> %l\n'
systemctl restart ingest
df -h /srv/logs
# answer: the ingest service held the deleted /srv/logs/ingest.log (32 MiB) open; restarting ingest released it. ingest is active and /srv/logs has its space back.
