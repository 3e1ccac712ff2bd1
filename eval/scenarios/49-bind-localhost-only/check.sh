set -e
systemctl is-active -q metrics
# After a restart too.
systemctl restart metrics
ok=0
for i in $(seq 1 30); do
  if python3 -c "import urllib.request;assert b'up 1' in urllib.request.urlopen('http://127.0.0.1:9100/').read()" 2>/dev/null; then ok=1; break; fi
  sleep 0.3
done
[ $ok = 1 ]
ss -ltnH 'sport = :9100'
addrs=$(ss -ltnH 'sport = :9100' | awk '{print $4}')
[ -n "$addrs" ]
for a in $addrs; do
  case "$a" in 127.0.0.1:9100|'[::1]:9100') ;; *) echo "listens on $a"; exit 1 ;; esac
done
