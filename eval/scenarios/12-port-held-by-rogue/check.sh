set -e
if pgrep -x rogue-listener >/dev/null; then echo "check failed: pgrep -x rogue-listener >/dev/null succeeded"; exit 1; fi
systemctl is-active -q webapp
for i in $(seq 1 20); do python3 -c "import urllib.request;assert b'hello' in urllib.request.urlopen('http://127.0.0.1:8282/').read()" 2>/dev/null && exit 0; sleep 0.5; done
exit 1
