set -e
mkdir -p /etc/webapp
printf 'name = demo\nlisten_port = eighty\n' > /etc/webapp/webapp.conf
cat > /usr/local/bin/webapp <<'P'
#!/usr/bin/python3
import sys, http.server
conf = dict(l.split(' = ', 1) for l in open('/etc/webapp/webapp.conf').read().split('\n') if ' = ' in l)
try:
    port = int(conf['listen_port'])
except ValueError:
    print(f"webapp: invalid listen_port {conf['listen_port']!r} in /etc/webapp/webapp.conf", file=sys.stderr)
    sys.exit(2)
http.server.HTTPServer(('127.0.0.1', port), http.server.SimpleHTTPRequestHandler).serve_forever()
P
chmod 755 /usr/local/bin/webapp
printf '[Unit]\nDescription=demo web app\n[Service]\nExecStart=/usr/local/bin/webapp\n[Install]\nWantedBy=multi-user.target\n' > /etc/systemd/system/webapp.service
systemctl daemon-reload
systemctl start webapp || true
sha256sum /etc/webapp/webapp.conf > /root/eval/conf.sum
