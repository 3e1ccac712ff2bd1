set -e
mkdir -p /etc/metrics
printf '# address and port to listen on\nbind = 0.0.0.0\nport = 9100\n' > /etc/metrics/metrics.conf
cat > /usr/local/bin/metricsd <<'P'
#!/usr/bin/python3
import http.server
conf = {}
for line in open("/etc/metrics/metrics.conf"):
    k, sep, v = line.partition("=")
    if sep and not k.strip().startswith("#"):
        conf[k.strip()] = v.strip()
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"up 1\n"
        self.send_response(200)
        self.end_headers()
        self.wfile.write(body)
http.server.HTTPServer((conf.get("bind", "0.0.0.0"), int(conf.get("port", "9100"))), H).serve_forever()
P
chmod 755 /usr/local/bin/metricsd
printf '[Unit]\nDescription=metrics\n[Service]\nExecStart=/usr/local/bin/metricsd\n[Install]\nWantedBy=multi-user.target\n' > /etc/systemd/system/metrics.service
systemctl daemon-reload
systemctl enable -q --now metrics
