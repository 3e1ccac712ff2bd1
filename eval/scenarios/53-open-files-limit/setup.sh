set -e
printf '#!/bin/sh\nexec sleep infinity\n' > /usr/local/bin/gatewayd
chmod 755 /usr/local/bin/gatewayd
printf '[Unit]\nDescription=gateway daemon\n[Service]\nExecStart=/usr/local/bin/gatewayd\nLimitNOFILE=1024\n[Install]\nWantedBy=multi-user.target\n' > /lib/systemd/system/gatewayd.service
sha256sum /lib/systemd/system/gatewayd.service > /root/eval/unit.sum
systemctl daemon-reload
systemctl enable -q --now gatewayd
