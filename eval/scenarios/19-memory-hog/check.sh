set -e
if pgrep -x leaky-worker >/dev/null; then echo "check failed: pgrep -x leaky-worker >/dev/null succeeded"; exit 1; fi
systemctl is-active -q keepme
