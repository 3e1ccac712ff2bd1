set -e
systemctl is-active -q chatty
grep -Eq '^[[:space:]]*log_level[[:space:]]*=[[:space:]]*(info|warning|error)[[:space:]]*$' /etc/chatty/chatty.conf
size() { du -sk /var/log/chatty | cut -f1; }
a=$(size)
echo "log directory ${a} KiB"
[ "$a" -lt 5000 ]
sleep 3
b=$(size)
echo "3 s later ${b} KiB"
[ $((b - a)) -lt 200 ]
