systemctl list-timers --all --no-pager
systemd-analyze verify /etc/systemd/system/cleanup.timer
printf '[Unit]\nDescription=cleanup every 15 minutes\n[Timer]\nOnCalendar=*:0/15\nPersistent=true\n[Install]\nWantedBy=timers.target\n' > /etc/systemd/system/cleanup.timer
systemctl daemon-reload
systemctl enable --now cleanup.timer
systemctl list-timers cleanup.timer --no-pager
# answer: cleanup.timer had an invalid OnCalendar (second 61) and no [Install] section, so it was never enabled. It now has OnCalendar=*:0/15, is enabled and active.
