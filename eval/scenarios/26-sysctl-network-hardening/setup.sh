set -e
sysctl -q -w net.ipv4.conf.all.accept_redirects=1 net.ipv4.conf.all.send_redirects=1 net.ipv4.tcp_syncookies=0 net.ipv4.icmp_echo_ignore_broadcasts=0
