set -e
mkdir -p /var/spool/app
mount -t tmpfs -o size=64M,nr_inodes=3000 tmpfs /var/spool/app
mkdir -p /var/spool/app/queue /var/spool/app/sessions
for i in $(seq 1 20); do echo "job $i" > /var/spool/app/queue/job-$i; done
(cd /var/spool/app/queue && sha256sum job-*) > /root/eval/queue.sum
# Stale sessions until the file system has no inode left.
i=0
while : > /var/spool/app/sessions/sess_$i 2>/dev/null; do i=$((i + 1)); done
touch -d '40 days ago' /var/spool/app/sessions/sess_*
