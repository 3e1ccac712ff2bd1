set -e
mkdir -p /etc/chatty /var/log/chatty
printf 'log_level = debug\n' > /etc/chatty/chatty.conf
cat > /usr/local/bin/chatty <<'P'
#!/usr/bin/python3
import time
level = "info"
for line in open("/etc/chatty/chatty.conf"):
    k, _, v = line.partition("=")
    if k.strip() == "log_level":
        level = v.strip()
log = open("/var/log/chatty/chatty.log", "a")
n = 0
while True:
    n += 1
    if level == "debug":
        log.write("DEBUG tick %d %s\n" % (n, "x" * 400))
    elif n % 50 == 0:
        log.write("INFO alive %d\n" % n)
    log.flush()
    time.sleep(0.001 if level == "debug" else 0.1)
P
chmod 755 /usr/local/bin/chatty
printf '[Unit]\nDescription=chatty\n[Service]\nExecStart=/usr/local/bin/chatty\n[Install]\nWantedBy=multi-user.target\n' > /etc/systemd/system/chatty.service
systemctl daemon-reload
head -c 60M /dev/zero | tr '\0' 'D' > /var/log/chatty/chatty.log
systemctl enable -q --now chatty
