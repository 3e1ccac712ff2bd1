printf 'net.ipv4.conf.all.accept_redirects = 0\nnet.ipv4.conf.all.send_redirects = 0\nnet.ipv4.tcp_syncookies = 1\nnet.ipv4.icmp_echo_ignore_broadcasts = 1\n' > /etc/sysctl.d/60-net-hardening.conf
sysctl -p /etc/sysctl.d/60-net-hardening.conf
# answer: /etc/sysctl.d/60-net-hardening.conf sets the four net.ipv4 settings; applied with sysctl -p.
