df -h /srv/data
du -ah /srv/data
rm -f /srv/data/logs/debug.log.1
truncate -s 0 /srv/data/logs/debug.log
df -h /srv/data
# answer: /srv/data was filled by debug logs in /srv/data/logs; removed the rotated debug.log.1 and truncated debug.log; the data in /srv/data/db is untouched.
