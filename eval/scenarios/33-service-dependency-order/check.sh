set -e
sha256sum -c --quiet /root/eval/bin.sum
systemctl stop orders cache
rm -f /run/cache/ready
systemctl daemon-reload
systemctl start orders
sleep 1
systemctl is-active -q cache
systemctl is-active -q orders
systemctl show -p After orders | grep -qw cache.service
systemctl show -p Requires -p Wants -p BindsTo orders | grep -qw cache.service
