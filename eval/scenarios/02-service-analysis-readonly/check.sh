set -e
sha256sum -c --quiet /root/eval/conf.sum
if systemctl is-active -q webapp; then echo "check failed: systemctl is-active -q webapp succeeded"; exit 1; fi
echo "$1" | grep -qi 'listen_port'
