set -e
mkdir -p /etc/webapp /srv/webapp
echo "hello from webapp" > /srv/webapp/index.html
cat > /usr/local/bin/webapp <<'P'
#!/usr/bin/python3
import sys, http.server, functools
conf = dict(l.split(" = ", 1) for l in open("/etc/webapp/webapp.conf").read().split("\n") if " = " in l)
value = conf.get("listen_port", "")
try:
    port = int(value)
except ValueError:
    print("webapp: invalid listen_port %r in /etc/webapp/webapp.conf" % value, file=sys.stderr)
    sys.exit(2)
h = functools.partial(http.server.SimpleHTTPRequestHandler, directory="/srv/webapp")
http.server.HTTPServer(("127.0.0.1", port), h).serve_forever()
P
chmod 755 /usr/local/bin/webapp
printf "[Unit]\nDescription=demo web app\n[Service]\nExecStart=/usr/local/bin/webapp\n[Install]\nWantedBy=multi-user.target\n" > /etc/systemd/system/webapp.service
systemctl daemon-reload
printf 'name = demo\nlisten_port = 8282\n' > /etc/webapp/webapp.conf
cat > /usr/local/bin/rogue-listener <<'P'
#!/usr/bin/python3
import socket, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 8282)); s.listen(1)
while True: time.sleep(60)
P
chmod 755 /usr/local/bin/rogue-listener
