set -e
mkdir -p /opt/reportd/bin
printf '#!/bin/sh\nexec sleep infinity\n' > /opt/reportd/bin/reportd
chmod 755 /opt/reportd/bin/reportd
sha256sum /opt/reportd/bin/reportd > /root/eval/bin.sum
printf '[Unit]\nDescription=report daemon\n[Service]\nExecStart=/usr/local/bin/reportd\n[Install]\nWantedBy=multi-user.target\n' > /etc/systemd/system/reportd.service
systemctl daemon-reload
systemctl enable -q reportd
systemctl start reportd || true
