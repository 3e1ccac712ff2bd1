set -e
mkdir -p /var/log/journal
systemctl restart systemd-journald
sleep 1
