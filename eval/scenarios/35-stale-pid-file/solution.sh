systemctl status queued --no-pager
cat /var/lib/queued/queued.pid
ps -eo pid,args
rm -f /var/lib/queued/queued.pid
systemctl restart queued
systemctl is-active queued
# answer: /var/lib/queued/queued.pid named PID 4194399, which no process has (left by the crash); removed the stale file and restarted queued, which is active.
