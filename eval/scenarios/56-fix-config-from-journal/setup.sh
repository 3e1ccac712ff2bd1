set -e
mkdir -p /etc/reportd /var/spool/reportd
cat > /usr/local/bin/reportd <<'P'
#!/usr/bin/python3
import os, sys, time
conf = {}
for line in open("/etc/reportd/reportd.conf"):
    if " = " in line and not line.startswith("#"):
        k, v = line.rstrip("\n").split(" = ", 1)
        conf[k] = v
spool = conf.get("spool_dir", "")
if not os.path.isdir(spool):
    print("reportd: spool_dir %s does not exist; the package's spool directory is /var/spool/reportd" % spool, file=sys.stderr, flush=True)
    sys.exit(1)
print("reportd: started, spooling to %s every %s s" % (spool, conf.get("interval")), flush=True)
while True:
    time.sleep(int(conf.get("interval", "30")))
P
chmod 755 /usr/local/bin/reportd
printf "[Unit]\nDescription=demo report daemon\n[Service]\nExecStart=/usr/local/bin/reportd\n[Install]\nWantedBy=multi-user.target\n" > /etc/systemd/system/reportd.service
printf '# reportd configuration\ninterval = 30\nspool_dir = /var/spool/reprotd\nowner = nobody\nretention_days = 14\n' > /etc/reportd/reportd.conf
cp /etc/reportd/reportd.conf /root/reportd.conf.orig
systemctl daemon-reload
systemctl start reportd || true
