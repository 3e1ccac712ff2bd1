systemctl cat gatewayd
mkdir -p /etc/systemd/system/gatewayd.service.d
printf '[Service]\nLimitNOFILE=16384\n' > /etc/systemd/system/gatewayd.service.d/limits.conf
systemctl daemon-reload
systemctl restart gatewayd
grep 'open files' /proc/$(systemctl show -p MainPID --value gatewayd)/limits
# answer: the vendor unit sets LimitNOFILE=1024; a drop-in (/etc/systemd/system/gatewayd.service.d/limits.conf) raises it to 16384, and gatewayd was restarted with it.
