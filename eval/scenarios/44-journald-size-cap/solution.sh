journalctl --disk-usage
mkdir -p /etc/systemd/journald.conf.d
printf '[Journal]\nSystemMaxUse=200M\nSystemKeepFree=1G\n' > /etc/systemd/journald.conf.d/50-size.conf
systemctl restart systemd-journald
journalctl --disk-usage
# answer: /etc/systemd/journald.conf.d/50-size.conf sets SystemMaxUse=200M and SystemKeepFree=1G; journald restarted to apply it.
