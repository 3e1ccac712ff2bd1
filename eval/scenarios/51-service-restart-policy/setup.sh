set -e
printf '#!/bin/sh\nexec sleep infinity\n' > /usr/local/bin/worker
chmod 755 /usr/local/bin/worker
printf '[Unit]\nDescription=worker\n[Service]\nExecStart=/usr/local/bin/worker\n[Install]\nWantedBy=multi-user.target\n' > /lib/systemd/system/worker.service
sha256sum /lib/systemd/system/worker.service > /root/eval/unit.sum
systemctl daemon-reload
systemctl enable -q --now worker
