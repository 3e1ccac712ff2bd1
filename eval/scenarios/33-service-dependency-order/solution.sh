systemctl status orders --no-pager
mkdir -p /etc/systemd/system/orders.service.d
printf '[Unit]\nRequires=cache.service\nAfter=cache.service\n' > /etc/systemd/system/orders.service.d/cache.conf
systemctl daemon-reload
systemctl restart orders
systemctl is-active orders cache
# answer: orders.service had no dependency on cache.service; a drop-in adds Requires= and After=cache.service, so starting orders brings cache up first. Both are active.
