set -e
want="net.ipv4.conf.all.accept_redirects=0 net.ipv4.conf.all.send_redirects=0 net.ipv4.tcp_syncookies=1 net.ipv4.icmp_echo_ignore_broadcasts=1"
for kv in $want; do
  k=${kv%=*}; v=${kv#*=}
  [ "$(sysctl -n $k)" = "$v" ] || { echo "$k is $(sysctl -n $k) now"; exit 1; }
  grep -Eqs "^[[:space:]]*$k[[:space:]]*=[[:space:]]*$v[[:space:]]*$" /etc/sysctl.d/*.conf || { echo "$k=$v not persistent"; exit 1; }
done
