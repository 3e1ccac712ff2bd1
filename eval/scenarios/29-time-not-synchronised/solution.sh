systemctl is-enabled systemd-timesyncd
cat /etc/systemd/timesyncd.conf
printf '[Time]\nNTP=0.debian.pool.ntp.org 1.debian.pool.ntp.org\n' > /etc/systemd/timesyncd.conf
systemctl unmask systemd-timesyncd
systemctl enable systemd-timesyncd
systemctl restart systemd-timesyncd
# answer: timesyncd was masked and pointed at ntp1.corp.invalid; it now uses 0.debian.pool.ntp.org and 1.debian.pool.ntp.org, unmasked and enabled.
