set -e
systemctl is-active -q reportd
expected='# reportd configuration
interval = 30
spool_dir = /var/spool/reportd
owner = nobody
retention_days = 14'
[ "$(cat /etc/reportd/reportd.conf)" = "$expected" ] || { echo "the configuration is not the original with only spool_dir fixed:"; diff /root/reportd.conf.orig /etc/reportd/reportd.conf || true; exit 1; }
