df -h /var/spool/app
df -i /var/spool/app
find /var/spool/app/sessions -name 'sess_*' -mtime +30 -delete
df -i /var/spool/app
# answer: /var/spool/app ran out of inodes, taken by stale session files in /var/spool/app/sessions (older than 30 days); deleted them, the queue is untouched.
