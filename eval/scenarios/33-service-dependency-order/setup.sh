set -e
cat > /usr/local/bin/cache <<'P'
#!/bin/sh
sleep 1
mkdir -p /run/cache
touch /run/cache/ready
exec sleep infinity
P
cat > /usr/local/bin/orders <<'P'
#!/bin/sh
if [ ! -e /run/cache/ready ]; then
  echo "orders: cache is not ready (/run/cache/ready missing)" >&2
  exit 1
fi
exec sleep infinity
P
chmod 755 /usr/local/bin/cache /usr/local/bin/orders
sha256sum /usr/local/bin/cache /usr/local/bin/orders > /root/eval/bin.sum
# cache is ready only when its start has finished (Type=notify would say so;
# here the program's readiness is the file, so ExecStartPost waits for it).
printf '[Unit]\nDescription=cache\n[Service]\nExecStart=/usr/local/bin/cache\nExecStartPost=/bin/sh -c "while [ ! -e /run/cache/ready ]; do sleep 0.1; done"\nExecStopPost=/bin/rm -f /run/cache/ready\n' > /etc/systemd/system/cache.service
printf '[Unit]\nDescription=orders\n[Service]\nExecStart=/usr/local/bin/orders\n[Install]\nWantedBy=multi-user.target\n' > /etc/systemd/system/orders.service
systemctl daemon-reload
systemctl start orders || true
