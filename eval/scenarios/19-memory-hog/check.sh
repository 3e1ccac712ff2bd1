set -e
if pgrep -f leaky-worker >/dev/null; then echo "check failed: pgrep -f leaky-worker >/dev/null succeeded"; exit 1; fi
systemctl is-active -q keepme
