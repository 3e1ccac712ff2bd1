set -e
! pgrep -f leaky-worker >/dev/null
systemctl is-active -q keepme
