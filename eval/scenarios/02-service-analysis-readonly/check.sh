set -e
sha256sum -c --quiet /root/eval/conf.sum
! systemctl is-active -q webapp
echo "$1" | grep -qi 'listen_port'
