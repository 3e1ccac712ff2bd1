systemctl status reportd --no-pager
ls -l /opt/reportd/bin
sed -i 's|^ExecStart=/usr/local/bin/reportd$|ExecStart=/opt/reportd/bin/reportd|' /etc/systemd/system/reportd.service
systemctl daemon-reload
systemctl restart reportd
systemctl is-active reportd
# answer: reportd.service named /usr/local/bin/reportd, which no longer exists; the program is /opt/reportd/bin/reportd. Fixed ExecStart, reloaded and restarted: active and enabled.
