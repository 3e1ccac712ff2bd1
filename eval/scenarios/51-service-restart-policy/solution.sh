systemctl cat worker
mkdir -p /etc/systemd/system/worker.service.d
printf '[Service]\nRestart=on-failure\nRestartSec=2\n' > /etc/systemd/system/worker.service.d/restart.conf
systemctl daemon-reload
systemctl show -p Restart -p RestartUSec worker
# answer: worker.service had no Restart=; the drop-in /etc/systemd/system/worker.service.d/restart.conf sets Restart=on-failure and RestartSec=2 (the packaged unit is unchanged).
