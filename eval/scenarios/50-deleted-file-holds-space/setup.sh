set -e
mkdir -p /srv/logs
mount -t tmpfs -o size=40M tmpfs /srv/logs
cat > /usr/local/bin/ingest <<'P'
#!/usr/bin/python3
import os, time
log = open("/srv/logs/ingest.log", "a")
if not os.path.exists("/var/lib/ingest.first-run"):
    # The first start writes a big backlog, which someone later deleted by hand.
    log.write("backlog " * (4 * 1024 * 1024))
    log.flush()
    open("/var/lib/ingest.first-run", "w").close()
while True:
    time.sleep(60)
P
chmod 755 /usr/local/bin/ingest
printf '[Unit]\nDescription=ingest\n[Service]\nExecStart=/usr/local/bin/ingest\n[Install]\nWantedBy=multi-user.target\n' > /etc/systemd/system/ingest.service
systemctl daemon-reload
systemctl enable -q --now ingest
for i in $(seq 1 50); do [ "$(stat -c %s /srv/logs/ingest.log 2>/dev/null || echo 0)" -ge 33554432 ] && break; sleep 0.2; done
rm /srv/logs/ingest.log
echo "keep" > /srv/logs/README
