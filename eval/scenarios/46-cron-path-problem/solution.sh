cat /etc/cron.d/dbdump
command -v dbdump || ls /opt/dbtools/bin
sed -i 's|^15 3 \* \* \* root dbdump --out|15 3 * * * root /opt/dbtools/bin/dbdump --out|' /etc/cron.d/dbdump
cat /etc/cron.d/dbdump
# answer: cron runs jobs with PATH=/usr/bin:/bin, and dbdump lives in /opt/dbtools/bin (added to PATH only for login shells); the job now calls /opt/dbtools/bin/dbdump by its full path, same schedule and user.
