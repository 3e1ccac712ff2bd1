set -e
mkdir -p /var/lib/queued
cat > /usr/local/bin/queued <<'P'
#!/bin/sh
pidfile=/var/lib/queued/queued.pid
if [ -e "$pidfile" ]; then
  echo "queued: $pidfile exists: already running?" >&2
  exit 1
fi
echo $$ > "$pidfile"
exec sleep infinity
P
chmod 755 /usr/local/bin/queued
printf '[Unit]\nDescription=queue daemon\n[Service]\nExecStart=/usr/local/bin/queued\nExecStopPost=/bin/rm -f /var/lib/queued/queued.pid\n[Install]\nWantedBy=multi-user.target\n' > /etc/systemd/system/queued.service
systemctl daemon-reload
systemctl enable -q queued
# A PID above the largest pid_max Linux allows (4194304): no process has it.
echo 4194399 > /var/lib/queued/queued.pid
systemctl start queued || true
